"""The official Python SDK's producer (rocketmq-python-client 5.1.2) against the broker's gRPC endpoint, and what
our remoting consumer then reads: normal, FIFO, timed and transactional sends, every field intact."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from rocketmq import Message, Producer, TransactionChecker, TransactionResolution

from tests.grpc_endpoint.grpc_harness import GrpcServers, create_topic, sdk_config, unique_name
from tests.interop.interop_harness import Record, sdk_pull_all

MakeProducer = Callable[..., Producer]


@pytest.fixture
def producer_of(grpc_servers: GrpcServers) -> Iterator[MakeProducer]:
    started: list[Producer] = []

    def make(*topics: str, checker: TransactionChecker | None = None) -> Producer:
        config = sdk_config(grpc_servers)
        producer = Producer(config, topics, checker) if checker else Producer(config, topics)
        producer.startup()
        started.append(producer)
        return producer

    yield make
    for producer in started:
        producer.shutdown()


def _message(topic: str, i: int, **extra: object) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = f"gRPC body #{i} héllo 🚀".encode()
    msg.tag = f"tag{i % 2}"
    msg.keys = f"key-a-{i}"  # the SDK's setter adds one key per assignment
    msg.keys = f"key-b-{i}"
    msg.add_property("color", "blue")
    msg.add_property("seq", str(i))
    for key, value in extra.items():
        setattr(msg, key, value)
    return msg


def _pull(servers: GrpcServers, topic: str, expect: int, timeout: float = 15.0) -> list[Record]:
    return sdk_pull_all(servers.namesrv_addr, unique_name("GID-pull-"), topic, expect, timeout=timeout)


def test_normal_send_arrives_with_every_field(grpc_servers: GrpcServers, producer_of: MakeProducer) -> None:
    topic = unique_name("GrpcNormal")
    create_topic(grpc_servers, topic)
    producer = producer_of(topic)
    before_ms = int(time.time()) * 1000
    receipts = [producer.send(_message(topic, i)) for i in range(4)]
    records = sorted(_pull(grpc_servers, topic, 4), key=lambda r: r.seq)
    assert len(records) == 4
    for i, (receipt, record) in enumerate(zip(receipts, records, strict=True)):
        assert record.body == f"gRPC body #{i} héllo 🚀".encode()
        assert record.tags == f"tag{i % 2}"
        assert sorted((record.keys or "").split(" ")) == [f"key-a-{i}", f"key-b-{i}"]
        assert record.props["color"] == "blue" and record.props["seq"] == str(i)
        # the message id the SDK made is the UNIQ_KEY every RocketMQ client reads as the id
        assert record.props["UNIQ_KEY"] == receipt.message_id == record.id
        assert record.born_ts >= before_ms - 1000  # the SDK's born time (whole seconds)
        assert record.props["__BORNHOST"]
    # round robin over the write queues
    assert len({r.queue_id for r in records}) > 1


def test_fifo_group_stays_on_one_queue_in_order(grpc_servers: GrpcServers, producer_of: MakeProducer) -> None:
    topic = unique_name("GrpcFifo")
    create_topic(grpc_servers, topic, "FIFO")
    producer = producer_of(topic)
    for i in range(6):
        producer.send(_message(topic, i, message_group="order-1"))
    records = _pull(grpc_servers, topic, 6)
    assert len(records) == 6
    assert len({r.queue_id for r in records}) == 1
    assert [r.seq for r in sorted(records, key=lambda r: r.queue_offset)] == list(range(6))
    assert {r.props["__SHARDINGKEY"] for r in records} == {"order-1"}


def test_timed_message_is_held_until_its_delivery_time(grpc_servers: GrpcServers, producer_of: MakeProducer) -> None:
    topic = unique_name("GrpcDelay")
    create_topic(grpc_servers, topic, "DELAY")
    producer = producer_of(topic)
    deliver_s = int(time.time()) + 3
    producer.send(_message(topic, 0, delivery_timestamp=deliver_s))
    records = _pull(grpc_servers, topic, 1, timeout=30)
    assert len(records) == 1
    assert records[0].props["TIMER_DELIVER_MS"] == str(deliver_s * 1000)
    assert records[0].store_ts >= deliver_s * 1000 - 1000  # stored in the topic once due (timer granularity 1 s)


def test_normal_message_to_a_fifo_topic_is_refused(grpc_servers: GrpcServers, producer_of: MakeProducer) -> None:
    topic = unique_name("GrpcFifoOnly")
    create_topic(grpc_servers, topic, "FIFO")
    producer = producer_of(topic)
    with pytest.raises(Exception, match=r"(?i)message type|not match"):
        producer.send(_message(topic, 0))


def test_transaction_commit_and_rollback(grpc_servers: GrpcServers, producer_of: MakeProducer) -> None:
    topic = unique_name("GrpcTx")
    create_topic(grpc_servers, topic, "TRANSACTION")

    class Never(TransactionChecker):
        def check(self, message: Message) -> TransactionResolution:
            return TransactionResolution.ROLLBACK

    producer = producer_of(topic, checker=Never())
    committed = producer.begin_transaction()
    producer.send(_message(topic, 0), committed)
    committed.commit()
    rolled_back = producer.begin_transaction()
    producer.send(_message(topic, 1), rolled_back)
    rolled_back.rollback()
    records = _pull(grpc_servers, topic, 1, timeout=8)
    assert [r.seq for r in records] == [0]
    assert records[0].props["PGROUP"] == topic  # a gRPC producer's group is its topic (for checks)


def test_orphaned_transaction_recovered_over_telemetry(grpc_servers: GrpcServers, producer_of: MakeProducer) -> None:
    topic = unique_name("GrpcTxCheck")
    create_topic(grpc_servers, topic, "TRANSACTION")
    checked: list[Message] = []
    seen = threading.Event()

    class Commit(TransactionChecker):
        def check(self, message: Message) -> TransactionResolution:
            checked.append(message)
            seen.set()
            return TransactionResolution.COMMIT

    producer = producer_of(topic, checker=Commit())
    tx = producer.begin_transaction()
    receipt = producer.send(_message(topic, 7), tx)
    # neither commit nor rollback: the broker checks it (transactionTimeOut 1 s) through the telemetry stream
    assert seen.wait(30), "no recovery command reached the producer"
    assert checked[0].message_id == receipt.message_id
    assert checked[0].topic == topic and checked[0].body == _message(topic, 7).body
    records = _pull(grpc_servers, topic, 1, timeout=20)
    assert [r.seq for r in records] == [7]
