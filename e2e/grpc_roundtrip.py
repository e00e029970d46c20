"""Run inside a pod by e2e/test_grpc_node.py: send COUNT messages over a RocketCluster's gRPC endpoint with the
official Python SDK (`rocketmq` 5.1.2, the image's grpc extra) and receive and ack them all with its
SimpleConsumer. GRPC_ENDPOINT, NAMESRV_ADDR and CLUSTER_NAME come from the cluster's `<cluster>-connection`
ConfigMap, as for any client in the cluster; the topic is made first with our admin client.

Prints one JSON line: how many sends were acknowledged, how many distinct messages came back and were acked, and
the CRC-32 sums of the bodies sent and received, so the test compares them without trusting either side's count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib


def crc_sum(bodies: list[bytes]) -> int:
    return sum(zlib.crc32(b) for b in bodies)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()

    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    from broker.client import BlockingAdmin

    endpoint, namesrv, cluster = os.environ["GRPC_ENDPOINT"], os.environ["NAMESRV_ADDR"], os.environ["CLUSTER_NAME"]
    with BlockingAdmin(namesrv.split(";")[0]) as admin:
        admin.create_topic(args.topic, cluster=cluster, read_queue_nums=4, write_queue_nums=4)
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    # the consumer first: its group exists before the sends, so it starts at the first message
    consumer = SimpleConsumer(config, f"{args.topic}-group", {args.topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    producer = Producer(config, (args.topic,))
    producer.startup()
    sent: list[bytes] = []
    deadline = time.monotonic() + args.timeout
    for i in range(args.count):
        msg = Message()
        msg.topic, msg.body = args.topic, f"{args.topic} grpc message {i:05d}".encode()
        while True:  # the topic's route may take a moment to reach the NameServers
            try:
                producer.send(msg)
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise
                print(f"send {i} failed, retrying: {exc}", file=sys.stderr)
                time.sleep(1)
        sent.append(msg.body)
    producer.shutdown()
    received: dict[bytes, None] = {}
    while len(received) < len(sent) and time.monotonic() < deadline:
        for got in consumer.receive(32, 15):
            consumer.ack(got)
            received[bytes(got.body)] = None
    consumer.shutdown()
    bodies = list(received)
    print(
        json.dumps(
            {"acked": len(sent), "sent_crc": crc_sum(sent), "received": len(bodies), "received_crc": crc_sum(bodies)}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
