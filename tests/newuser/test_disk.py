"""Disk on a laptop. After `make run` and 10 000 messages of 1 KiB, the data dir holds the data plus a
bounded reservation (commitLogPreallocateAhead, sparse IndexFiles), not 2.5 GB."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.newuser.processes import free_port
from tests.newuser.user_harness import user_env

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20

SEND_10000 = """
import asyncio
from rocketcluster import Message, Producer

async def main() -> None:
    async with Producer("DiskProducer") as producer:
        for batch in range(100):
            results = await producer.send_batch([Message("DiskTopic", b"d" * 1024, keys=f"k{batch}-{i}")
                                                 for i in range(100)])
            assert all(r.status.name == "SEND_OK" for r in results)
    print("sent 10000")
asyncio.run(main())
"""


def _du(root: Path) -> dict[str, int]:
    """Bytes of real blocks per top-level part of the store (what `du` counts), and the total."""
    parts: dict[str, int] = {}
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            blocks = os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            rel = Path(dirpath).relative_to(root).parts
            key = "/".join(rel[:2]) if rel else "."
            parts[key] = parts.get(key, 0) + blocks
            total += blocks
    parts["total"] = total
    return parts


def test_make_run_plus_10000_messages_of_1_kib_fits_in_300_mib(tmp_path: Path) -> None:
    data = tmp_path / "data"
    namesrv_port = free_port()
    env = user_env(
        RUN_DATA_DIR=str(data),
        RUN_NAMESRV_PORT=str(namesrv_port),
        RUN_BROKER_PORT=str(free_port()),
        RUN_HA_PORT="0",
    )
    run = subprocess.Popen(
        ["bash", "scripts/run-local.sh"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert run.stdout is not None
        deadline = time.monotonic() + 120
        for line in run.stdout:
            if line.startswith("RocketCluster is running"):
                break
            assert time.monotonic() < deadline, "make run did not start"
        else:
            raise AssertionError(f"make run exited {run.wait()} before running")
        sender = subprocess.run(
            [sys.executable, "-c", SEND_10000],
            env=user_env(NAMESRV_ADDR=f"127.0.0.1:{namesrv_port}"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert sender.returncode == 0, sender.stderr
        time.sleep(2)  # the index helper and the ConsumeQueues catch up; the reserver finishes its step
        used = _du(data)
        summary = ", ".join(f"{k} {v / MIB:.1f} MiB" for k, v in sorted(used.items()))
        print(summary)
        assert used["total"] <= 300 * MIB, summary
        # and where it goes: the data (~11 MB of records), the reservation ahead, a ~20 MB index
        assert used.get("store/commitlog", 0) <= 11 * MIB + 128 * MIB + 4 * MIB, summary
        assert used.get("store/index", 0) <= 32 * MIB, summary
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(120) == 0
