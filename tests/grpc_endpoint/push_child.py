"""A PushConsumer of the official Python SDK in its own process, for tests that kill it: prints `CLIENT <id>` once
started and `GOT <message id>` for each message, whose listener then never returns (the consumer is still
working on it when it is killed).

    python -m tests.grpc_endpoint.push_child <endpoint> <group> <topic>
"""

from __future__ import annotations

import sys
import threading

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    PushConsumer,
)


class _Holding(MessageListener):
    def consume(self, message: Message) -> ConsumeResult:
        print(f"GOT {message.message_id}", flush=True)
        threading.Event().wait()  # until the process is killed
        return ConsumeResult.SUCCESS


def main(endpoint: str, group: str, topic: str) -> None:
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    consumer = PushConsumer(config, group, _Holding(), {topic: FilterExpression()})
    consumer.startup()
    print(f"CLIENT {consumer.client_id}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(*sys.argv[1:4])
