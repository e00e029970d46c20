"""Apache RocketMQ's Go client (rocketmq-client-go/v2, unchanged, from the Go module proxy) against our
NameServer and broker: everything the Go client offers of the feature list.

Producer sync / async / oneway / batch / ordered (read back by our SDK) and to a topic nobody created
(TBW102), push consumer concurrently and orderly with tag and SQL92 selectors, two instances of a group
(each message once) and broadcasting to two, offsets committed to the broker, the PullConsumer (Poll
and ACK, PullFrom), transactions with check-backs, delay levels, retries into %DLQ%, Request/Reply both
ways with our SDK, and timed delivery (Message.WithDelayTimestamp, the TIMER_DELIVER_MS property). Query
by key or id is not tested: the Go client has no API for it (docs/compatibility.md, note 15). The
broker maps every delay level to 1 s and checks transactions every second, so no test waits for
production timings.
"""

from __future__ import annotations

import base64
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from broker.client import BlockingAdmin, BlockingProducer, BlockingPushConsumer, ConsumeStatus, MessageExt, Producer
from broker.client.request import create_reply_message
from broker.protocol.reply import CORRELATION_ID, MSG_TYPE, REPLY_TO_CLIENT
from broker.transport.loop import run
from tests.interop.go_harness import GoProc, check_intact, ensure_go, go
from tests.interop.interop_harness import (
    CLUSTER,
    Record,
    ServerPair,
    fields,
    home_for,
    run_all,
    sdk_message,
    sdk_produce,
    sdk_pull_all,
)
from tests.interop.java_harness import JAVA_BROKER_CONF
from tests.interop.test_java_features import dead_letters

pytestmark = pytest.mark.peers

COUNT = 10
SEND_MODES = ("sync", "async", "oneway", "batch", "ordered")
#: A topic the test does not create: the first send creates it from TBW102's route.
AUTO_CREATED = "GoSendAutoCreated"
REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"


@pytest.fixture(scope="module")
def go_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    problem = ensure_go()
    if problem is not None:
        pytest.skip(f"the Go RocketMQ client cannot be built here: {problem}")
    pair = ServerPair(tmp_path_factory.mktemp("go-features"), extra=JAVA_BROKER_CONF)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


def go_run(servers: ServerPair, name: str, args: list[str]) -> GoProc:
    return go([*args, "--namesrv", servers.namesrv_addr, "--timeout", "60"], home_for(servers.root, name), 80)


def seqs(records: list[Record]) -> Counter[int]:
    return Counter(r.seq for r in records)


@pytest.fixture(scope="module")
def sends(go_servers: ServerPair) -> GoProc:
    """One Go producer sends COUNT messages with each API, each to its own topic."""
    topics = [f"GoSend-{mode}" for mode in SEND_MODES]
    go_servers.create_topics(topics)
    args = ["produce", "--origin", "gosend", "--count", str(COUNT)]
    for mode, topic in zip(SEND_MODES, topics, strict=True):
        args += ["--send", f"{mode}:{topic}"]
    args += ["--send", f"sync:{AUTO_CREATED}"]
    return go_run(go_servers, "go-send", args).start().wait()


@pytest.mark.parametrize("mode", SEND_MODES)
def test_go_producer_send_is_stored_intact(go_servers: ServerPair, sends: GoProc, mode: str) -> None:
    topic = f"GoSend-{mode}"
    assert sends.returncode == 0 and not sends.of("send_error"), sends.describe()
    results = [e for e in sends.of("sent") if e["topic"] == topic]
    if mode == "batch":
        assert len(results) == 1 and results[0]["n"] == COUNT and results[0]["status"] == "SEND_OK", results
    else:
        assert sorted(e["seq"] for e in results) == list(range(COUNT)), results
    if mode not in ("batch", "oneway"):
        assert {e["status"] for e in results} == {"SEND_OK"}, results
    stored = sdk_pull_all(go_servers.namesrv_addr, f"CID-go-send-check-{mode}", topic, COUNT)
    assert seqs(stored) == Counter(range(COUNT)), [r.seq for r in stored]
    for record in stored:
        check_intact(record, "gosend")
    if mode in ("sync", "async", "ordered"):
        sent = {e["seq"]: e for e in results}
        for record in stored:  # the id a send returned is the UNIQ_KEY; its queue and offset are where it is
            assert sent[record.seq]["msg_id"] == record.props["UNIQ_KEY"], (sent[record.seq], record)
            assert (sent[record.seq]["queue_id"], sent[record.seq]["queue_offset"]) == (
                record.queue_id,
                record.queue_offset,
            )
    if mode == "ordered":  # the sharding key kept each shard on one queue, in send order
        for shard in {r.props["shard"] for r in stored}:
            mine = sorted((r for r in stored if r.props["shard"] == shard), key=lambda r: r.queue_offset)
            assert len({r.queue_id for r in mine}) == 1, mine
            assert [r.seq for r in mine] == sorted(r.seq for r in mine), mine


def test_go_send_to_a_topic_nobody_created(go_servers: ServerPair, sends: GoProc) -> None:
    """The producer falls back to TBW102's route; the broker creates the topic on the first send."""
    results = [e for e in sends.of("sent") if e["topic"] == AUTO_CREATED]
    assert sorted(e["seq"] for e in results) == list(range(COUNT)), sends.describe()
    assert {e["status"] for e in results} == {"SEND_OK"}, results
    stored = sdk_pull_all(go_servers.namesrv_addr, "CID-go-send-check-auto", AUTO_CREATED, COUNT)
    assert seqs(stored) == Counter(range(COUNT)), [r.seq for r in stored]
    for record in stored:
        check_intact(record, "gosend")


@pytest.mark.parametrize(
    ("name", "options", "wanted"),
    [
        ("concurrently", [], range(COUNT)),
        ("orderly", ["--orderly"], range(COUNT)),
        ("tag", ["--expr", "tag1"], range(1, COUNT, 2)),
        ("orderly-tag", ["--orderly", "--expr", "tag0 || tag1"], range(COUNT)),
        ("sql92", ["--sql", "seq >= 6 AND color = 'blue'"], range(6, COUNT)),
    ],
)
def test_go_push_consumer(go_servers: ServerPair, name: str, options: list[str], wanted: range) -> None:
    topic = f"GoConsume-{name}"
    go_servers.create_topics([topic])
    sdk_produce(go_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run_ = go_run(
        go_servers,
        f"go-consume-{name}",
        ["consume", "--group", f"CID-go-{name}", "--topic", topic, "--expect", str(len(wanted)), *options],
    )
    run_.start().wait()
    assert run_.returncode == 0, run_.describe()
    got = run_.records()
    assert seqs(got) == Counter(wanted), run_.describe()
    for record in got:
        check_intact(record, "sdk")
    if "--orderly" in options:  # within a queue, in queue order
        for queue in {r.queue_id for r in got}:
            offsets = [r.queue_offset for r in got if r.queue_id == queue]
            assert offsets == sorted(offsets), offsets


def test_go_broadcasting_delivers_everything_to_each_instance(go_servers: ServerPair) -> None:
    topic = "GoBroadcast"
    go_servers.create_topics([topic])
    sdk_produce(go_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run_ = go_run(
        go_servers,
        "go-broadcast",
        [
            "consume",
            "--group",
            "CID-go-broadcast",
            "--topic",
            topic,
            "--broadcast",
            "--instances",
            "2",
            "--expect-each",
            str(COUNT),
        ],
    )
    run_.start().wait()
    assert run_.returncode == 0, run_.describe()
    for instance in (0, 1):
        mine = [Record.from_event(e) for e in run_.of("msg") if e["instance"] == instance]
        assert seqs(mine) == Counter(range(COUNT)), (instance, run_.describe())


def committed(servers: ServerPair, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """Per queue of `topic`: (the broker's max offset, the group's offset as the broker has it)."""
    with BlockingAdmin(servers.namesrv_addr) as admin:
        return {p.mq.queue_id: (p.broker_offset, p.consumer_offset) for p in admin.consumer_progress(group, topic)}


def test_go_two_instances_of_a_group_get_each_message_once(go_servers: ServerPair) -> None:
    """Clustering: once both instances own two of the four queues, each message goes to one of them."""
    topic = "GoClustering"
    go_servers.create_topics([topic])
    run_ = go_run(
        go_servers,
        "go-clustering",
        ["consume", "--group", "CID-go-clustering", "--topic", topic, "--instances", "2",
         "--send-count", str(COUNT), "--origin", "goclu", "--expect", str(COUNT), "--linger", "2"],
    )  # fmt: skip
    run_.start().wait()
    assert run_.returncode == 0, run_.describe()
    assert run_.of("balanced")[0]["owned"] == [2, 2], run_.describe()
    assert {e["status"] for e in run_.of("sent")} == {"SEND_OK"} and len(run_.of("sent")) == COUNT, run_.describe()
    got = run_.records()
    assert seqs(got) == Counter(range(COUNT)), run_.describe()
    queues = [{int(e["queue_id"]) for e in run_.of("msg") if e["instance"] == k} for k in (0, 1)]
    assert queues[0] and queues[1] and not queues[0] & queues[1], f"queues consumed per instance: {queues}"
    for record in got:
        check_intact(record, "goclu")


def test_go_push_consumer_commits_offsets_to_the_broker(go_servers: ServerPair) -> None:
    """Shutdown commits every queue's offset; a second run of the group then gets nothing again."""
    topic, group = "GoOffsets", "CID-go-offsets"
    go_servers.create_topics([topic])
    sdk_produce(go_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    first = go_run(go_servers, "go-offsets", ["consume", "--group", group, "--topic", topic, "--expect", str(COUNT)])
    first.start().wait()
    assert first.returncode == 0 and seqs(first.records()) == Counter(range(COUNT)), first.describe()
    offsets = committed(go_servers, group, topic)
    # sdk_produce's sync sends spread the messages over all four queues; each is committed to its end
    assert sum(end for end, _ in offsets.values()) == COUNT, offsets
    assert offsets == {q: (end, end) for q, (end, _) in offsets.items()} and len(offsets) == 4, offsets
    again = go_run(
        go_servers,
        "go-offsets-again",
        ["consume", "--group", group, "--topic", topic, "--expect", "0", "--linger", "4"],
    )
    again.start().wait()
    assert again.returncode == 0 and again.records() == [], again.describe()


@pytest.mark.parametrize("style", ["poll", "from"])
def test_go_pull_consumer_gets_everything_once(go_servers: ServerPair, style: str) -> None:
    """PullConsumer: Subscribe, Poll and ACK (offsets committed at Shutdown), or PullFrom each queue."""
    topic, group = f"GoPull-{style}", f"CID-go-pull-{style}"
    go_servers.create_topics([topic])
    sdk_produce(go_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run_ = go_run(
        go_servers,
        f"go-pull-{style}",
        ["pull", "--group", group, "--topic", topic, "--style", style, "--expect", str(COUNT), "--linger", "2"],
    )
    run_.start().wait()
    assert run_.returncode == 0 and not run_.of("pull_error"), run_.describe()
    got = run_.records()
    assert seqs(got) == Counter(range(COUNT)), run_.describe()
    for record in got:
        check_intact(record, "sdk")
        assert record.topic == topic, record
    if style == "poll":  # ACKed to the end of every queue, and committed by Shutdown
        offsets = committed(go_servers, group, topic)
        assert offsets == {q: (end, end) for q, (end, _) in offsets.items()} and len(offsets) == 4, offsets


#: Local transaction outcome per message: committed at once, rolled back at once, or left unknown and
#: then answered by the check-back.
OUTCOMES = ["commit", "rollback", "check-commit", "check-rollback"] * 2


def test_go_transactions_with_check_back(go_servers: ServerPair) -> None:
    topic = "GoTransactions"
    go_servers.create_topics([topic])
    args = ["transact", "--group", "PID-go-tx", "--topic", topic, "--origin", "gotx"]
    for outcome in OUTCOMES:
        args += ["--outcome", outcome]
    run_ = go_run(go_servers, "go-tx", args).start().wait()
    assert run_.returncode == 0, run_.describe()
    states = {e["seq"]: e["local_state"] for e in run_.of("sent")}
    want_states = {"commit": "COMMIT_MESSAGE", "rollback": "ROLLBACK_MESSAGE"}
    assert states == {i: want_states.get(o, "UNKNOW") for i, o in enumerate(OUTCOMES)}, run_.describe()
    checked = {int(e["seq"]) for e in run_.of("check")}
    assert checked == {i for i, o in enumerate(OUTCOMES) if o.startswith("check-")}, run_.of("check")
    committed = [i for i, o in enumerate(OUTCOMES) if o in ("commit", "check-commit")]
    got = sdk_pull_all(go_servers.namesrv_addr, "CID-go-tx-check", topic, len(committed))
    assert sorted(r.seq for r in got) == committed
    for record in got:
        check_intact(record, "gotx")


def test_go_delay_level_and_timed_delivery(go_servers: ServerPair) -> None:
    """Delay level 2 (1 s here) and WithDelayTimestamp 2 s ahead: never delivered before their time."""
    delay_topic, timed_topic = "GoDelay", "GoTimed"
    go_servers.create_topics([delay_topic, timed_topic])
    producer = go_run(
        go_servers,
        "go-delay-send",
        [
            "produce",
            "--origin",
            "godelay",
            "--count",
            "4",
            "--send",
            f"delay:{delay_topic}",
            "--send",
            f"timed:{timed_topic}",
            "--deliver-in",
            "2",
        ],
    )
    producer.start().wait()
    assert producer.returncode == 0 and not producer.of("send_error"), producer.describe()
    delayed = sdk_pull_all(go_servers.namesrv_addr, "CID-go-delay-check", delay_topic, 4, timeout=20)
    timed = sdk_pull_all(go_servers.namesrv_addr, "CID-go-timed-check", timed_topic, 4, timeout=20)
    assert seqs(delayed) == Counter(range(4)) and seqs(timed) == Counter(range(4)), (delayed, timed)
    for record in delayed:
        check_intact(record, "godelay")
        assert record.props.get("DELAY") is None and record.store_ts - record.born_ts >= 1000, record
    for record in timed:
        check_intact(record, "godelay")
        due = int(record.props["TIMER_DELIVER_MS"])
        assert record.store_ts >= due and due - record.born_ts >= 1900, record


def test_go_retries_end_in_the_dlq(go_servers: ServerPair) -> None:
    topic, group, retries, count = "GoRetry", "CID-go-retry", 2, 3
    go_servers.create_topics([topic])
    go_servers.create_topics([f"%RETRY%{group}"], queues=1)  # as for a group that consumed before
    sdk_produce(go_servers.namesrv_addr, [("sync", topic)], count, origin="sdkretry")
    run_ = go_run(
        go_servers,
        "go-retry",
        [
            "consume",
            "--group",
            group,
            "--topic",
            topic,
            "--fail-all",
            "--max-reconsume",
            str(retries),
            "--expect",
            str(count * (retries + 1)),
            "--linger",
            "2",
        ],
    )
    run_.start().wait()
    assert run_.returncode == 0, run_.describe()
    deliveries = Counter((r.seq, r.reconsume_times) for r in run_.records())
    assert deliveries == Counter((i, n) for i in range(count) for n in range(retries + 1)), run_.describe()
    dlq = [Record.from_message(m) for m in dead_letters(go_servers.namesrv_addr, f"%DLQ%{group}", "sdkretry", count)]
    assert sorted(r.seq for r in dlq) == list(range(count)), dlq
    for record in dlq:
        assert record.topic == f"%DLQ%{group}" and record.props["RETRY_TOPIC"] == topic, record


class SdkResponder:
    """Our push consumer answering every request with `echo:<body>` through our producer."""

    def __init__(self, servers: ServerPair, group: str, topic: str, expect: int) -> None:
        self.replied: list[MessageExt] = []
        self.expect = expect
        self.done = threading.Event()
        self.producer = BlockingProducer(f"PID-{group}", servers.namesrv_addr)
        self.consumer = BlockingPushConsumer(group, servers.namesrv_addr, consume_from_where=4)
        self.consumer.subscribe(topic, "*")
        self.consumer.register_listener(self._answer)

    def _answer(self, msgs: list[MessageExt]) -> ConsumeStatus:
        for msg in msgs:
            self.producer.send(create_reply_message(msg, b"echo:" + msg.uncompressed_body()))
            self.replied.append(msg)
        if len(self.replied) >= self.expect:
            self.done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    def __enter__(self) -> SdkResponder:
        self.producer.start()
        self.consumer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.shutdown()
        self.producer.shutdown()


def test_go_request_gets_replies_from_our_sdk(go_servers: ServerPair) -> None:
    topic, count = "GoRequestToSdk", 3
    go_servers.create_topics([topic])
    with SdkResponder(go_servers, "CID-sdk-responder-go", topic, count) as responder:
        requester = go_run(
            go_servers, "go-requester", ["request", "--topic", topic, "--origin", "goreq", "--count", str(count)]
        )
        requester.start().wait()
    assert requester.returncode == 0 and not requester.of("request_error"), requester.describe()
    replies = sorted(requester.of("reply"), key=lambda e: e["seq"])
    assert [e["seq"] for e in replies] == list(range(count)), requester.describe()
    for e in replies:
        want = fields("goreq", topic, e["seq"])["body"].encode()
        assert base64.b64decode(e["reply_body_b64"]) == b"echo:" + want, e
        assert e["topic"] == REPLY_TOPIC and e["props"][MSG_TYPE] == "reply", e
    for msg in responder.replied:
        check_intact(Record.from_message(msg), "goreq")
        assert msg.properties[REPLY_TO_CLIENT] and msg.properties[CORRELATION_ID], msg


def test_our_request_gets_replies_from_the_go_client(go_servers: ServerPair) -> None:
    topic, count = "SdkRequestToGo", 3
    go_servers.create_topics([topic])
    responder = go_run(
        go_servers, "go-responder", ["respond", "--group", "CID-go-responder", "--topic", topic, "--expect", str(count)]
    )
    responder.start()

    async def ask() -> list[MessageExt]:
        async with Producer("PID-sdk-requester-go", go_servers.namesrv_addr) as producer:
            return [await producer.request(sdk_message("sdkreq", topic, i), timeout=30) for i in range(count)]

    try:
        replies = run(ask())
    finally:
        responder.wait()
    assert responder.returncode == 0, responder.describe()
    assert {e["status"] for e in responder.of("replied")} == {"SEND_OK"}, responder.describe()
    for i, reply in enumerate(replies):
        assert reply.body == b"echo:" + fields("sdkreq", topic, i)["body"].encode(), reply
        assert reply.topic == REPLY_TOPIC and reply.properties[MSG_TYPE] == "reply", reply


def test_go_request_and_go_responder(go_servers: ServerPair) -> None:
    topic, count = "GoRequestToGo", 3
    go_servers.create_topics([topic])
    responder = go_run(
        go_servers,
        "go-responder-2",
        ["respond", "--group", "CID-go-responder-2", "--topic", topic, "--expect", str(count)],
    )
    requester = go_run(
        go_servers, "go-requester-2", ["request", "--topic", topic, "--origin", "goreq2", "--count", str(count)]
    )
    run_all([responder, requester])
    assert requester.returncode == 0 and len(requester.of("reply")) == count, requester.describe()
    assert responder.returncode == 0, responder.describe()
