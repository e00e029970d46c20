"""Peer script for the C++-core Python clients (PyPI rocketmq 0.4.4 and rocketmq-python-cvs).

Run by tests/peers/__init__.py with the peer's own venv python (never ours: both packages install a
module named `rocketmq`). Starts a PushConsumer (so the broker sees a consumer heartbeat and pulls),
sends COUNT messages with a tag, key and user property, prints one JSON line per send result,
lingers so the consumer gets through its rebalance, then leaves with os._exit: the cvs build
segfaults in PushConsumer.shutdown().
"""

import argparse
import json
import os
import sys
import time

from rocketmq.client import Message, Producer, PushConsumer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default="PID-golden")
    parser.add_argument("--consumer-group", default="CID-golden")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--linger", type=float, default=2.0)
    args = parser.parse_args()

    consumer = PushConsumer(args.consumer_group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.subscribe(args.topic, lambda msg: None, "tagA")
    consumer.start()

    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    for i in range(args.count):
        msg = Message(args.topic)
        msg.set_tags("tagA")
        msg.set_keys(f"k{i}")
        msg.set_property("color", "blue")
        msg.set_body(f"golden body {i}")
        result = producer.send_sync(msg)
        print(json.dumps({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset}))
        sys.stdout.flush()
    time.sleep(args.linger)
    producer.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
