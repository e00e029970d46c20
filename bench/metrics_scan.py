"""What reading the ConsumeQueues for metrics costs: `python -m bench.metrics_scan [--topics N]`.

The broker reads every queue's new units every 5 seconds and at each scrape (broker/metrics/queue_scan.py).
This puts one message into each of `--topics` x 4 queues of a real store, attaches the metrics, and times
`BrokerMeters.read_queues` when nothing is new (the walk over the queues, paid every 5 s however idle
the broker is), then after `--messages` more puts spread over the queues (the reading itself).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from broker.metrics.broker_meters import BrokerMeters
from broker.store import MessageStore, MessageToStore, StoreConfig

__all__ = ["main"]

QUEUES = 4


def _message(topic: str, queue_id: int) -> MessageToStore:
    return MessageToStore(topic=topic, queue_id=queue_id, body=bytes(1024), properties={"TAGS": "bench"})


async def _measure(topics: int, messages: int) -> tuple[list[float], float]:
    root = Path(tempfile.mkdtemp(prefix="bench-metrics-scan-"))
    store = MessageStore(StoreConfig(storePathRootDir=str(root)))
    await store.start()
    try:
        names = [f"ScanTopic{t}" for t in range(topics)]
        for name in names:
            for queue_id in range(QUEUES):
                await store.put(_message(name, queue_id))
        meters = BrokerMeters()
        meters.attach(store, master=True, skip=frozenset())
        idle = []
        for _ in range(20):
            started = time.perf_counter()
            meters.read_queues()
            idle.append((time.perf_counter() - started) * 1000)
        for n in range(messages):
            put = store.append(_message(names[n % topics], n // topics % QUEUES))
            if isinstance(put, asyncio.Future):  # a roll to the next CommitLog file
                await put
        store.reput.catch_up()  # the dispatch of the puts (the index's part of it too) is not the read's
        started = time.perf_counter()
        meters.read_queues()
        return idle, (time.perf_counter() - started) * 1000
    finally:
        await store.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_scan", description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000, help=f"topics of {QUEUES} queues")
    parser.add_argument("--messages", type=int, default=200_000, help="new messages for the timed read")
    args = parser.parse_args(argv)
    idle, busy = asyncio.run(_measure(args.topics, args.messages))
    print(f"{args.topics * QUEUES} queues, nothing new: median {statistics.median(idle):.2f} ms a read (20 reads)")
    print(f"{args.messages:,} new messages over them: {busy:.1f} ms, {busy * 1e6 / args.messages:.0f} ns a message")


if __name__ == "__main__":
    main()
