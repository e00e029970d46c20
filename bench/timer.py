"""Timed-delivery accuracy: `python -m bench.timer [--timers 10000] [--window 10] [--flush ASYNC_FLUSH]`.

Starts `mqnamesrv` and `mqbroker` in their own processes, sends `--timers` messages through our SDK
with TIMER_DELIVER_MS spread evenly over `--window` seconds that begin `--lead` seconds later (so
every timer is pending before the first is due), and consumes the topic with a pull consumer. For
each message it reports the lateness of its delivery:

- broker: the delivered message's store time in its real topic minus the time asked for (what the
  timer service adds: the wake-up, reading the parked message back, the put);
- consumer: when our pull consumer got it minus the time asked for (adds the long-polling wake-up
  and the pull round trip).

Both clocks are this machine's. `--markdown FILE` appends a results block for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.client import Admin, Message, MessageQueue, Producer, PullConsumer
from broker.transport.loop import run

__all__ = ["main"]

TOPIC = "TimerBench"
QUEUES = 4
IN_FLIGHT = 256


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(program: str, conf: Path, ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", f"broker.cli.{program}", "-c", str(conf), "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "NAMESRV_ADDR": ""},
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if ready in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit(f"{program} did not start")


def _pct(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))] if values else -1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _create_topic(namesrv: str) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        while TOPIC not in await admin.topic_list():
            await asyncio.sleep(0.05)


async def _send(namesrv: str, count: int, first_due: int, window_ms: int) -> float:
    """Send every timed message (IN_FLIGHT at a time); returns the seconds it took."""
    started = time.monotonic()
    gate = asyncio.Semaphore(IN_FLIGHT)
    async with Producer("PID-timer-bench", namesrv) as producer:

        async def one(i: int) -> None:
            due = first_due + (window_ms * i) // max(count - 1, 1)
            msg = Message(TOPIC, b"t" * 64, properties={"TIMER_DELIVER_MS": str(due)})
            async with gate:
                await producer.send(msg, queue=MessageQueue(TOPIC, "bench", i % QUEUES), timeout=30)

        await asyncio.gather(*(one(i) for i in range(count)))
    return time.monotonic() - started


async def _consume(namesrv: str, count: int, deadline_ms: int) -> tuple[list[int], list[int]]:
    """(broker lateness, consumer lateness) in ms of every delivered message."""
    consumer = PullConsumer("CG-timer-bench", namesrv)
    consumer.assign([MessageQueue(TOPIC, "bench", q) for q in range(QUEUES)])
    await consumer.start()
    broker: list[int] = []
    client: list[int] = []
    try:
        while len(broker) < count and _now_ms() < deadline_ms:
            for msg in await consumer.poll(1.0):
                got = _now_ms()
                due = int(msg.properties["TIMER_DELIVER_MS"])
                broker.append(msg.store_timestamp - due)
                client.append(got - due)
    finally:
        await consumer.shutdown()
    return sorted(broker), sorted(client)


async def bench(args: argparse.Namespace, root: Path) -> dict[str, object]:
    ns_port, broker_port = _free_port(), _free_port()
    (root / "namesrv.conf").write_text(f"listenPort={ns_port}\nbindAddress=127.0.0.1\n")
    (root / "broker.conf").write_text(
        f"brokerName=bench\nbrokerClusterName=BenchCluster\nlistenPort={broker_port}\nbrokerIP1=127.0.0.1\n"
        f"namesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={root / 'store'}\nflushDiskType={args.flush}\n"
        f"mappedFileSizeCommitLog={256 << 20}\ndefaultTopicQueueNums={QUEUES}\n"
    )
    procs = [_spawn("mqnamesrv", root / "namesrv.conf", "boot success")]
    procs.append(_spawn("mqbroker", root / "broker.conf", "boot success"))
    namesrv = f"127.0.0.1:{ns_port}"
    try:
        await _create_topic(namesrv)
        first_due = _now_ms() + int(args.lead * 1000)
        window_ms = int(args.window * 1000)
        consumer = asyncio.ensure_future(_consume(namesrv, args.timers, first_due + window_ms + 60_000))
        send_s = await _send(namesrv, args.timers, first_due, window_ms)
        pending_before_due = args.timers if _now_ms() < first_due else -1  # -1: sending outlasted the lead
        broker, client = await consumer
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(15)
    return {
        "timers": args.timers, "window_s": args.window, "flush": args.flush, "send_s": send_s,
        "pending": pending_before_due, "delivered": len(broker),
        "broker": {q: _pct(broker, p) for q, p in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))},
        "consumer": {q: _pct(client, p) for q, p in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))},
        "early": sum(1 for v in broker if v < 0),
    }  # fmt: skip


def _markdown(r: dict[str, object], command: str) -> str:
    b, c = r["broker"], r["consumer"]
    assert isinstance(b, dict) and isinstance(c, dict)
    return (
        f"\n### Timed delivery: lateness at {r['timers']} pending timers\n\n"
        f"`{command}` on {platform.machine()} with {os.cpu_count()} cores, "
        f"{datetime.date.today().isoformat()}, {r['flush']}. {r['timers']} messages with TIMER_DELIVER_MS "
        f"spread over {r['window_s']} s, all sent (in {r['send_s']:.1f} s) before the first was due; "
        f"lateness = when it was stored in its topic (broker) or pulled (consumer) minus the time asked for.\n\n"
        "| lateness (ms) | p50 | p99 | max |\n|---|---:|---:|---:|\n"
        f"| broker (stored in its topic) | {b['p50']} | {b['p99']} | {b['max']} |\n"
        f"| consumer (pull consumer got it) | {c['p50']} | {c['p99']} | {c['max']} |\n\n"
        f"{r['delivered']} of {r['timers']} delivered, {r['early']} early.\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.timer", description=__doc__.split("\n")[0])
    parser.add_argument("--timers", type=int, default=10_000, help="timed messages (default 10000)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds their delivery times span")
    parser.add_argument("--lead", type=float, default=15.0, help="seconds from the start to the first due")
    parser.add_argument("--flush", choices=["ASYNC_FLUSH", "SYNC_FLUSH"], default="ASYNC_FLUSH")
    parser.add_argument("--markdown", type=Path, help="append a results block to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-timer-") as tmp:
        result = run(bench(args, Path(tmp)))
    print(result)
    if args.markdown is not None:
        command = "python -m bench.timer " + " ".join(argv if argv is not None else sys.argv[1:])
        with args.markdown.open("a") as out:
            out.write(_markdown(result, command.strip()))


if __name__ == "__main__":
    main()
