"""What each part of the broker's metrics costs a send: `python -m bench.metrics_parts [--reads N]`.

bench/metrics_ab.py compares two brokers by the process's CPU (store threads included), whose pairs of
rounds still scatter by +-15%. Here one broker with metricsExporterType=PROM switches its parts off and on
between reads (64 SEND_MESSAGE_V2 frames each, bench/sendpath.py's), in the order none, none again (the
A/A check), the send processor's part (`SendProcessor.meters`: a plain send only tests whether it is
typed, since plain sends are read from the ConsumeQueues at scrape time), the rpc latency
(`Dispatcher.meter`), both; each read is timed by the event loop thread's CPU alone. The medians of
thousands of reads separate differences of about 0.05 µs a send.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.metrics_ab import PROM, _broker
from bench.sendpath import CountingTransport, _frames
from broker.transport.loop import run

__all__ = ["main"]

PARTS = ("none", "none again", "send processor", "rpc latency", "both")
_BATCH = 200  # distinct reads prepared at a time (each carries fresh UNIQ_KEYs)


async def _measure(reads: int) -> dict[str, list[float]]:
    root = Path(tempfile.mkdtemp(prefix="bench-metrics-parts-"))
    broker = await _broker(root, "parts", PROM)
    try:
        assert broker.server is not None and broker.meters is not None
        dispatcher = broker.server.dispatcher
        rpc, meters = dispatcher.meter, broker.meters
        settings = {
            "none": (None, None),
            "none again": (None, None),
            "send processor": (None, meters),
            "rpc latency": (rpc, None),
            "both": (rpc, meters),
        }
        conn = broker.server._create_protocol()
        conn.connection_made(CountingTransport())
        conn.data_received(_frames(64, 1))  # creates the topic
        await asyncio.sleep(0.5)
        cpu_us: dict[str, list[float]] = {part: [] for part in PARTS}
        opaque = 65
        batch: list[bytes] = []
        for n in range(reads):
            if n % _BATCH == 0:
                batch = [_frames(64, opaque + r * 64) for r in range(_BATCH)]
                opaque += _BATCH * 64
                await asyncio.sleep(0.01)  # let the store's dispatch catch up outside the timed reads
            # forwards then backwards, so that no part always follows the same one
            cycle, at = divmod(n, len(PARTS))
            part = PARTS[at] if cycle % 2 == 0 else PARTS[-1 - at]
            dispatcher.meter, broker.send.meters = settings[part]
            started = time.thread_time_ns()
            conn.data_received(batch[n % _BATCH])
            cpu_us[part].append((time.thread_time_ns() - started) / 64 / 1000)
            await asyncio.sleep(0)
        dispatcher.meter, broker.send.meters = rpc, meters
        return cpu_us
    finally:
        await broker.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_parts", description=__doc__.split("\n")[0])
    parser.add_argument("--reads", type=int, default=12_000, help="reads of 64 sends, all parts together")
    args = parser.parse_args(argv)
    cpu_us = run(_measure(args.reads))
    base = statistics.median(cpu_us["none"])
    print(f"{args.reads} reads of 64 sends (1 KiB, ASYNC_FLUSH), event loop CPU µs/send, median:")
    for part in PARTS:
        median = statistics.median(cpu_us[part])
        print(f"  {part:12} {median:6.2f}  +{median - base:5.2f} µs  on/off {median / base:.3f}")


if __name__ == "__main__":
    main()
