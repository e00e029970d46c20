"""Apache RocketMQ's Java client (5.3.3, unchanged) against our broker: the rest of its feature list.

Producer sync / async / oneway / batch / ordered (read back by our SDK), DefaultLitePullConsumer,
TransactionMQProducer with check-backs, delay levels, retries into %DLQ% after maxReconsumeTimes,
DefaultMQAdminExt's query by key and by id, and a round trip with binary (ROCKETMQ) headers. The
broker maps every delay level to 1 s (interop_harness.ServerPair) and checks transactions every
second (java_harness.JAVA_BROKER_CONF), so no test waits for production timings.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from broker.client import BlockingAdmin, MessageExt
from tests.interop.interop_harness import Record, ServerPair, fields, home_for, sdk_produce, sdk_pull_all
from tests.interop.java_harness import JavaProc, check_intact, ensure_java, java, java_server_pair

pytestmark = pytest.mark.peers

COUNT = 10
SEND_MODES = ("sync", "async", "oneway", "batch", "ordered")
#: A topic the test does not create: the first send creates it.
AUTO_CREATED = "JavaSendAutoCreated"


@pytest.fixture(scope="module")
def java_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    yield from java_server_pair(tmp_path_factory.mktemp("java-features"))


def run_java(servers: ServerPair, name: str, args: list[str], props: dict[str, str] | None = None) -> JavaProc:
    """One JVM run to its end (its own timeout is 60 s); HOME is named after the case."""
    proc = java([*args, "--namesrv", servers.namesrv_addr, "--timeout", "60"], home_for(servers.root, name), 80, props)
    proc.start().wait()
    return proc


def seqs(records: list[Record]) -> Counter[int]:
    return Counter(r.seq for r in records)


@pytest.fixture(scope="module")
def sends(java_servers: ServerPair) -> JavaProc:
    """One producer JVM sends COUNT messages with each API, each to its own topic."""
    topics = [f"JavaSend-{mode}" for mode in SEND_MODES]
    java_servers.create_topics(topics)
    args = ["produce", "--origin", "javasend", "--count", str(COUNT)]
    for mode, topic in zip(SEND_MODES, topics, strict=True):
        args += ["--send", f"{mode}:{topic}"]
    args += ["--send", f"sync:{AUTO_CREATED}"]
    return run_java(java_servers, "java-send", args)


@pytest.mark.parametrize("mode", SEND_MODES)
def test_java_producer_send_is_stored_intact(java_servers: ServerPair, sends: JavaProc, mode: str) -> None:
    topic = f"JavaSend-{mode}"
    assert sends.returncode == 0 and not sends.of("send_error"), sends.describe()
    results = [e for e in sends.of("sent") if e["topic"] == topic]
    if mode == "batch":
        assert len(results) == 1 and results[0]["n"] == COUNT and results[0]["status"] == "SEND_OK", results
        assert len(results[0]["msg_id"].split(",")) == COUNT, results
    elif mode == "oneway":
        assert sorted(e["seq"] for e in results) == list(range(COUNT))
    else:
        assert sorted(e["seq"] for e in results) == list(range(COUNT)), results
        assert {e["status"] for e in results} == {"SEND_OK"}, results
    stored = sdk_pull_all(java_servers.namesrv_addr, f"CID-java-send-check-{mode}", topic, COUNT)
    assert seqs(stored) == Counter(range(COUNT)), [r.seq for r in stored]
    for record in stored:
        check_intact(record, "javasend")
    if mode in ("sync", "async", "ordered"):
        # The id a send returned is the message's UNIQ_KEY; its queue and offset are where it is.
        sent = {e["seq"]: e for e in results}
        for record in stored:
            assert sent[record.seq]["msg_id"] == record.props["UNIQ_KEY"], (sent[record.seq], record)
            assert (sent[record.seq]["queue_id"], sent[record.seq]["queue_offset"]) == (
                record.queue_id,
                record.queue_offset,
            )
    if mode == "ordered":
        # The selector put each shard on one queue, in send order.
        for shard in {r.props["shard"] for r in stored}:
            mine = sorted((r for r in stored if r.props["shard"] == shard), key=lambda r: r.queue_offset)
            assert len({r.queue_id for r in mine}) == 1, mine
            assert [r.seq for r in mine] == sorted(r.seq for r in mine), mine


def test_java_send_to_a_topic_nobody_created(java_servers: ServerPair, sends: JavaProc) -> None:
    """The producer falls back to TBW102's route; the broker creates the topic on the first send."""
    assert [e["seq"] for e in sends.of("sent") if e["topic"] == AUTO_CREATED] == list(range(COUNT)), sends.describe()
    stored = sdk_pull_all(java_servers.namesrv_addr, "CID-java-send-check-auto", AUTO_CREATED, COUNT)
    assert seqs(stored) == Counter(range(COUNT)), [r.seq for r in stored]
    for record in stored:
        check_intact(record, "javasend")


def test_java_lite_pull_consumer_gets_everything_once(java_servers: ServerPair) -> None:
    topic = "JavaLitePull"
    java_servers.create_topics([topic])
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run = run_java(java_servers, "java-litepull",
                   ["litepull", "--group", "CID-java-litepull", "--topic", topic, "--expect", str(COUNT)])  # fmt: skip
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert seqs(got) == Counter(range(COUNT)), run.describe()
    for record in got:
        check_intact(record, "sdk")


#: Local transaction outcome per message: committed at once, rolled back at once, or left UNKNOW
#: and then answered by the check-back.
OUTCOMES = ["commit", "rollback", "check-commit", "check-rollback"] * 2


def test_java_transactions_with_check_back(java_servers: ServerPair) -> None:
    topic = "JavaTransactions"
    java_servers.create_topics([topic])
    args = ["transact", "--group", "PID-java-tx", "--topic", topic, "--origin", "javatx"]
    for outcome in OUTCOMES:
        args += ["--outcome", outcome]
    run = run_java(java_servers, "java-tx", args)
    assert run.returncode == 0, run.describe()
    states = {e["seq"]: e["local_state"] for e in run.of("sent")}
    want_states = {"commit": "COMMIT_MESSAGE", "rollback": "ROLLBACK_MESSAGE"}
    assert states == {i: want_states.get(o, "UNKNOW") for i, o in enumerate(OUTCOMES)}, run.describe()
    # The broker asked back about exactly the messages left UNKNOW.
    checked = {int(e["seq"]) for e in run.of("check")}
    assert checked == {i for i, o in enumerate(OUTCOMES) if o.startswith("check-")}, run.of("check")
    committed = [i for i, o in enumerate(OUTCOMES) if o in ("commit", "check-commit")]
    got = sdk_pull_all(java_servers.namesrv_addr, "CID-java-tx-check", topic, len(committed))
    assert sorted(r.seq for r in got) == committed
    for record in got:
        check_intact(record, "javatx")
        assert record.props["outcome"] == OUTCOMES[record.seq], record


def test_java_delay_level_delivers_later(java_servers: ServerPair) -> None:
    """Delay level 2 (1 s on this broker): consumed intact, and not before a second has passed."""
    topic = "JavaDelay"
    java_servers.create_topics([topic])
    run = run_java(java_servers, "java-delay",
                   ["consume", "--group", "CID-java-delay", "--topic", topic, "--send-count", "4",
                    "--send-mode", "delay", "--origin", "javadelay", "--expect", "4"])  # fmt: skip
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert seqs(got) == Counter(range(4)), run.describe()
    for event, record in zip(run.of("msg"), got, strict=True):
        check_intact(record, "javadelay")
        assert record.topic == topic and record.props.get("DELAY") is None, record
        assert event["receive_ts"] - record.born_ts >= 1000, event


def test_java_retries_end_in_the_dlq(java_servers: ServerPair) -> None:
    """Every delivery fails: 1 + maxReconsumeTimes deliveries each, then the message is in %DLQ%group."""
    topic, group, retries, count = "JavaRetry", "CID-java-retry", 2, 3
    java_servers.create_topics([topic])
    # The group's retry topic exists already, as for any group that has consumed before. For a new
    # group the client learns the route of %RETRY%<group> (created by its first heartbeat) inside a
    # rebalance pass that has already skipped that topic, so it pulls retries only from its next
    # periodic rebalance, 20 s later: client-side ordering, the same against any broker.
    java_servers.create_topics([f"%RETRY%{group}"], queues=1)
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], count, origin="sdk")
    run = run_java(java_servers, "java-retry",
                   ["consume", "--group", group, "--topic", topic, "--fail-all", "--max-reconsume", str(retries),
                    "--expect", str(count * (retries + 1)), "--linger", "2"])  # fmt: skip
    assert run.returncode == 0, run.describe()
    deliveries = Counter((r.seq, r.reconsume_times) for r in run.records())
    assert deliveries == Counter((i, n) for i in range(count) for n in range(retries + 1)), run.describe()
    # %DLQ% topics are write-only (perm 2) as in RocketMQ, so look the dead letters up by key.
    dlq = [Record.from_message(m) for m in dead_letters(java_servers.namesrv_addr, f"%DLQ%{group}", "sdk", count)]
    assert sorted(r.seq for r in dlq) == list(range(count)), dlq
    for record in dlq:
        assert record.topic == f"%DLQ%{group}" and record.reconsume_times == retries + 1, record
        assert record.props["RETRY_TOPIC"] == topic and record.props["origin"] == "sdk", record
        assert record.body == fields("sdk", topic, record.seq)["body"].encode(), record


def dead_letters(namesrv: str, dlq: str, origin: str, count: int, timeout: float = 15.0) -> list[MessageExt]:
    """Message i of `origin` found in `dlq` by its key, for every i, or what was found by `timeout`."""
    found: dict[int, MessageExt] = {}
    deadline = time.monotonic() + timeout
    with BlockingAdmin(namesrv) as admin:
        while len(found) < count and time.monotonic() < deadline:
            for i in set(range(count)) - set(found):
                with contextlib.suppress(Exception):  # the DLQ topic or its index entry may not be there yet
                    for msg in admin.query_message_by_key(dlq, f"key-{origin}-{i}"):
                        found[i] = msg
            time.sleep(0.2)
    return list(found.values())


def test_java_admin_queries_by_key_and_by_id(java_servers: ServerPair) -> None:
    topic, count = "JavaQuery", 3
    java_servers.create_topics([topic])
    run = run_java(java_servers, "java-query", ["query", "--topic", topic, "--origin", "javaq", "--count", str(count)])
    assert run.returncode == 0, run.describe()
    sent = {e["seq"]: e for e in run.of("sent")}
    for event in ("by_key", "by_offset_id", "by_uniq_id"):
        found = run.of(event)
        assert sorted(e["seq"] for e in found) == list(range(count)), f"{event}: {run.describe()}"
        for e in found:
            record = Record.from_event(e)
            assert record.seq == e["seq"], e
            check_intact(record, "javaq")
            assert record.props["UNIQ_KEY"] == sent[e["seq"]]["msg_id"], e
            assert (record.queue_id, record.queue_offset) == (
                sent[e["seq"]]["queue_id"],
                sent[e["seq"]]["queue_offset"],
            )


def test_java_binary_headers_round_trip(java_servers: ServerPair) -> None:
    """-Drocketmq.serialize.type=ROCKETMQ: every request header in RocketMQ's binary layout."""
    topic = "JavaBinaryHeaders"
    java_servers.create_topics([topic])
    run = run_java(java_servers, "java-binary",
                   ["consume", "--group", "CID-java-binary", "--topic", topic, "--send-count", str(COUNT),
                    "--origin", "javabin", "--expect", str(COUNT)],
                   props={"rocketmq.serialize.type": "ROCKETMQ"})  # fmt: skip
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert seqs(got) == Counter(range(COUNT)), run.describe()
    for record in got:
        check_intact(record, "javabin")
