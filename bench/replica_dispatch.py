"""Instructions a slave's dispatch costs a replicated record: `python -m bench.replica_dispatch [--tags]`.

A slave writes the ConsumeQueue units of the records it receives from its master itself, reading them back
from its CommitLog (broker.store.dispatch). This builds the records W3 makes (batches of 32 x 1 KiB, the
Java client's properties, eight queues in turn; with `--tags` each also has a TAGS), appends them to a
slave's store without dispatching, and counts with `valgrind --tool=callgrind` the instructions of
dispatching a fifth of them and all of them: the difference over the difference of the records is what a
record costs. It does so twice: as every slave dispatches (the run path), and with one more per-record
dispatcher, which turns the run path off (every record through the full parser, as with an in-process
index), and prints the ratio. Counts are of user space only: page faults are not in them. Needs valgrind;
about four minutes on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench.instructions import callgrind_count
from broker.protocol.message import MessageExt, encode_record
from broker.store import MessageStore, StoreConfig

__all__ = ["main"]

BATCH, QUEUES, BODY = 32, 8, 1024


def replicated_records(count: int, tags: bool) -> bytes:
    """`count` records (a multiple of BATCH) as a master stores W3's batches, from CommitLog offset 0."""
    body = os.urandom(BODY)
    out = bytearray()
    queue_offsets = [0] * QUEUES
    for batch in range(count // BATCH):
        queue_id = batch % QUEUES
        for _ in range(BATCH):
            n = len(out)
            props = {"UNIQ_KEY": f"7F0000010B6C18B4AAC2{n:012X}", "WAIT": "true", "CLUSTER": "DefaultCluster"}
            if tags:
                props["TAGS"] = "TagA"
            record = MessageExt(
                topic="BenchTopic",
                queue_id=queue_id,
                body=body,
                properties=props,
                store_timestamp=1_700_000_000_000 + batch,
                queue_offset=queue_offsets[queue_id],
                commit_log_offset=n,
            )
            out += encode_record(record)
            queue_offsets[queue_id] += 1
    return bytes(out)


async def _child(records: int, dispatched: int, tags: bool, per_record: bool) -> None:
    data = replicated_records(records, tags)
    root = Path(tempfile.mkdtemp(prefix="replica-dispatch-"))
    try:
        config = StoreConfig(store_path_root_dir=root, broker_role="SLAVE", message_index_enable=False)
        store = MessageStore(config)
        await store.start()
        if per_record:
            store.reput.add_dispatcher(_Nothing())
        await store.reput.close()  # no pass on the loop: the call below is the only dispatch
        await store.append_to_commit_log(0, data)
        done = store.reput.dispatch_available(limit=dispatched * (len(data) // records))
        if done != dispatched:
            raise SystemExit(f"dispatched {done} records, not {dispatched}")
    finally:
        shutil.rmtree(root)
    os._exit(0)  # no shutdown: nothing else is counted


class _Nothing:
    """A per-record dispatcher that does nothing: with it the pass takes every record one by one."""

    def dispatch(self, request: object) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.replica_dispatch", description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=10_240, help="records dispatched by the longer run")
    parser.add_argument("--tags", action="store_true", help="every record has a TAGS property")
    parser.add_argument("--child", nargs=2, type=int, metavar=("RECORDS", "DISPATCHED"), help=argparse.SUPPRESS)
    parser.add_argument("--per-record", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    total = args.num - args.num % (BATCH * QUEUES)
    if args.child:
        records, dispatched = args.child
        asyncio.run(_child(records, dispatched, args.tags, args.per_record))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    fifth = total // 5
    base = ["-m", __spec__.name, "--num", str(total)] + (["--tags"] if args.tags else [])

    def per_record_cost(pool: concurrent.futures.Executor, extra: list[str]) -> float:
        short = pool.submit(callgrind_count, [*base, *extra, "--child", str(total), str(fifth)])
        long = pool.submit(callgrind_count, [*base, *extra, "--child", str(total), str(total)])
        return (long.result() - short.result()) / (total - fifth)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = per_record_cost(pool, [])
        one_by_one = per_record_cost(pool, ["--per-record"])
    what = "with TAGS" if args.tags else "without TAGS"
    print(f"a replicated W3 record {what}, {total - fifth:,} records counted (Python {sys.version.split()[0]}):")
    print(f"  the run path:         {runs:,.0f} instructions")
    print(f"  record by record:     {one_by_one:,.0f} instructions")
    print(f"  run path / per record: {runs / one_by_one:.2f}")


if __name__ == "__main__":
    main()
