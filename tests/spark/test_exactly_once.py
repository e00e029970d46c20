"""Exactly-once through a driver crash: kill -9 of a running streaming query, restart from its checkpoint.

The query runs in its own process group (stream_job.py: the Python driver, its JVM and its Python
workers). While messages keep arriving it is killed with SIGKILL in the middle of a micro-batch (an
offsets-log entry without its commit), then restarted on the same checkpoint and output directory
with Trigger.AvailableNow. The parquet output, read through the file sink's metadata log, must hold
every message exactly once; no de-duplication is applied.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from broker.client import Message
from tests.spark.spark_harness import ThreadedCluster

TOPIC = "SparkKill9"
REPO = Path(__file__).resolve().parents[2]  # stream_job runs as `python -m tests.spark.stream_job` from here


def start_job(cluster: ThreadedCluster, tmp: Path, available_now: bool, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "tests.spark.stream_job",
        f"--namesrv={cluster.namesrv_addr}",
        f"--topic={TOPIC}",
        f"--checkpoint={tmp / 'ckpt'}",
        f"--out={tmp / 'out'}",
        f"--tmp={tmp / 'spark'}",
        "--max-offsets=40",
    ]
    if available_now:
        cmd.append("--available-now")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    with log.open("ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)


def batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()} if directory.exists() else set()


@pytest.mark.slow
def test_kill_9_of_the_driver_then_restart_gives_every_message_exactly_once(
    spark: Any, cluster: ThreadedCluster, tmp_path: Path
) -> None:
    cluster.create_topic(TOPIC, 4)
    bodies = [f"kill9-{i}".encode() for i in range(900)]
    cluster.send([Message(TOPIC, b) for b in bodies[:300]])
    log = tmp_path / "job.log"
    job = start_job(cluster, tmp_path, available_now=False, log=log)

    # Keep producing while the query runs, so the crash lands amid new data.
    stop_producing = threading.Event()
    produced = [300]  # how far the producer thread got

    def produce() -> None:
        while produced[0] < 600 and not stop_producing.is_set():
            cluster.send([Message(TOPIC, b) for b in bodies[produced[0] : produced[0] + 20]])
            produced[0] += 20
            time.sleep(0.2)

    producer = threading.Thread(target=produce)
    producer.start()
    offsets, commits = tmp_path / "ckpt" / "offsets", tmp_path / "ckpt" / "commits"
    in_flight = False
    deadline = time.monotonic() + 150
    try:
        while time.monotonic() < deadline and job.poll() is None:
            done = batch_ids(commits)
            planned = batch_ids(offsets)
            # At least three finished batches, and one planned but not committed: kill it mid-batch.
            if len(done) >= 3 and planned - done:
                in_flight = True
                break
            time.sleep(0.01)
        assert job.poll() is None, f"the job died on its own:\n{log.read_text()[-3000:]}"
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
    finally:
        stop_producing.set()
        producer.join()
    assert len(batch_ids(commits)) >= 3, log.read_text()[-3000:]
    assert in_flight, "never saw a batch in flight to kill"
    killed_at = (sorted(batch_ids(offsets)), sorted(batch_ids(commits)))

    # The rest arrives while the driver is down.
    cluster.send([Message(TOPIC, b) for b in bodies[produced[0] :]])
    assert sum(high for high, _ in cluster.queue_offsets(TOPIC).values()) == len(bodies)

    job = start_job(cluster, tmp_path, available_now=True, log=log)
    assert job.wait(180) == 0, log.read_text()[-3000:]

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    seen = Counter((r.queue_id, r.queue_offset) for r in rows)
    assert len(rows) == len(bodies), f"{len(rows)} rows for {len(bodies)} messages; killed at {killed_at}"
    assert max(seen.values()) == 1, "a queue offset was written twice"
    assert Counter(bytes(r.body) for r in rows) == Counter(bodies), "bodies differ from what was sent"
