"""The Python driver of bench/vs_grpc.py: the official Python SDK (rocketmq-python-client, the `grpc` extra) against
a gRPC endpoint, a child process that prints one JSON line at the end (the fields of bench/java/GrpcLoadGen.java's):

    python -m bench.vs_grpc_sdk send --endpoint H:P --topic T --threads N --seconds S --size B [--warmup W]
    python -m bench.vs_grpc_sdk consume --endpoint H:P --topic T --group G --count M [--threads 4] [--batch 32]
        [--wait 300]

`send`: N threads each sending synchronously (Producer.send) on one Producer for W + S seconds, the last S
counted. `consume`: one SimpleConsumer, N threads each receiving up to `batch` messages and acking each (the
SDK's ack_async returns no future, so the acks are synchronous), until M arrived; the rate is from the first
message to the last ack. `sdk()` runs it with a throw-away HOME (the SDK logs under ~/logs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from typing import Any

import orjson

from bench.vs_clients import child_json, quantile

__all__ = ["sdk"]


def sdk(mode: str, timeout: float, **options: object) -> dict[str, Any]:
    """`python -m bench.vs_grpc_sdk mode --key value ...` in a child process: its JSON result."""
    args = [str(a) for key, value in options.items() for a in (f"--{key}", value)]
    with tempfile.TemporaryDirectory(prefix="vs-grpc-sdk-") as home:
        cmd = [sys.executable, "-m", "bench.vs_grpc_sdk", mode, *args]
        return child_json(cmd, timeout, env={**os.environ, "HOME": home})


def _config(endpoint: str) -> Any:
    from rocketmq import ClientConfiguration, Credentials  # the grpc extra: only in the child

    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def send(endpoint: str, topic: str, threads: int, seconds: float, size: int, warmup: float) -> dict[str, Any]:
    from rocketmq import Message, Producer

    producer = Producer(_config(endpoint), (topic,))
    producer.startup()
    body = b"x" * size
    latencies: list[list[float]] = [[] for _ in range(threads)]
    failures = [0] * threads
    try:
        producer.send(_message(Message, topic, body))  # the route and the channel, before the clock starts
        start = time.monotonic() + warmup
        deadline = start + seconds

        def worker(slot: int) -> None:
            mine = latencies[slot]
            while time.monotonic() < deadline:
                begin = time.monotonic()
                try:
                    producer.send(_message(Message, topic, body))
                    ok = True
                except Exception:
                    ok = False
                if begin >= start:
                    failures[slot] += not ok
                    mine.append(time.monotonic() - begin)

        workers = [threading.Thread(target=worker, args=(slot,)) for slot in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        elapsed = time.monotonic() - start
    finally:
        producer.shutdown()
    ordered = sorted(x for mine in latencies for x in mine)
    count = len(ordered) - sum(failures)
    return {
        "mode": "send",
        "threads": threads,
        "batch": 1,
        "count": count,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(count / elapsed, 1),
        "p50_ms": round(quantile(ordered, 0.5) * 1000, 3),
        "p99_ms": round(quantile(ordered, 0.99) * 1000, 3),
        "failures": sum(failures),
    }


def _message(cls: Any, topic: str, body: bytes) -> Any:
    msg = cls()  # a fresh one a send: the SDK fills in the message id on the object
    msg.topic = topic
    msg.body = body
    return msg


def consume(endpoint: str, topic: str, group: str, count: int, threads: int, batch: int, wait: float) -> dict[str, Any]:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(_config(endpoint), group, {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    lock = threading.Lock()
    seen, failures = 0, 0
    first, last = 0.0, 0.0
    start = time.monotonic()
    give_up = start + wait

    def worker() -> None:
        nonlocal seen, failures, first, last
        while seen < count and time.monotonic() < give_up:
            try:
                views = consumer.receive(batch, 30)
            except Exception:
                with lock:
                    failures += 1
                continue
            if not views:
                continue
            with lock:
                first = first or time.monotonic()
            bad = 0
            for view in views:
                try:
                    consumer.ack(view)
                except Exception:
                    bad += 1
            with lock:
                seen += len(views)
                failures += bad
                last = time.monotonic()

    try:
        workers = [threading.Thread(target=worker) for _ in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
    finally:
        consumer.shutdown()
    begin, end = first or start, last or time.monotonic()
    draining = max(end - begin, 1e-9)
    return {
        "mode": "consume",
        "count": seen,
        "complete": seen >= count,
        "seconds": round(draining, 3),
        "to_first_s": round(begin - start, 3),
        "msgs_per_s": round(seen / draining, 1),
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="gRPC sends or a SimpleConsumer drain with the official Python SDK")
    parser.add_argument("mode", choices=["send", "consume"])
    parser.add_argument("--endpoint", required=True, help="host:port of the gRPC endpoint (plaintext)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--warmup", type=float, default=0, help="seconds of sends first, not counted")
    parser.add_argument("--group", default="vs-grpc-python")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=32, help="messages a receive asks for")
    parser.add_argument("--wait", type=float, default=300, help="seconds before a drain gives up")
    args = parser.parse_args()
    if not 1 <= args.threads <= 1024 or not 1 <= args.batch <= 32:
        parser.error("--threads: 1 to 1024, --batch: 1 to 32")
    if args.mode == "send":
        result = send(args.endpoint, args.topic, args.threads, args.seconds, args.size, args.warmup)
    else:
        result = consume(args.endpoint, args.topic, args.group, args.count, args.threads, args.batch, args.wait)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    sys.stdout.flush()
    os._exit(0)  # the SDK's non-daemon threads may outlive shutdown(); the result is out


if __name__ == "__main__":
    main()
