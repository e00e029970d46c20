"""Auto-renew of push consumers' receipt handles (broker.grpc.receipts) with the official Python SDK's PushConsumer
(rocketmq-python-client 5.1.2), against its own NameServer + broker pair whose keys make the first invisible time
3 s, so that renewal, not a long invisible time, keeps a message from being delivered twice.

A consumer that is killed while its listener still works (a child process, kill -9) or that terminates leaves
its messages to another consumer of the group after `invisibleTimeMillisWhenClear`.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketmq import (
    ConsumeResult,
    FilterExpression,
    Message,
    MessageListener,
    PushConsumer,
)
from rocketmq.grpc_protocol import service_pb2

from tests.grpc_endpoint.grpc_harness import (
    GrpcServers,
    client_metadata,
    create_topic,
    raw_channel,
    sdk_config,
    sdk_send,
    unique_name,
)

RENEW_CONF = {
    "defaultInvisibleTimeMills": "3000",
    "renewAheadTimeMillis": "2000",
    "renewSchedulePeriodMillis": "300",
    "invisibleTimeMillisWhenClear": "1000",
}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def renew_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServers]:
    pair = GrpcServers(tmp_path_factory.mktemp("grpc-renew"), extra=RENEW_CONF)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


class _Recording(MessageListener):
    """Records every delivery; holds each message `hold_s` (longer than the invisible time) before acking."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.hold_s = hold_s
        self.deliveries: queue.Queue[Message] = queue.Queue()
        self.seen: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.seen[message.message_id] += 1
        self.deliveries.put(message)
        time.sleep(self.hold_s)
        with self.lock:
            self.done[message.message_id] += 1
        return ConsumeResult.SUCCESS


def test_slow_listener_gets_each_message_once(renew_servers: GrpcServers) -> None:
    topic, group = unique_name("GrpcRenew"), unique_name("GID-renew-")
    create_topic(renew_servers, topic)
    listener = _Recording(hold_s=9.0)  # three times the 3 s invisible time
    consumer = PushConsumer(sdk_config(renew_servers), group, listener, {topic: FilterExpression()})
    consumer.startup()
    try:
        ids = sdk_send(renew_servers, topic, 3)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with listener.lock:
                if all(listener.done[i] for i in ids):
                    break
            time.sleep(0.2)
        # long enough for a not-renewed message to have come back (3 s invisible time, revive every second)
        time.sleep(6)
    finally:
        consumer.shutdown()
    with listener.lock:
        assert all(listener.done[i] == 1 for i in ids), dict(listener.done)
        assert {i: listener.seen[i] for i in ids} == dict.fromkeys(ids, 1), "a message was delivered twice"


def _start_child(servers: GrpcServers, group: str, topic: str) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.grpc_endpoint.push_child", servers.grpc_endpoint, group, topic],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line[:1] == ["CLIENT"], f"the child consumer did not start: {line}"
    return child, line[1]


def _notify_termination(servers: GrpcServers, client_id: str) -> None:
    """NotifyClientTermination as the SDK's shutdown sends it (after its listeners return, which the child's never
    does, so the test sends it for the killed child)."""
    channel, stub = raw_channel(servers.grpc_endpoint)
    try:
        reply = stub.NotifyClientTermination(
            service_pb2.NotifyClientTerminationRequest(), metadata=client_metadata(client_id), timeout=10
        )
        assert reply.status.code == 20000, reply.status
    finally:
        channel.close()


@pytest.mark.parametrize("how", ["terminated", "killed"])
def test_message_held_by_a_gone_consumer_goes_to_another(renew_servers: GrpcServers, how: str) -> None:
    """The first consumer holds the message past its invisible time (renewed: the second one does not get it), then
    goes away without acking: the second one gets it soon, as its second delivery attempt."""
    topic, group = unique_name("GrpcRenewGone"), unique_name("GID-renew-")
    create_topic(renew_servers, topic)
    child, client_id = _start_child(renew_servers, group, topic)
    second: PushConsumer | None = None
    try:
        [msg_id] = sdk_send(renew_servers, topic, 1)
        assert child.stdout is not None
        got = child.stdout.readline().split()
        assert got == ["GOT", msg_id]
        listener = _Recording()
        second = PushConsumer(sdk_config(renew_servers), group, listener, {topic: FilterExpression()})
        second.startup()
        # the first consumer still works on it, well past the 3 s invisible time: not delivered again
        with pytest.raises(queue.Empty):
            listener.deliveries.get(timeout=8)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        if how == "terminated":
            _notify_termination(renew_servers, client_id)
        # killed: the endpoint notices the telemetry stream and heartbeats gone (CLIENT_GONE_S, 30 s)
        message = listener.deliveries.get(timeout=90)
        assert message.message_id == msg_id
        assert message.delivery_attempt == 2
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if second is not None:
            second.shutdown()
