"""What metrics cost the broker, and how fast a scrape answers under load: `python -m bench.metrics`.

The targets: at most 3% less send throughput with metricsExporterType=PROM than without, and a
scrape that answers within 100 ms while the broker is under send load. Each round starts `mqbroker` twice,
once with metrics off and once on (the order alternating from round to round, so that a host slowing down
or speeding up through the run weighs on both alike), and measures on each: pipelined sends (64 in flight,
bench.broker's generator) and the consumption of what they stored (pulls of 32, 64 in flight). With
metrics on, a third phase repeats the sends while a separate process scrapes /metrics every
`--scrape-interval` seconds over one kept-alive connection, as Prometheus does, and times each scrape
from request to last byte. Prints each round, the per-round on/off ratios and their median; `--markdown
FILE` writes a docs/benchmarks.md block.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TextColumn, TimeElapsedColumn

from bench.broker import _PROPS as PROPS
from bench.broker import (
    QUEUES,
    BenchConnection,
    _consume,
    _free_port,
    _pipelined,
    _queue_depths,
    _send_template,
    _settle,
    _start_broker,
)
from bench.proc import cpu_s
from broker.protocol.properties import encode_properties
from broker.transport.loop import run

__all__ = ["main"]


@dataclass(slots=True)
class Run:
    metrics: bool
    send_rate: float = 0.0
    send_cpu_us: float = 0.0  # broker CPU per message sent
    consume_rate: float = 0.0
    loaded_send_rate: float = 0.0  # sends while scraped (metrics on only)
    scrapes_ms: list[float] = field(default_factory=list)
    scrape_bytes: int = 0


def _scrape_loop(port: int, interval: float) -> None:
    """The scraper process: GET /metrics every `interval` s until SIGTERM, then print the times as JSON."""
    stop = False

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times: list[float] = []
    size = 0
    while not stop:
        started = time.perf_counter()
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read()
        times.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise SystemExit(f"scrape answered {response.status}")
        size = len(body)
        time.sleep(interval)
    print(json.dumps({"ms": times, "bytes": size}), flush=True)


async def _one(metrics: bool, args: argparse.Namespace, progress: Progress) -> Run:
    root = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    port, metrics_port = _free_port(), _free_port()
    extra = list(args.set)
    if metrics:
        extra += [
            "metricsExporterType=PROM",
            "metricsPromExporterHost=127.0.0.1",
            f"metricsPromExporterPort={metrics_port}",
        ]
    proc = _start_broker(root, port, args.flush, args.file_size, extra)
    result = Run(metrics)
    label = "on " if metrics else "off"
    try:
        loop = asyncio.get_running_loop()
        _t, conn = await loop.create_connection(BenchConnection, "127.0.0.1", port)
        body = os.urandom(args.size)
        templates = [_send_template(q, body, props=encode_properties(PROPS)) for q in range(QUEUES)]
        await _settle(proc.pid)
        await _pipelined(conn, templates, 2_000, 64, 1, progress, f"metrics {label} warm-up")
        cpu = cpu_s(proc.pid)
        sends = await _pipelined(conn, templates, args.num, 64, 1, progress, f"metrics {label} send x64")
        result.send_rate = sends.rate
        result.send_cpu_us = (cpu_s(proc.pid) - cpu) / sends.messages * 1e6
        per_queue = await _queue_depths(port)
        result.consume_rate = (await _consume(conn, per_queue, 64, progress)).rate
        if metrics:
            scraper = subprocess.Popen(
                [sys.executable, "-m", "bench.metrics", "--scrape", str(metrics_port), "--scrape-interval",
                 str(args.scrape_interval)],
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            await asyncio.sleep(0.3)  # its first scrape before the load starts
            loaded = await _pipelined(conn, templates, args.num, 64, 1, progress, "metrics on send x64, scraped")
            result.loaded_send_rate = loaded.rate
            scraper.send_signal(signal.SIGTERM)
            out, _ = scraper.communicate(timeout=30)
            data = json.loads(out)
            result.scrapes_ms, result.scrape_bytes = data["ms"], data["bytes"]
        conn.transport.close()  # type: ignore[union-attr]
        return result
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _report(pairs: list[tuple[Run, Run]], args: argparse.Namespace, command: str, load_before: str) -> str:
    send = [on.send_rate / off.send_rate for off, on in pairs]
    cpu = [on.send_cpu_us / off.send_cpu_us for off, on in pairs]
    consume = [on.consume_rate / off.consume_rate for off, on in pairs]
    scrapes = [ms for _off, on in pairs for ms in on.scrapes_ms]
    load = os.getloadavg()
    lines = [
        f"\n## Metrics cost, {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}\n",
        f"- command: `{command}`",
        f"- machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}",
        f"- load average before/after (1/5/15 min): {load_before} / {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- {args.flush}, {args.size} B bodies, {args.num} messages a phase, broker in its own process, loopback "
        f"TCP; metrics on = metricsExporterType=PROM; off and on alternate, {len(pairs)} rounds\n",
        "| round | sends/s off | sends/s on | on/off | broker CPU µs/msg off | on | consume/s off | on | on/off |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, (off, on) in enumerate(pairs, 1):
        lines.append(
            f"| {n} | {off.send_rate:,.0f} | {on.send_rate:,.0f} | {on.send_rate / off.send_rate:.3f} | "
            f"{off.send_cpu_us:.1f} | {on.send_cpu_us:.1f} | {off.consume_rate:,.0f} | {on.consume_rate:,.0f} | "
            f"{on.consume_rate / off.consume_rate:.3f} |"
        )
    lines += [
        "",
        f"- send throughput on/off: median {statistics.median(send):.3f} (rounds {min(send):.3f}-{max(send):.3f}); "
        f"broker CPU per message on/off: median {statistics.median(cpu):.3f}; "
        f"consume throughput on/off: median {statistics.median(consume):.3f}",
        f"- scrapes during pipelined sends (every {args.scrape_interval} s, {len(scrapes)} scrapes of "
        f"{pairs[-1][1].scrape_bytes} bytes): p50 {_pct(scrapes, 0.5):.1f} ms, p99 {_pct(scrapes, 0.99):.1f} ms, "
        f"max {max(scrapes, default=0):.1f} ms; sends/s while scraped: "
        + ", ".join(f"{on.loaded_send_rate:,.0f}" for _off, on in pairs),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="pairs of brokers, metrics off and on")
    parser.add_argument("--num", type=int, default=100_000, help="messages a phase")
    parser.add_argument("--size", type=int, default=1024, help="body size in bytes")
    parser.add_argument("--flush", choices=["ASYNC_FLUSH", "SYNC_FLUSH"], default="ASYNC_FLUSH")
    parser.add_argument("--file-size", type=int, default=256 << 20, help="mappedFileSizeCommitLog of the broker")
    parser.add_argument("--scrape-interval", type=float, default=0.1, help="seconds between scrapes under load")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line")
    parser.add_argument("--markdown", help="append a docs/benchmarks.md results block to this file")
    parser.add_argument("--scrape", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the scraper process
    args = parser.parse_args(argv)
    if args.scrape:
        _scrape_loop(args.scrape, args.scrape_interval)
        return
    load = os.getloadavg()
    load_before = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    console = Console()

    async def go() -> list[tuple[Run, Run]]:
        pairs = []
        with Progress(TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as progress:
            for n in range(args.rounds):
                order = (False, True) if n % 2 == 0 else (True, False)
                runs = {metrics: await _one(metrics, args, progress) for metrics in order}
                pairs.append((runs[False], runs[True]))
                off, on = pairs[-1]
                console.print(
                    f"round {n + 1}: sends/s off {off.send_rate:,.0f} on {on.send_rate:,.0f} "
                    f"({on.send_rate / off.send_rate:.3f}); scrape p99 {_pct(on.scrapes_ms, 0.99):.1f} ms"
                )
        return pairs

    pairs = run(go())
    command = "python -m bench.metrics " + " ".join(argv if argv is not None else sys.argv[1:])
    text = _report(pairs, args, command, load_before)
    console.print(text)
    if args.markdown:
        with open(args.markdown, "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
