"""Apache RocketMQ's Java 5.x gRPC client (rocketmq-client-java 5.0.8 from Maven Central, unchanged) against our
broker's gRPC endpoint (`enableProxy=true`, plaintext: the driver sets `enableSsl(false)`, the client's default is TLS).

One broker for the module; the runs happen once, in two concurrent phases, in the module fixture: first one Java
producer sends normal, FIFO, delay and transactional messages (one transaction committed, one rolled back, one left
open for its TransactionChecker) while our remoting SDK sends to a topic of its own; then a Java SimpleConsumer,
two Java PushConsumers (one FIFO group), a Java SimpleConsumer that leaves a message unacked and changes its
invisible duration, and our remoting push consumer all read; so do a Java PushConsumer whose listener always fails
and a Java SimpleConsumer that never acks, both in groups that allow DLQ_ATTEMPTS deliveries, whose messages must
end in %DLQ%<group>. The tests check what each one got, field by field.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rocketmq.grpc_protocol", reason="the gRPC endpoint needs the `grpc` extra")

from tests.grpc_endpoint.grpc_harness import GrpcServers, create_group, create_topic
from tests.interop.interop_harness import Record, SdkConsumer, fields, home_for, sdk_produce
from tests.interop.java_grpc_harness import Grpc5Proc, ensure_java_grpc, grpc5
from tests.interop.test_java_features import dead_letters

pytestmark = pytest.mark.peers

ORIGIN = "java5g"
#: topic → (message.type attribute, what the Java producer sends there, how many)
TOPICS = {
    "J5Normal": (None, "normal", 5),
    "J5Delay": ("DELAY", "delay", 2),
    "J5Tx": ("TRANSACTION", "transaction", 3),
    "J5Fifo": ("FIFO", "fifo", 6),
    "J5Push": (None, "normal", 5),
    "J5Redeliver": (None, "normal", 1),
    "J5ToSdk": (None, "normal", 5),
    "J5DlqPush": (None, "normal", 3),
    "J5DlqSimple": (None, "normal", 3),
}
FROM_SDK = "J5FromSdk"
SDK_COUNT = 5
SIMPLE_TOPICS = ["J5Normal", "J5Delay", "J5Tx", FROM_SDK]
#: what the SimpleConsumer acks: every normal and delay message, the two committed transactions, our SDK's messages
SIMPLE_EXPECT = 5 + 2 + 2 + SDK_COUNT
#: the groups of the failing consumers: retryMaxTimes 2, so the settings say max_attempts 3
DLQ_GROUPS = {"J5DlqPush": "J5-dlq-push", "J5DlqSimple": "J5-dlq-simple"}
DLQ_ATTEMPTS = 3
BROKER_CONF = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}


@dataclass
class Runs:
    producer: Grpc5Proc
    sdk_sent: dict[int, str]
    simple: Grpc5Proc
    push: Grpc5Proc
    fifo: Grpc5Proc
    redeliver: Grpc5Proc
    sdk_consumer: SdkConsumer
    push_fail: Grpc5Proc
    nack: Grpc5Proc
    namesrv_addr: str

    def sent(self, topic: str) -> dict[int, dict[str, Any]]:
        return {int(e["seq"]): e for e in self.producer.of("sent") if e["topic"] == topic}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    problem = ensure_java_grpc()
    if problem is not None:
        pytest.skip(f"rocketmq-client-java cannot be installed here: {problem}")
    root = tmp_path_factory.mktemp("java-grpc")
    servers = GrpcServers(root, extra=BROKER_CONF)
    servers.start()
    try:
        for topic, (message_type, _kind, _count) in TOPICS.items():
            create_topic(servers, topic, message_type)
        create_topic(servers, FROM_SDK)
        create_group(servers, "J5-fifo", consumeMessageOrderly=True)
        for group in DLQ_GROUPS.values():
            create_group(servers, group, retryMaxTimes=DLQ_ATTEMPTS - 1)
        yield _run(servers, root)
    finally:
        servers.stop()


def _run(servers: GrpcServers, root: Path) -> Runs:
    endpoint = servers.grpc_endpoint
    specs = [f"{topic}:{kind}:{count}" for topic, (_t, kind, count) in TOPICS.items()]
    producer = grpc5(["produce", endpoint, ORIGIN, *specs], home_for(root, "producer")).start()
    sdk_results = sdk_produce(servers.namesrv_addr, [("sync", FROM_SDK)], SDK_COUNT, origin="sdk")
    producer.wait()
    assert producer.returncode == 0 and not producer.of("error"), producer.describe()
    consumers = [
        grpc5(["simple", endpoint, "J5-simple", str(SIMPLE_EXPECT), "60", *SIMPLE_TOPICS], home_for(root, "simple")),
        grpc5(["push", endpoint, "J5Push", "J5-push", "5", "60"], home_for(root, "push")),
        grpc5(["push", endpoint, "J5Fifo", "J5-fifo", "6", "60"], home_for(root, "fifo")),
        grpc5(["redeliver", endpoint, "J5Redeliver", "J5-redeliver"], home_for(root, "redeliver")),
        grpc5(
            ["pushfail", endpoint, "J5DlqPush", DLQ_GROUPS["J5DlqPush"], str(3 * DLQ_ATTEMPTS), "60"],
            home_for(root, "pushfail"),
        ),
        grpc5(
            ["nack", endpoint, "J5DlqSimple", DLQ_GROUPS["J5DlqSimple"], str(3 * DLQ_ATTEMPTS), "60"],
            home_for(root, "nack"),
        ),
    ]
    for proc in consumers:
        proc.start()
    sdk_consumer = SdkConsumer(servers.namesrv_addr, "J5-sdk", ["J5ToSdk"], expect=5).start()
    sdk_consumer.wait(90)
    for proc in consumers:
        proc.wait()
    simple, push, fifo, redeliver, push_fail, nack = consumers
    sdk_sent = {i: r.msg_id for i, r in enumerate(sdk_results)}  # sent in seq order
    return Runs(producer, sdk_sent, simple, push, fifo, redeliver, sdk_consumer, push_fail, nack, servers.namesrv_addr)


def check_fields(record: Record, origin: str) -> None:
    """Body, tag, keys and exactly the user properties the producer set (no broker property leaks into them)."""
    want = fields(origin, record.topic, record.seq)
    assert record.body == want["body"].encode(), record
    assert record.tags == want["tags"], record
    assert record.keys == want["keys"], record


def check_java_view(event: dict[str, Any], origin: str) -> Record:
    record = Record.from_event(event)
    check_fields(record, origin)
    assert record.props == fields(origin, record.topic, record.seq)["props"], record
    return record


def by_topic(proc: Grpc5Proc, stage: str = "simple") -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in proc.of("msg"):
        if event["stage"] == stage:
            out[event["topic"]].append(event)
    return out


def test_java_producer_sends_every_kind(runs: Runs) -> None:
    for topic, (_t, kind, count) in TOPICS.items():
        sent = runs.sent(topic)
        assert sorted(sent) == list(range(count)), (topic, runs.producer.describe())
        assert all(e["kind"] == kind and e["message_id"] for e in sent.values())
    # the open transaction was checked and committed by the TransactionChecker
    checks = runs.producer.of("check")
    assert [(c["topic"], c["seq"]) for c in checks] == [("J5Tx", "2")], runs.producer.describe()
    assert checks[0]["message_id"] == runs.sent("J5Tx")[2]["message_id"]


def test_simple_consumer_receives_and_acks_normal_messages(runs: Runs) -> None:
    assert runs.simple.returncode == 0 and not runs.simple.of("error"), runs.simple.describe()
    got = by_topic(runs.simple)["J5Normal"]
    sent = runs.sent("J5Normal")
    assert sorted(int(e["props"]["seq"]) for e in got) == list(range(5)), runs.simple.describe()
    for event in got:
        record = check_java_view(event, ORIGIN)
        assert record.id == sent[record.seq]["message_id"]
        assert event["delivery_attempt"] == 1 and event["message_group"] is None
    # acked, so nothing came back in the receives after the last one (nor the rolled-back transaction)
    extra = [e for e in runs.simple.of("msg") if e["stage"] != "simple"]
    assert not extra, extra


def test_delay_messages_arrive_at_their_delivery_time(runs: Runs) -> None:
    got = by_topic(runs.simple)["J5Delay"]
    sent = runs.sent("J5Delay")
    assert sorted(int(e["props"]["seq"]) for e in got) == [0, 1], runs.simple.describe()
    for event in got:
        record = check_java_view(event, ORIGIN)
        delivery = sent[record.seq]["delivery_ts"]
        assert event["delivery_ts"] == delivery, event
        # the broker held it until then (same machine, one clock)
        assert event["receive_ts"] >= delivery, event


def test_transactions_commit_rollback_and_check(runs: Runs) -> None:
    got = [e for e in runs.simple.of("msg") if e["topic"] == "J5Tx"]
    # seq 0 committed, seq 2 committed by the checker, seq 1 rolled back: never delivered
    assert sorted(int(e["props"]["seq"]) for e in got) == [0, 2], runs.simple.describe()
    for event in got:
        record = check_java_view(event, ORIGIN)
        assert record.id == runs.sent("J5Tx")[record.seq]["message_id"]


def test_push_consumer_gets_every_message(runs: Runs) -> None:
    assert runs.push.returncode == 0 and not runs.push.of("error"), runs.push.describe()
    got = runs.push.of("msg")
    assert sorted(int(e["props"]["seq"]) for e in got) == list(range(5)), runs.push.describe()
    for event in got:
        check_java_view(event, ORIGIN)


def test_fifo_push_consumer_gets_each_group_in_order(runs: Runs) -> None:
    assert runs.fifo.returncode == 0 and not runs.fifo.of("error"), runs.fifo.describe()
    got = runs.fifo.of("msg")
    assert sorted(int(e["props"]["seq"]) for e in got) == list(range(6)), runs.fifo.describe()
    order: dict[str, list[int]] = defaultdict(list)
    for event in got:
        record = check_java_view(event, ORIGIN)
        assert event["message_group"] == f"g{record.seq % 2}", event
        order[event["message_group"]].append(record.seq)
    assert order == {"g0": [0, 2, 4], "g1": [1, 3, 5]}, runs.fifo.describe()


def test_unacked_message_comes_back_and_change_invisible_duration(runs: Runs) -> None:
    run = runs.redeliver
    assert run.returncode == 0 and not run.of("error"), run.describe()
    stages = {e["stage"]: e for e in run.of("msg")}
    assert set(stages) == {"first", "second", "third"}, run.describe()
    message_id = runs.sent("J5Redeliver")[0]["message_id"]
    assert {e["id"] for e in stages.values()} == {message_id}
    # never acked → back after its invisible time; changed to 1 s → back again; acked → gone
    assert [stages[s]["delivery_attempt"] for s in ("first", "second", "third")] == [1, 2, 3]
    for event in stages.values():
        check_java_view(event, ORIGIN)
    assert [e["message_id"] for e in run.of("acked")] == [message_id]


def test_java_simple_consumer_reads_our_remoting_producer_intact(runs: Runs) -> None:
    got = by_topic(runs.simple)[FROM_SDK]
    assert sorted(int(e["props"]["seq"]) for e in got) == list(range(SDK_COUNT)), runs.simple.describe()
    for event in got:
        record = check_java_view(event, "sdk")
        # the gRPC message id is the UNIQ_KEY our SDK made
        assert record.id == runs.sdk_sent[record.seq], (record, runs.sdk_sent)


def test_our_remoting_consumer_reads_java_grpc_producer_intact(runs: Runs) -> None:
    records = runs.sdk_consumer.records
    assert sorted(r.seq for r in records) == list(range(5)), records
    sent = runs.sent("J5ToSdk")
    for record in records:
        check_fields(record, ORIGIN)
        want = fields(ORIGIN, record.topic, record.seq)["props"]
        assert {k: record.props.get(k) for k in want} == want, record
        # the Java client's message id (its own format, 34 hex digits) is the UNIQ_KEY
        assert record.props.get("UNIQ_KEY") == sent[record.seq]["message_id"] == record.id, record
        assert record.reconsume_times == 0


@pytest.mark.parametrize(("topic", "role"), [("J5DlqPush", "push_fail"), ("J5DlqSimple", "nack")])
def test_retries_end_in_the_dlq(runs: Runs, topic: str, role: str) -> None:
    """A PushConsumer returning FAILURE (the client forwards its last failure with ForwardMessageToDeadLetterQueue)
    and a SimpleConsumer never acking (the broker's revive moves a message that has had retryMaxTimes retries): each
    message is delivered exactly max_attempts times, then it is in %DLQ%<group> intact."""
    run: Grpc5Proc = getattr(runs, role)
    assert run.returncode == 0 and not run.of("error"), run.describe()
    sent = runs.sent(topic)
    deliveries = Counter((int(e["props"]["seq"]), e["delivery_attempt"]) for e in run.of("msg"))
    want = Counter((i, attempt) for i in range(3) for attempt in range(1, DLQ_ATTEMPTS + 1))
    assert deliveries == want, run.describe()
    for event in run.of("msg"):
        record = check_java_view(event, ORIGIN)
        assert record.id == sent[record.seq]["message_id"], event
    group = DLQ_GROUPS[topic]
    dlq = [Record.from_message(m) for m in dead_letters(runs.namesrv_addr, f"%DLQ%{group}", ORIGIN, 3)]
    assert sorted(r.seq for r in dlq) == [0, 1, 2], dlq
    for record in dlq:
        assert record.topic == f"%DLQ%{group}", record
        check_fields(record, ORIGIN)
        want_props = fields(ORIGIN, topic, record.seq)["props"]
        assert {k: record.props.get(k) for k in want_props} == want_props, record
        # the Java client's message id stays the message's UNIQ_KEY, and the dead letter says where it came from
        message_id = sent[record.seq]["message_id"]
        assert record.props.get("UNIQ_KEY") == message_id, record
        assert record.props.get("DLQ_ORIGIN_TOPIC") == topic, record
        assert record.props.get("DLQ_ORIGIN_MESSAGE_ID") == message_id, record
