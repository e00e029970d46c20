"""Broker CPU per send with metrics off and on, in one process: `python -m bench.metrics_ab`.

This host's speed moves by 1.5x from one minute to the next (docs/benchmarks.md), more than the few
percent metrics may cost, so two broker processes measured one after the other compare minutes, not
code. Here two in-process brokers (bench/sendpath.py's: SEND_MESSAGE_V2 frames fed 64 a read into a server
connection whose transport only counts reply bytes; real store, ASYNC_FLUSH), one with
metricsExporterType=PROM, take short rounds in turn; each pair of neighbouring rounds sees the same host,
and the median of the pairs' ratios is the cost. Also times a scrape of the broker with metrics on after
each of its rounds (its gauges read a store holding everything sent so far).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.sendpath import CountingTransport, _frames
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import run

__all__ = ["main"]

PROM = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"}


async def _broker(root: Path, name: str, extra: dict[str, str]) -> BrokerController:
    broker = BrokerController(
        load_broker_config(
            {
                "brokerName": name,
                "listenPort": "0",
                "haListenPort": "0",
                "brokerIP1": "127.0.0.1",
                "storePathRootDir": str(root / name),
                "mappedFileSizeCommitLog": str(1 << 30),
                **extra,
            }
        )
    )
    await broker.start()
    return broker


async def _round(conn: object, transport: CountingTransport, reads: list[bytes]) -> float:
    """CPU µs per message of one round of `reads` (the process's CPU: the loop and the store's threads)."""
    before = transport.written
    cpu = time.process_time()
    for data in reads:
        conn.data_received(data)  # type: ignore[attr-defined]
        await asyncio.sleep(0)
    while transport.written - before < len(reads) * 64 * 150:
        await asyncio.sleep(0.001)
    return (time.process_time() - cpu) / (len(reads) * 64) * 1e6


async def _ab(args: argparse.Namespace) -> tuple[list[float], list[float], list[float], int]:
    root = Path(tempfile.mkdtemp(prefix="bench-metrics-ab-"))
    off = await _broker(root, "off", {})
    on = await _broker(root, "on", PROM)
    try:
        sides = []
        for broker in (off, on):
            assert broker.server is not None
            conn = broker.server._create_protocol()
            transport = CountingTransport()
            conn.connection_made(transport)
            sides.append((conn, transport))
        reads_per_round = args.num // 64
        opaque = 1
        all_reads = []
        for _ in range(args.rounds * 2 + 1):
            all_reads.append([_frames(64, opaque + r * 64) for r in range(reads_per_round)])
            opaque += reads_per_round * 64
        for conn, _t in sides:  # create the topic on both (auto-creation from TBW102)
            conn.data_received(all_reads[0][0])
        await asyncio.sleep(0.5)
        offs, ons, scrapes = [], [], []
        assert on.metrics is not None
        for n in range(args.rounds):
            order = (0, 1) if n % 2 == 0 else (1, 0)
            got = {}
            for side in order:
                conn, transport = sides[side]
                got[side] = await _round(conn, transport, all_reads[1 + n])
            offs.append(got[0])
            ons.append(got[1])
            started = time.perf_counter()
            body = on.metrics.scrape()
            scrapes.append((time.perf_counter() - started) * 1000)
        return offs, ons, scrapes, len(body)
    finally:
        await on.shutdown()
        await off.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_ab", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="pairs of rounds")
    parser.add_argument("--num", type=int, default=32_000, help="messages a round")
    args = parser.parse_args(argv)
    offs, ons, scrapes, size = run(_ab(args))
    ratios = [b / a for a, b in zip(offs, ons, strict=True)]
    print(f"{args.rounds} pairs of {args.num} sends (1 KiB, ASYNC_FLUSH, 64 a read), CPU µs/msg:")
    print(f"  off: median {statistics.median(offs):.2f} (best {min(offs):.2f})")
    print(f"  on:  median {statistics.median(ons):.2f} (best {min(ons):.2f})")
    print(
        f"  on/off per pair: median {statistics.median(ratios):.3f} "
        f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.3f}-{statistics.quantiles(ratios, n=4)[2]:.3f})"
    )
    print(
        f"  a scrape ({size} bytes, rendered on the loop): median {statistics.median(scrapes):.2f} ms, "
        f"max {max(scrapes):.2f} ms"
    )


if __name__ == "__main__":
    main()
