"""Child process of test_crash.py and test_dispatch_sink.py: writes with SYNC_FLUSH under load and prints
every acknowledged put.

Usage, from the repo root: `python -m tests.store.crash_child ROOT ROUND`. Each line on stdout is
`ack <key> <queue_id> <queue_offset>`, written and flushed only after the store answered PUT_OK (so after
the group-commit fdatasync). The parent kills this process with SIGKILL at a random moment.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from broker.store import MessageStore, PutStatus
from tests.store.store_helpers import message, small_config

WRITERS = 24


async def main(root: Path, round_no: int) -> None:
    store = MessageStore(small_config(root, flush_disk_type="SYNC_FLUSH"))
    await store.start()
    print("started", flush=True)
    out = sys.stdout

    async def writer(w: int) -> None:
        i = 0
        while True:
            n = round_no * 1_000_000 + w * 10_000 + i
            msg = message(n, queue_id=w % 4, size=64 + (n * 37) % 700)
            r = await store.put(msg)
            if r.status is PutStatus.PUT_OK:
                out.write(f"ack key-{n} {msg.queue_id} {r.queue_offset}\n")
                out.flush()
            i += 1

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
