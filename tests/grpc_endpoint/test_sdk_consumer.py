"""The official Python SDK's consumers (rocketmq-python-client 5.1.2) against the broker's gRPC endpoint, over the
broker's POP: SimpleConsumer receive / ack / change invisible duration, a never-acked message coming back, a
PushConsumer, and messages crossing between our remoting SDK and the gRPC clients with every field intact."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from rocketmq import (
    ConsumeResult,
    FilterExpression,
    Message,
    MessageListener,
    PushConsumer,
    SimpleConsumer,
)
from rocketmq.v5.client.connection.rpc_client import RpcClient

from broker.client import BlockingProducer
from broker.client import Message as SdkMessage
from tests.grpc_endpoint.grpc_harness import GrpcServers, create_topic, sdk_config, sdk_send, unique_name
from tests.interop.interop_harness import sdk_pull_all

MakeSimple = Callable[[str, str], SimpleConsumer]


@pytest.fixture
def simple_of(grpc_servers: GrpcServers) -> Iterator[MakeSimple]:
    started: list[SimpleConsumer] = []

    def make(group: str, topic: str) -> SimpleConsumer:
        consumer = SimpleConsumer(sdk_config(grpc_servers), group, {topic: FilterExpression()}, await_duration=5)
        consumer.startup()
        started.append(consumer)
        return consumer

    yield make
    for consumer in started:
        consumer.shutdown()


def _receive_all(consumer: SimpleConsumer, expect: int, invisible_s: int = 15, timeout: float = 30) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        got.extend(consumer.receive(32, invisible_s))
    return got


def test_remoting_message_received_over_grpc_with_every_field(grpc_servers: GrpcServers, simple_of: MakeSimple) -> None:
    topic, group = unique_name("GrpcCross"), unique_name("GID-grpc-")
    create_topic(grpc_servers, topic)
    consumer = simple_of(group, topic)
    body = "héllo 世界 🚀 ".encode() * 400  # ~8 KiB: our SDK compresses it (sysFlag bit 0) on the wire
    with BlockingProducer(unique_name("PID-"), grpc_servers.namesrv_addr) as producer:
        sent = producer.send(
            SdkMessage(topic, body, tags="TagR", keys="rk-1 rk-2", properties={"color": "blue", "city": "Zürich"})
        )
    got = _receive_all(consumer, 1)
    assert len(got) == 1
    msg = got[0]
    assert msg.body == body
    assert msg.tag == "TagR"
    assert sorted(msg.keys) == ["rk-1", "rk-2"]
    assert msg.properties == {"color": "blue", "city": "Zürich"}
    assert msg.message_id == sent.msg_id  # the UNIQ_KEY our SDK made
    assert msg.topic == topic
    assert msg.delivery_attempt == 1
    assert msg.born_timestamp > 0 and msg.born_host
    assert not msg.corrupted  # the MD5 digest the endpoint sent matches the body
    consumer.ack(msg)


def test_receive_ack_and_change_invisible(grpc_servers: GrpcServers, simple_of: MakeSimple) -> None:
    topic, group = unique_name("GrpcSimple"), unique_name("GID-grpc-")
    create_topic(grpc_servers, topic)
    consumer = simple_of(group, topic)
    ids = sdk_send(grpc_servers, topic, 5)
    got = _receive_all(consumer, 5)
    assert sorted(m.message_id for m in got) == sorted(ids)
    assert {m.tag for m in got} == {"TagG"}
    postponed = got[0]
    consumer.change_invisible_duration(postponed, 12)  # a new handle replaces the old one
    for msg in got:
        consumer.ack(msg)  # the postponed one is acked with its new handle
    # all acked: nothing comes back, not even after the first invisibility would have ended
    assert consumer.receive(32, 10) == []


def test_never_acked_message_comes_back(grpc_servers: GrpcServers, simple_of: MakeSimple) -> None:
    topic, group = unique_name("GrpcRedeliver"), unique_name("GID-grpc-")
    create_topic(grpc_servers, topic)
    consumer = simple_of(group, topic)
    [msg_id] = sdk_send(grpc_servers, topic, 1)
    first = _receive_all(consumer, 1, invisible_s=10)
    assert [m.message_id for m in first] == [msg_id]
    assert first[0].delivery_attempt == 1
    again = _receive_all(consumer, 1, invisible_s=10, timeout=60)  # not acked: back after 10 s (revive)
    assert [m.message_id for m in again] == [msg_id]
    assert again[0].delivery_attempt == 2
    assert again[0].body == b"grpc-0" and again[0].properties == {"seq": "0"}
    consumer.ack(again[0])


def test_route_answered_before_its_callback_is_attached_after_asyncio_run(
    grpc_servers: GrpcServers, simple_of: MakeSimple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order a race sometimes gives, forced: every route query is answered before the SDK attaches its
    callback, so the callback (which builds the telemetry stream) runs in the main thread, after an
    `asyncio.run()` has left that thread without a loop. The only stand-in is the wait for the answer."""
    answered_first = RpcClient.query_topic_route_async

    def query_answered_first(self: RpcClient, *args: object, **kwargs: object) -> object:
        future = answered_first(self, *args, **kwargs)
        future.exception()  # waits for the answer
        return future

    monkeypatch.setattr(RpcClient, "query_topic_route_async", query_answered_first)
    asyncio.run(asyncio.sleep(0))
    topic, group = unique_name("GrpcRouteFirst"), unique_name("GID-grpc-")
    create_topic(grpc_servers, topic)
    consumer = simple_of(group, topic)
    [msg_id] = sdk_send(grpc_servers, topic, 1)
    [received] = _receive_all(consumer, 1)
    assert received.message_id == msg_id
    consumer.ack(received)


def test_push_consumer_receives_and_acks(grpc_servers: GrpcServers) -> None:
    topic, group = unique_name("GrpcPush"), unique_name("GID-grpc-")
    create_topic(grpc_servers, topic)
    received: list[Message] = []
    done = threading.Event()

    class Listener(MessageListener):
        def consume(self, message: Message) -> ConsumeResult:
            received.append(message)
            if len(received) >= 6:
                done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(sdk_config(grpc_servers), group, Listener(), {topic: FilterExpression()})
    consumer.startup()
    try:
        ids = sdk_send(grpc_servers, topic, 6)
        assert done.wait(60), f"received {len(received)} of 6"
    finally:
        consumer.shutdown()
    assert sorted(m.message_id for m in received) == sorted(ids)


def test_grpc_message_read_by_remoting_consumer(grpc_servers: GrpcServers) -> None:
    topic = unique_name("GrpcToRemoting")
    create_topic(grpc_servers, topic)
    ids = sdk_send(grpc_servers, topic, 3)
    records = sdk_pull_all(grpc_servers.namesrv_addr, unique_name("GID-pull-"), topic, 3)
    assert sorted(r.id for r in records) == sorted(ids)
    for r in records:
        seq = r.props["seq"]
        assert r.body == f"grpc-{seq}".encode() and r.tags == "TagG" and r.keys == f"gk-{seq}"
