"""Broker start-up time and resident memory, idle and under load, against the start and memory targets.

    .venv/bin/python -m bench.memory [--messages 200000] [--size 1024]

Starts real `mqnamesrv` and `mqbroker` processes on free loopback ports with an empty store in a temp
dir (default 1 GiB CommitLog files, as a user runs it), times the broker from exec to its "boot success"
log line, samples its resident memory from /proc every 50 ms while our SDK produces N messages (64 in
flight) and consumes them back, and prints the figures as a markdown table row set. Resident memory is
split as /proc reports it: RssAnon is the broker's own memory (Python heap, buffers), RssFile the pages of
its mapped store files, which are page cache (the kernel reclaims them; the target excludes them).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.proc import rss_mib
from broker.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, Producer, PushConsumer

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.running = pid, True
        self.peak: dict[str, float] = {}

    def run(self) -> None:
        while self.running:
            for name, mib in rss_mib(self.pid).items():
                self.peak[name] = max(self.peak.get(name, 0.0), mib)
            time.sleep(0.05)


def spawn(program: str, conf: Path, log: Path, ready: str) -> tuple[subprocess.Popen[bytes], float]:
    started = time.monotonic()
    proc = subprocess.Popen([str(BIN / program), "-c", str(conf)], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    while ready not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() - started > 60:
            raise SystemExit(f"{program} did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.01)
    return proc, time.monotonic() - started


async def load(namesrv: str, messages: int, size: int) -> None:
    body = b"x" * size
    async with Producer("MemoryBenchProducer", namesrv) as producer:
        window = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with window:
                await producer.send(Message("MemoryBench", body, keys=f"k{i}"))

        await asyncio.gather(*(one(i) for i in range(messages)))
    done = asyncio.Event()
    seen = 0

    def on_messages(msgs: list[MessageExt]) -> ConsumeStatus:
        nonlocal seen
        seen += len(msgs)
        if seen >= messages:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "MemoryBenchConsumer", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("MemoryBench", "*")
    consumer.register_listener(on_messages)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=600)
    finally:
        await consumer.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        root = Path(tmp)
        ns_port, broker_port = free_port(), free_port()
        (root / "ns.properties").write_text(f"listenPort={ns_port}\nbindAddress=127.0.0.1\n")
        (root / "broker.conf").write_text(
            f"brokerName=bench\nlistenPort={broker_port}\nhaListenPort={free_port()}\nbindAddress=127.0.0.1\n"
            f"brokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={root / 'store'}\n"
        )
        ns, _ = spawn("mqnamesrv", root / "ns.properties", root / "ns.log", "boot success")
        broker, ready_s = spawn("mqbroker", root / "broker.conf", root / "broker.log", "boot success")
        try:
            time.sleep(3)
            idle = rss_mib(broker.pid)
            sampler = RssSampler(broker.pid)
            sampler.start()
            started = time.monotonic()
            asyncio.run(load(f"127.0.0.1:{ns_port}", args.messages, args.size))
            elapsed = time.monotonic() - started
            sampler.running = False
            sampler.join()
        finally:
            for proc in (broker, ns):
                proc.terminate()
                proc.wait(30)
    print("| measure | value | target |\n|---|---:|---|")
    print(f"| broker start to ready, empty store, 1 GiB CommitLog files | {ready_s:.2f} s | <= 2 s |")
    print(
        f"| broker RSS, idle after start | {idle['VmRSS']:.0f} MiB (anon {idle['RssAnon']:.0f}), "
        f"+ {idle['children']:.0f} MiB helper processes (anon {idle['children_own']:.0f}); together "
        f"{idle['VmRSS'] + idle['children']:.0f} MiB | <= 80 MiB |"
    )
    peak = sampler.peak
    print(
        f"| broker RSS, peak while {args.messages} x {args.size} B were produced and consumed ({elapsed:.0f} s) "
        f"| {peak['RssAnon'] + peak['RssShmem']:.0f} MiB own (RssAnon + RssShmem) + {peak['RssFile']:.0f} MiB of "
        f"mapped store files (page cache); VmRSS {peak['VmRSS']:.0f} MiB; helper processes "
        f"{peak['children_own']:.0f} MiB own (VmRSS {peak['children']:.0f} MiB with their mapped store files) "
        "| <= 200 MiB plus page cache |"
    )


if __name__ == "__main__":
    main()
