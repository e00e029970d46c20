"""Send throughput with metrics on against off in one broker process: `python -m bench.metrics_toggle`.

The target is at most 3% less send throughput with metricsExporterType=PROM. bench/metrics.py
measures it with two mqbroker processes in turn, and its rounds scatter by +-10% on a shared host, more
than the cost it looks for. Here one broker child process, started with metricsExporterType=PROM,
switches the metrics' send path off and on between bursts of pipelined sends (bench.broker's generator
over TCP, 64 in flight, 1 KiB bodies, ASYNC_FLUSH): off means what a broker without metrics runs, no
rpc meter on the dispatcher and no meters in the send processor (the same two switches
bench/metrics_parts.py uses); its /metrics endpoint stays up. Bursts alternate off/on/on/off, so that
every burst has a neighbour of the other kind a few hundred milliseconds away, and the median of the
neighbours' ratios is the cost: send throughput (wall time of the burst) and the child's CPU per message
(its own process clock, read when each burst starts and ends). Plain sends are counted from the
ConsumeQueues (broker/metrics/queue_scan.py), which the broker reads every few seconds and at each scrape:
"on" includes that read. Between the send and the consume bursts it times a scrape that reads `--scan` messages, and
one that finds nothing new.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.progress import Progress

from bench.broker import _PROPS as PROPS
from bench.broker import QUEUES, BenchConnection, PhaseResult, _consume, _pipelined, _queue_depths, _send_template
from broker.protocol.properties import encode_properties
from broker.transport.loop import run

__all__ = ["main"]


# ------------------------------------------------------------------ the broker child


async def _child(root: Path) -> None:
    """A PROM broker that reads "on" / "off" lines on stdin and answers each with its process CPU time."""
    from bench.metrics_ab import PROM, _broker

    broker = await _broker(root, "toggle", PROM)
    assert broker.server is not None and broker.meters is not None
    dispatcher, send = broker.server.dispatcher, broker.send
    # the rpc meter, the send processor's meters, and the broker's periodic read of the ConsumeQueues
    parts = {"on": (dispatcher.meter, broker.meters, broker.meters), "off": (None, None, None)}
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def command(line: str) -> None:
        word = line.strip()
        if word in parts:
            dispatcher.meter, send.meters, broker.meters = parts[word]
            print(time.process_time(), flush=True)
        elif not done.done():  # "quit" or stdin closed
            done.set_result(None)

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(command, line)
        loop.call_soon_threadsafe(command, "")

    threading.Thread(target=read_stdin, daemon=True).start()
    assert broker.metrics is not None
    print(broker.port, broker.metrics.port, flush=True)
    try:
        await done
    finally:
        await broker.shutdown()


# ------------------------------------------------------------------ the measuring parent


class _Broker:
    """The child process: switch its metrics, read its CPU clock."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.metrics_toggle", "--child", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "NAMESRV_ADDR": ""},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.replace(" ", "").isdigit():
            self.proc.kill()
            raise SystemExit(f"the benchmark's broker did not start: {line!r}")
        self.port, self.metrics_port = map(int, line.split())

    def scrape_ms(self) -> float:
        """Wall milliseconds of one GET /metrics."""
        started = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=60) as answer:
            answer.read()
        return (time.perf_counter() - started) * 1000

    def switch(self, metrics: str) -> float:
        """Metrics "on" or "off" from now; the child's process CPU seconds at the switch."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(metrics + "\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _order(bursts: int) -> list[str]:
    """off on on off off on on off ...: each kind as often first as second in a neighbouring pair."""
    return ["off" if n % 4 in (0, 3) else "on" for n in range(bursts)]


Runs = dict[str, list[tuple[float, float]]]  # "on" / "off" -> (messages/s, CPU µs per message) per burst


async def _bursts(broker: _Broker, bursts: int, burst: Callable[[str], Awaitable[PhaseResult]]) -> Runs:
    runs: Runs = {"on": [], "off": []}
    for n, metrics in enumerate(_order(bursts)):
        cpu = broker.switch(metrics)
        result = await burst(f"burst {n + 1} {metrics}")
        cpu_us = (broker.switch(metrics) - cpu) / result.messages * 1e6
        if result.errors:
            raise SystemExit(f"{result.errors} requests failed in {result.name}")
        runs[metrics].append((result.rate, cpu_us))
    return runs


async def _measure(args: argparse.Namespace) -> tuple[dict[str, Runs], tuple[float, float]]:
    """The send bursts, then the consume bursts (each pulls the same first `--burst` messages stored, 32 a
    pull, 64 pulls in flight, without committing offsets). Between the two, the scrape that reads every
    message sent from the ConsumeQueues (none was scraped before), and one that finds nothing new."""
    root = Path(tempfile.mkdtemp(prefix="bench-metrics-toggle-"))
    broker = _Broker(root)
    try:
        loop = asyncio.get_running_loop()
        _t, conn = await loop.create_connection(BenchConnection, "127.0.0.1", broker.port)
        templates = [_send_template(q, os.urandom(args.size), props=encode_properties(PROPS)) for q in range(QUEUES)]
        with Progress(transient=True) as progress:
            await _pipelined(conn, templates, args.burst, 64, 1, progress, "warm-up")
            sends = await _bursts(
                broker, args.bursts, lambda name: _pipelined(conn, templates, args.burst, 64, 1, progress, name)
            )
            # the scrape's own reading of the queues: from a scrape, `--scan` sends with the periodic read off
            broker.switch("off")
            await asyncio.to_thread(broker.scrape_ms)
            await _pipelined(conn, templates, args.scan, 64, 1, progress, "sends for the scrape")
            scrapes = (await asyncio.to_thread(broker.scrape_ms), await asyncio.to_thread(broker.scrape_ms))
            backlog = {q: min(n, args.burst // QUEUES) for q, n in (await _queue_depths(broker.port)).items()}
            pulls = await _bursts(broker, args.bursts, lambda _name: _consume(conn, backlog, 64, progress))
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {"send": sends, "consume": pulls}, scrapes


def _ratios(on: list[float], off: list[float]) -> list[float]:
    """on / off of each burst pair (the n-th on with the n-th off: neighbours, by `_order`)."""
    return [a / b for a, b in zip(on, off, strict=True)]


def _quartiles(values: list[float]) -> str:
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"median {q2:.3f} (quartiles {q1:.3f}-{q3:.3f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_toggle", description=__doc__.split("\n")[0])
    parser.add_argument("--bursts", type=int, default=100, help="bursts of each kind, half with metrics on")
    parser.add_argument("--burst", type=int, default=20_000, help="messages sent, or pulled, per burst")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--scan", type=int, default=500_000, help="messages a timed scrape reads")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run(_child(args.child))
        return
    load = os.getloadavg()[0]
    started = time.monotonic()
    measured, (first_scrape, next_scrape) = run(_measure(args))
    print(
        f"{args.bursts} bursts each of {args.burst} sends ({args.size} B, 64 in flight) and of pulls of them (32 a "
        f"pull, 64 in flight), metrics switched in one broker; load {load:.1f} -> {os.getloadavg()[0]:.1f}, "
        f"{time.monotonic() - started:.0f} s"
    )
    for phase, runs in measured.items():
        for kind in ("off", "on"):
            rate = statistics.median(r for r, _ in runs[kind])
            cpu = statistics.median(c for _, c in runs[kind])
            print(f"  {phase:7} metrics {kind:3}: {rate:9,.0f} msgs/s, broker CPU {cpu:5.2f} µs/msg (medians)")
        rates = _ratios([r for r, _ in runs["on"]], [r for r, _ in runs["off"]])
        cpus = _ratios([c for _, c in runs["on"]], [c for _, c in runs["off"]])
        print(f"  {phase:7} throughput on/off: {_quartiles(rates)}")
        print(f"  {phase:7} broker CPU per message on/off: {_quartiles(cpus)}")
    print(
        f"  scrape reading the {args.scan:,} messages sent since the last one: {first_scrape:.0f} ms; the next, "
        f"nothing new: {next_scrape:.1f} ms; {(first_scrape - next_scrape) * 1e6 / args.scan:.0f} ns a message "
        "(the broker reads the queues every 5 s: a scrape finds 5 s of sends at most)"
    )


if __name__ == "__main__":
    main()
