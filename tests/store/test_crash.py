"""Crash safety: a SYNC_FLUSH writer process is killed with SIGKILL at random moments, many rounds.

After every restart each acknowledged message must be present, readable by queue offset and by key,
and every ConsumeQueue unit must agree with the CommitLog record it points at.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.protocol.message import decode_record
from broker.store import GetStatus, MessageStore
from tests.store.store_helpers import small_config

REPO = Path(__file__).resolve().parents[2]  # crash_child runs as `python -m tests.store.crash_child` from here


def run_round(root: Path, round_no: int, rng: random.Random) -> list[tuple[str, int, int]]:
    """Start the writer, let it write for a random while, SIGKILL it; returns the acknowledged puts."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_child", str(root), str(round_no)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first == b"started\n", proc.stderr.read() if proc.stderr else first
    time.sleep(rng.uniform(0.05, 0.6))
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    acks = []
    # the last element is empty or a line cut by the kill (no newline after it): ignore it
    for line in out.split(b"\n")[:-1]:
        parts = line.split()
        if len(parts) == 4 and parts[0] == b"ack":
            acks.append((parts[1].decode(), int(parts[2]), int(parts[3])))
    return acks


def verify(root: Path, acked: list[tuple[str, int, int]]) -> None:
    async def main() -> None:
        store = MessageStore(small_config(root))
        await store.start()
        try:
            assert store.recovery_report is not None and store.recovery_report.abnormal
            for key, qid, qoff in acked:
                got = store.get_message("g", "TopicTest", qid, qoff, 1)
                assert got.status is GetStatus.FOUND, (key, qid, qoff, got.status)
                m = decode_record(got.buffers[0], verify_crc=True)
                got.release()
                assert m.properties["KEYS"] == key and m.queue_offset == qoff and m.queue_id == qid
                q = store.query_message("TopicTest", key, 4, 0, 2**62)
                assert any(decode_record(b).properties["KEYS"] == key for b in q.buffers), key
                q.release()
            # every ConsumeQueue unit points at a whole record of that queue and offset
            for topic, qids in store.topics_and_queues().items():
                for qid in qids:
                    cq = store.consume_queue_store.find(topic, qid)
                    assert cq is not None
                    for off in range(cq.get_min_offset(), cq.get_max_offset()):
                        unit = cq.get_index(off)
                        assert unit is not None
                        phy, size, _ = unit
                        raw = store.select_one_message_by_offset(phy)
                        assert raw is not None and len(raw) == size
                        rec = decode_record(raw, verify_crc=True)
                        assert (rec.topic, rec.queue_id, rec.queue_offset) == (topic, qid, off)
        finally:
            await store.shutdown()
        # leave it as a crashed store again, so the next round also recovers abnormally
        (root / "abort").touch()

    asyncio.run(main())


def crash_rounds(tmp_path: Path, rounds: int, seed: int) -> int:
    rng = random.Random(seed)
    acked: list[tuple[str, int, int]] = []
    for r in range(rounds):
        acks = run_round(tmp_path, r, rng)
        acked.extend(acks)
        verify(tmp_path, acked)
    assert acked, "the writer never acknowledged anything"
    return len(acked)


def test_kill_9_loses_no_acknowledged_message(tmp_path: Path) -> None:
    assert crash_rounds(tmp_path, rounds=8, seed=1) > 100


@pytest.mark.slow
def test_kill_9_many_rounds(tmp_path: Path) -> None:
    crash_rounds(tmp_path, rounds=16, seed=2)
