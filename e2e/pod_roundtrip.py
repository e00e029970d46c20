"""Run inside a pod by e2e/test_lifecycle.py: send COUNT messages to a topic of a RocketCluster and consume them
all, with our SDK (`--client ours`) or with the C++-core client of PyPI's `rocketmq` 0.4.4 (`--client cpp`, its
package mounted read-only from the node's peer cache; tests/peers installs it). NAMESRV_ADDR comes from the
cluster's `<cluster>-connection` ConfigMap, as for any client in the cluster.

Prints one JSON line: how many sends were acknowledged, how many distinct messages came back, and the CRC-32
sums of the bodies sent and consumed, so the test can compare them without trusting either side's count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import zlib


def body_of(run: str, i: int) -> bytes:
    return f"{run} message {i:05d} ".encode() * 8


def crc_sum(bodies: list[bytes]) -> int:
    return sum(zlib.crc32(b) for b in bodies)


def run_ours(namesrv: str, topic: str, run: str, count: int, timeout: float) -> dict[str, object]:
    from broker.client import ConsumeStatus, Message
    from broker.client.blocking import BlockingProducer, BlockingPushConsumer

    consumed: dict[str, bytes] = {}
    lock = threading.Lock()

    def on_messages(msgs: list) -> ConsumeStatus:  # type: ignore[type-arg]
        with lock:
            consumed.update((m.keys[0], m.body) for m in msgs if m.keys)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(f"{run}-consumers", namesrv)
    consumer.subscribe(topic, "*")
    consumer.register_listener(on_messages)
    consumer.start()
    sent: list[bytes] = []
    with BlockingProducer(f"{run}-producers", namesrv) as producer:
        for i in range(count):
            body = body_of(run, i)
            producer.send(Message(topic, body, keys=f"{run}-{i}"))
            sent.append(body)
    deadline = time.monotonic() + timeout
    while len(consumed) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    consumer.shutdown()
    with lock:
        bodies = list(consumed.values())
    return {"acked": len(sent), "sent_crc": crc_sum(sent), "consumed": len(bodies), "consumed_crc": crc_sum(bodies)}


def run_cpp(namesrv: str, topic: str, run: str, count: int, timeout: float) -> dict[str, object]:
    from rocketmq.client import Message, Producer, PushConsumer, SendStatus  # type: ignore[import-not-found]

    consumed: dict[str, bytes] = {}
    lock = threading.Lock()

    def on_message(msg) -> None:  # type: ignore[no-untyped-def]  # returning is success; raising, reconsume
        with lock:
            consumed[msg.keys.decode()] = msg.body

    consumer = PushConsumer(f"{run}-consumers")
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message, "*")
    consumer.start()
    producer = Producer(f"{run}-producers")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    sent: list[bytes] = []
    for i in range(count):
        msg = Message(topic)
        msg.set_keys(f"{run}-{i}")
        body = body_of(run, i)
        msg.set_body(body)
        for attempt in range(10):  # the C++ client does not retry a route look-up that failed (say, at start)
            try:
                ok = producer.send_sync(msg).status == SendStatus.OK
                break
            except Exception as exc:  # not acknowledged: send it again, as its users do
                print(f"send {i} attempt {attempt}: {exc}", file=sys.stderr, flush=True)
                time.sleep(1)
        else:
            ok = False
        if ok:
            sent.append(body)
    deadline = time.monotonic() + timeout
    while len(consumed) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    with lock:
        bodies = list(consumed.values())
    return {"acked": len(sent), "sent_crc": crc_sum(sent), "consumed": len(bodies), "consumed_crc": crc_sum(bodies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=["ours", "cpp"], required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    namesrv = os.environ["NAMESRV_ADDR"]
    run = f"{args.client}-{os.environ.get('POD_NAME', os.getpid())}"
    started = time.monotonic()
    runner = run_ours if args.client == "ours" else run_cpp
    result = runner(namesrv, args.topic, run, args.count, args.timeout)
    result |= {"client": args.client, "count": args.count, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # the C++ client's threads can hang an orderly interpreter exit; its shutdown can segfault


if __name__ == "__main__":
    main()
