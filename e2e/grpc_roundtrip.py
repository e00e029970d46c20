"""Run inside a pod by e2e/test_grpc_node.py: send COUNT messages over a RocketCluster's gRPC endpoint with the
official Python SDK (`rocketmq` 5.1.2, the image's grpc extra) and receive and ack them all with its
SimpleConsumer. GRPC_ENDPOINT, NAMESRV_ADDR and CLUSTER_NAME come from the cluster's `<cluster>-connection`
ConfigMap, as for any client in the cluster; the topic is made first with our admin client, unless
`--existing-topic` (a secured cluster's topic is a RocketTopic). With ACCESS_KEY and SECRET_KEY in the environment
the SDK signs with them; `--tls` makes it speak TLS, trusting the CA file GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names
and checking every host name it dials against the certificate, as that SDK always does.

Prints one JSON line: how many sends were acknowledged, how many distinct messages of this run came back and were
acked, the CRC-32 sums of the bodies sent and received, so the test compares them without trusting either side's
count, and how many other messages the topic held.
"""

from __future__ import annotations

import argparse
import json
import logging
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
    parser.add_argument("--existing-topic", action="store_true")
    parser.add_argument("--group")
    parser.add_argument("--tls", action="store_true")
    args = parser.parse_args()

    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    from broker.client import BlockingAdmin

    # the SDK logs only to a file in the pod: its warnings (a refused or failed route query) go to the job's log too
    sdk_log = logging.StreamHandler(sys.stderr)
    sdk_log.setLevel(logging.WARNING)
    sdk = logging.getLogger("rocketmq-python-client")
    sdk.addHandler(sdk_log)

    endpoint, namesrv, cluster = os.environ["GRPC_ENDPOINT"], os.environ["NAMESRV_ADDR"], os.environ["CLUSTER_NAME"]
    if not args.existing_topic:
        with BlockingAdmin(namesrv.split(";")[0]) as admin:
            admin.create_topic(args.topic, cluster=cluster, read_queue_nums=4, write_queue_nums=4)
    credentials = Credentials(os.environ.get("ACCESS_KEY", ""), os.environ.get("SECRET_KEY", ""))
    config = ClientConfiguration(endpoint, credentials, request_timeout=10)
    # the consumer first: its group exists before the sends, so it starts at the first message
    group = args.group or f"{args.topic}-group"
    consumer = SimpleConsumer(config, group, {args.topic: FilterExpression()}, await_duration=5, tls_enable=args.tls)
    consumer.startup()
    producer = Producer(config, (args.topic,), tls_enable=args.tls)
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
    # a topic other clients wrote to before (a new group starts at its first message) gives more than this run's
    expected = set(sent)
    received: dict[bytes, None] = {}
    others = 0
    while len(received) < len(sent) and time.monotonic() < deadline:
        try:
            batch = consumer.receive(32, 15)
        except Exception as exc:  # the SDK raises when one route query fails (it does not retry it): try again
            print(f"receive failed, retrying: {exc}", file=sys.stderr)
            time.sleep(1)
            continue
        for got in batch:
            consumer.ack(got)
            body = bytes(got.body)
            if body in expected:
                received[body] = None
            else:
                others += 1
    consumer.shutdown()
    sdk.removeHandler(sdk_log)  # the result stays the log's last line
    bodies = list(received)
    print(
        json.dumps(
            {
                "acked": len(sent),
                "sent_crc": crc_sum(sent),
                "received": len(bodies),
                "received_crc": crc_sum(bodies),
                "others": others,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
