"""FIFO consumption, SQL92 and tag filters, and dead letters, through the gRPC endpoint with the official Python
SDK 5.1.2 (and a raw ForwardMessageToDeadLetterQueue call, as the SDK's FIFO push consumer makes it)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.client import BlockingAdmin, MessageExt
from broker.client.errors import TopicNotExist
from tests.grpc_endpoint.grpc_harness import (
    GrpcServers,
    client_metadata,
    create_group,
    create_topic,
    raw_channel,
    sdk_config,
    unique_name,
)


@pytest.fixture
def consumers(grpc_servers: GrpcServers) -> Iterator[list[SimpleConsumer]]:
    started: list[SimpleConsumer] = []
    yield started
    for consumer in started:
        consumer.shutdown()


def _send(servers: GrpcServers, topic: str, messages: list[dict[str, object]]) -> list[str]:
    producer = Producer(sdk_config(servers), (topic,))
    producer.startup()
    try:
        ids = []
        for spec in messages:
            msg = Message()
            msg.topic = topic
            msg.body = str(spec["body"]).encode()
            if "tag" in spec:
                msg.tag = str(spec["tag"])
            if "group" in spec:
                msg.message_group = str(spec["group"])
            props: dict[str, str] = spec.get("props", {})  # type: ignore[assignment]
            for key, value in props.items():
                msg.add_property(key, value)
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


def _receive(consumer: SimpleConsumer, expect: int, timeout: float = 30) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        got.extend(consumer.receive(32, 15))
    return got


def test_fifo_group_gets_the_next_message_only_after_the_ack(
    grpc_servers: GrpcServers, consumers: list[SimpleConsumer]
) -> None:
    topic, group = unique_name("GrpcFifoC"), unique_name("GID-fifo-")
    create_topic(grpc_servers, topic, "FIFO", queues=2)
    create_group(grpc_servers, group, consumeMessageOrderly=True)
    _send(grpc_servers, topic, [{"body": f"m{i}", "group": "g-1"} for i in range(4)])
    consumer = SimpleConsumer(sdk_config(grpc_servers), group, {topic: FilterExpression()}, await_duration=3)
    consumer.startup()
    consumers.append(consumer)
    order: list[str] = []
    deadline = time.monotonic() + 60
    while len(order) < 4 and time.monotonic() < deadline:
        batch = consumer.receive(1, 15)
        for msg in batch:
            assert msg.message_group == "g-1"
            order.append(msg.body.decode())
            # while this one is not acked, the group's next message is withheld
            assert consumer.receive(1, 15) == []
            consumer.ack(msg)
    assert order == ["m0", "m1", "m2", "m3"]


_FILTERED = [
    {"body": "a", "tag": "TagA", "props": {"num": "1", "color": "red"}},
    {"body": "b", "tag": "TagB", "props": {"num": "2", "color": "red"}},
    {"body": "c", "tag": "TagC", "props": {"num": "3", "color": "red"}},
    {"body": "d", "tag": "TagA", "props": {"num": "4", "color": "blue"}},
]


@pytest.mark.parametrize(
    ("expression", "sql", "wanted"),
    [("TagA || TagC", False, {"a", "c", "d"}), ("num > 1 AND color = 'red'", True, {"b", "c"})],
    ids=["tag", "sql92"],
)
def test_filters(
    grpc_servers: GrpcServers, consumers: list[SimpleConsumer], expression: str, sql: bool, wanted: set[str]
) -> None:
    topic, group = unique_name("GrpcFilter"), unique_name("GID-filter-")
    create_topic(grpc_servers, topic)
    kind = definition_pb2.FilterType.SQL if sql else definition_pb2.FilterType.TAG
    consumer = SimpleConsumer(
        sdk_config(grpc_servers), group, {topic: FilterExpression(expression, kind)}, await_duration=3
    )
    consumer.startup()
    consumers.append(consumer)
    _send(grpc_servers, topic, _FILTERED)
    got = _receive(consumer, len(wanted))
    got += consumer.receive(32, 15)  # nothing else comes
    assert {m.body.decode() for m in got} == wanted
    for msg in got:
        consumer.ack(msg)


def test_forward_to_dead_letter_queue(grpc_servers: GrpcServers, consumers: list[SimpleConsumer]) -> None:
    topic, group = unique_name("GrpcDlq"), unique_name("GID-dlq-")
    create_topic(grpc_servers, topic)
    consumer = SimpleConsumer(sdk_config(grpc_servers), group, {topic: FilterExpression()}, await_duration=3)
    consumer.startup()
    consumers.append(consumer)
    [msg_id] = _send(grpc_servers, topic, [{"body": "poison", "tag": "TagP", "props": {"k": "v"}}])
    [msg] = _receive(consumer, 1)
    channel, stub = raw_channel(grpc_servers.grpc_endpoint)
    with channel:
        request = service_pb2.ForwardMessageToDeadLetterQueueRequest()
        request.group.name, request.topic.name = group, topic
        request.receipt_handle, request.message_id = msg.receipt_handle, msg.message_id
        request.delivery_attempt, request.max_delivery_attempts = 1, 1
        reply = stub.ForwardMessageToDeadLetterQueue(request, metadata=client_metadata(), timeout=10)
        assert reply.status.code == definition_pb2.Code.OK, reply.status
    # the DLQ is write-only (consumers cannot pull it): found by its message id, as `mqadmin queryMsgById` does
    deadline = time.monotonic() + 15
    found: list[MessageExt] = []
    with BlockingAdmin(grpc_servers.namesrv_addr) as admin:
        while not found:
            assert time.monotonic() < deadline, "the message never reached the DLQ"
            with contextlib.suppress(TopicNotExist):  # until the broker registered the new DLQ topic
                found = admin.query_message_by_uniq_key(f"%DLQ%{group}", msg_id)
            time.sleep(0.2)
    assert found[0].body == b"poison" and found[0].properties["k"] == "v" and found[0].tags == "TagP"
    assert consumer.receive(32, 15) == []  # acked: never comes back
