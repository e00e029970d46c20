"""Consumer benchmark for the Python SDK: `python -m bench.consume [--num N] [--rounds R]`.

Starts a NameServer and a broker in a child process (the consumers under test have this process to
themselves), fills a 4-queue topic with a backlog of `--num` messages once, then reads the whole backlog
with each kind of consumer:

- `push-concurrent`: PushConsumer with a listener that only counts (ConsumeService for concurrent
  consumption: batches of consumeMessageBatchMaxSize, offsets committed as batches finish);
- `push-orderly`: the same with `register_listener(..., orderly=True)` (the queues locked at the broker,
  one batch at a time per queue);
- `pull`: PullConsumer, `assign` + `seek(mq, 0)` + `poll` until the backlog is read, as an application or
  the Spark source drives it.

Each push round uses a fresh group that starts from the first offset, so every kind reads the same
messages from the page cache. A round measures every kind once, in an order rotated from round to round
(A B C, B C A, C A B, ...), so a slow minute of the host falls on all kinds alike, and each phase starts
once the broker is idle; the table gives the median over the rounds and the range.

How to read it:
- `msg/s from start()`: messages / seconds from `start()` to the last message, rebalance included;
- `msg/s flowing`: messages / seconds from the first message delivered to the last (the steady rate);
- `client CPU us/msg`: user + system CPU of this process (every thread) over the same window, per message:
  what the SDK costs per message, whatever share of a core the host gave it;
- `broker CPU us/msg`: the same for the NameServer + broker process.
On a shared 2-vCPU machine the rates swing with the host (docs/benchmarks.md): compare the CPU per
message, and the kinds against each other within one run, not rates across days.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.broker import _settle
from bench.cluster import start_cluster
from bench.proc import cpu_s
from broker.client import (
    Admin,
    ClientConfig,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
)
from broker.client.consume import Listener
from broker.transport.loop import run

__all__ = ["main"]

TOPIC = "ConsumeBenchTopic"
BROKER_NAME = "broker-consume-bench"
QUEUES = 4
KINDS = ("push-concurrent", "push-orderly", "pull")

# The child process: NameServer + broker on one uvloop, the NameServer port printed for the parent.


@dataclass(slots=True)
class Phase:
    """One kind of consumer reading the backlog once."""

    kind: str
    messages: int
    from_start_s: float
    flowing_s: float
    client_cpu_s: float
    broker_cpu_s: float

    @property
    def rate_from_start(self) -> float:
        return self.messages / self.from_start_s if self.from_start_s else 0.0

    @property
    def rate_flowing(self) -> float:
        return self.messages / self.flowing_s if self.flowing_s else 0.0

    @property
    def client_us_per_msg(self) -> float:
        return self.client_cpu_s / self.messages * 1e6 if self.messages else 0.0

    @property
    def broker_us_per_msg(self) -> float:
        return self.broker_cpu_s / self.messages * 1e6 if self.messages else 0.0


@dataclass(slots=True)
class Window:
    """Wall clock and CPU (this process, the broker process) from `start` until `stop`."""

    broker_pid: int
    started: float = 0.0
    first: float = 0.0
    client_cpu0: float = 0.0
    broker_cpu0: float = 0.0

    def start(self) -> None:
        self.client_cpu0 = _own_cpu_s()
        self.broker_cpu0 = cpu_s(self.broker_pid)
        self.started = time.perf_counter()

    def phase(self, kind: str, messages: int) -> Phase:
        ended = time.perf_counter()
        return Phase(
            kind,
            messages,
            ended - self.started,
            ended - (self.first or self.started),
            _own_cpu_s() - self.client_cpu0,
            cpu_s(self.broker_pid) - self.broker_cpu0,
        )


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _create_topic(namesrv: str) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        for _ in range(200):
            if TOPIC in await admin.topic_list():
                return
            await asyncio.sleep(0.05)
    raise SystemExit(f"{TOPIC} never reached the NameServer")


async def _fill(namesrv: str, n: int, size: int, window: int = 256) -> float:
    """Send the backlog, `window` sends in flight; returns messages/s."""
    producer = Producer("bench-consume-producer", client_config=ClientConfig(namesrv_addr=namesrv, instance_name="bp"))
    await producer.start()
    body = b"x" * size
    slots = asyncio.Semaphore(window)

    async def one() -> None:
        async with slots:
            await producer.send(Message(TOPIC, body, tags="bench"))

    try:
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - started)
    finally:
        await producer.shutdown()


def _counter(n: int, window: Window, sync: bool) -> tuple[Listener, asyncio.Event]:
    """A listener that counts what it is given and sets the event once `n` messages came."""
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()
    seen = 0

    def count(msgs: list[MessageExt]) -> bool:
        nonlocal seen
        with lock:
            if not seen:
                window.first = time.perf_counter()
            seen += len(msgs)
            return seen >= n

    def plain(msgs: list[MessageExt]) -> ConsumeStatus:
        if count(msgs):
            loop.call_soon_threadsafe(done.set)
        return ConsumeStatus.CONSUME_SUCCESS

    async def coroutine(msgs: list[MessageExt]) -> ConsumeStatus:
        if count(msgs):
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    return (plain if sync else coroutine), done


async def _push(kind: str, namesrv: str, args: argparse.Namespace, broker_pid: int, round_no: int) -> Phase:
    orderly = kind == "push-orderly"
    window = Window(broker_pid)
    listener, done = _counter(args.num, window, args.listener == "sync")
    consumer = PushConsumer(
        f"bench-consume-{kind}-{round_no}",
        client_config=ClientConfig(namesrv_addr=namesrv, instance_name=f"bc-{kind}-{round_no}"),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=args.pull_batch_size,
        consume_message_batch_max_size=args.consume_batch,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener, orderly=orderly)
    window.start()
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
        return window.phase(kind, args.num)
    finally:
        await consumer.shutdown()


async def _pull(namesrv: str, args: argparse.Namespace, broker_pid: int, round_no: int) -> Phase:
    window = Window(broker_pid)
    consumer = PullConsumer(
        f"bench-consume-pull-{round_no}",
        client_config=ClientConfig(namesrv_addr=namesrv, instance_name=f"bc-pull-{round_no}"),
        auto_commit=False,
        pull_batch_size=args.pull_batch_size,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    mqs = [MessageQueue(TOPIC, BROKER_NAME, q) for q in range(QUEUES)]
    consumer.assign(mqs)
    window.start()
    await consumer.start()
    try:
        for mq in mqs:
            await consumer.seek(mq, 0)
        got = 0
        deadline = time.monotonic() + args.timeout
        while got < args.num:
            msgs = await consumer.poll(5.0)
            if msgs and not got:
                window.first = time.perf_counter()
            got += len(msgs)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pull consumer read {got} of {args.num} in {args.timeout} s")
        return window.phase("pull", got)
    finally:
        await consumer.shutdown()


async def _run(args: argparse.Namespace, console: Console) -> tuple[list[Phase], float]:
    root = Path(tempfile.mkdtemp(prefix="bench-consume-"))
    proc, namesrv = start_cluster(root, BROKER_NAME)
    try:
        await _create_topic(namesrv)
        console.print(f"filling {TOPIC} with {args.num:,} messages of {args.size} B ...")
        fill_rate = await _fill(namesrv, args.num, args.size)
        phases: list[Phase] = []
        kinds = [k for k in KINDS if k in args.kinds]
        for round_no in range(args.rounds):
            shift = round_no % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                await _settle(proc.pid)  # the broker idle (the fill's or the last phase's work done) first
                measure: Awaitable[Phase] = (
                    _pull(namesrv, args, proc.pid, round_no)
                    if kind == "pull"
                    else _push(kind, namesrv, args, proc.pid, round_no)
                )
                phase = await measure
                phases.append(phase)
                console.print(
                    f"round {round_no + 1}/{args.rounds} {kind}: {phase.rate_from_start:,.0f} msg/s from start(), "
                    f"{phase.rate_flowing:,.0f} flowing, client {phase.client_us_per_msg:.1f} us/msg, "
                    f"broker {phase.broker_us_per_msg:.1f} us/msg (load {os.getloadavg()[0]:.2f})"
                )
        return phases, fill_rate
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


def _summary(phases: list[Phase]) -> list[tuple[str, ...]]:
    """Per kind: median (min-max) of each column over the rounds."""

    def spread(values: list[float], fmt: str) -> str:
        return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"

    rows: list[tuple[str, ...]] = []
    for kind in KINDS:
        mine = [p for p in phases if p.kind == kind]
        if mine:
            rows.append(
                (
                    kind,
                    str(len(mine)),
                    spread([p.rate_from_start for p in mine], ",.0f"),
                    spread([p.rate_flowing for p in mine], ",.0f"),
                    spread([p.client_us_per_msg for p in mine], ".1f"),
                    spread([p.broker_us_per_msg for p in mine], ".1f"),
                )
            )
    return rows


COLUMNS = ("kind", "rounds", "msg/s from start()", "msg/s flowing", "client CPU us/msg", "broker CPU us/msg")


def _markdown(rows: list[tuple[str, ...]], args: argparse.Namespace, command: str, fill_rate: float) -> str:
    load = os.getloadavg()
    lines = [
        f"\n## Consumer benchmark, {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}\n",
        f"- command: `{command}`",
        f"- machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}",
        f"- load average before/after (1/5/15 min): {args.load_before} / {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- a backlog of {args.num:,} messages of {args.size} B in {QUEUES} queues (sent at {fill_rate:,.0f} msg/s), "
        f"NameServer + broker in a child process, loopback TCP; {args.listener} listener, pullBatchSize "
        f"{args.pull_batch_size}, consumeMessageBatchMaxSize {args.consume_batch}; median (min-max) over rounds\n",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 1),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.consume", description=__doc__.split("\n")[0])
    parser.add_argument("--num", type=int, default=50_000, help="messages in the backlog, read once per kind a round")
    parser.add_argument("--size", type=int, default=128, help="body size in bytes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each measures every kind once")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="which consumers to measure")
    parser.add_argument(
        "--listener",
        choices=("async", "sync"),
        default="async",
        help="push listener: `async def` (tasks) or a plain function (the consume thread pool)",
    )
    parser.add_argument("--pull-batch-size", type=int, default=32, help="pullBatchSize of every consumer")
    parser.add_argument("--consume-batch", type=int, default=1, help="consumeMessageBatchMaxSize of the push consumers")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a kind may take to read the backlog")
    parser.add_argument("--markdown", help="write a docs/benchmarks.md results block to this file")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    args.load_before = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    console = Console(width=max(120, shutil.get_terminal_size().columns))  # the ranges fit when piped too
    phases, fill_rate = run(_run(args, console))
    rows = _summary(phases)
    table = Table(title=f"consumers reading a backlog of {args.num:,} x {args.size} B (median, range over rounds)")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "kind" else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if args.markdown:
        command = "python -m bench.consume " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.markdown).write_text(_markdown(rows, args, command, fill_rate))


if __name__ == "__main__":
    main()
