"""Apache RocketMQ's own mqadmin (rocketmq-tools 5.3.3, `MQAdminStartup`, unchanged) against our
NameServer and broker: the inspection and maintenance commands, each checked by the table it prints.
A Java push consumer (group CID-jadm) and our SDK's producer (PID-jadm) stay online for the module;
our producer sends COUNT messages first and the Java consumer consumes them all, so every offset,
count and lag below is known.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from broker.client import BlockingAdmin, BlockingProducer, BlockingPushConsumer, ConsumeStatus
from broker.config.properties import load_properties
from tests.interop.interop_harness import BROKER_NAME, CLUSTER, ServerPair, home_for, sdk_message
from tests.interop.java_harness import JavaProc, ensure_java, java, java_mqadmin, java_server_pair

pytestmark = pytest.mark.peers

TOPIC = "JAdmTopic"
GROUP = "CID-jadm"
PRODUCER_GROUP = "PID-jadm"
COUNT = 10


@dataclass
class Online:
    servers: ServerPair
    consumer: JavaProc
    producer: BlockingProducer
    uniq_id: str
    offset_id: str


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Online]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ tools cannot be installed here: {problem}")
    for servers in java_server_pair(tmp_path_factory.mktemp("java-mqadmin")):
        servers.create_topics([TOPIC])
        producer = BlockingProducer(PRODUCER_GROUP, servers.namesrv_addr)
        producer.start()
        results = [producer.send(sdk_message("sdk", TOPIC, i)) for i in range(COUNT)]
        # --expect more than is sent: the consumer stays online until the module ends (or its timeout).
        consumer = java(
            ["consume", "--namesrv", servers.namesrv_addr, "--group", GROUP, "--topic", TOPIC,
             "--expect", str(COUNT * 100), "--timeout", "240"],
            home_for(servers.root, "jadm-consumer"), timeout=260,
        ).start()  # fmt: skip
        try:
            _wait_consumed(servers.namesrv_addr)
            yield Online(servers, consumer, producer, results[0].msg_id, results[0].offset_msg_id)
        finally:
            producer.shutdown()
            if consumer.proc is not None and consumer.proc.poll() is None:
                consumer.proc.terminate()
                consumer.proc.wait(10)


def _wait_consumed(namesrv: str, timeout: float = 60.0) -> None:
    """Until the Java consumer committed every offset (its client persists them every 5 s)."""
    deadline = time.monotonic() + timeout
    with BlockingAdmin(namesrv) as admin:
        while time.monotonic() < deadline:
            try:
                progress = admin.consumer_progress(GROUP, TOPIC)
            except Exception:
                progress = []
            if progress and sum(p.lag for p in progress) == 0 and sum(p.broker_offset for p in progress) == COUNT:
                return
            time.sleep(1.0)
    raise AssertionError(f"the Java consumer did not commit {COUNT} offsets within {timeout:.0f} s")


def mqadmin(online: Online, *args: str) -> str:
    """The Java mqadmin's output; it exits 0 even when a command failed (`ok()` fails on a printed exception)."""
    return java_mqadmin(online.servers.namesrv_addr, home_for(online.servers.root, "mqadmin"), *args)


def ok(online: Online, *args: str) -> str:
    out = mqadmin(online, *args)
    assert "SubCommandException" not in out and "Caused by:" not in out, f"mqadmin {' '.join(args)}:\n{out}"
    return out


def rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


def test_topic_status(online: Online) -> None:
    out = ok(online, "topicStatus", "-t", TOPIC)
    table = rows(out, BROKER_NAME)
    assert [r[1] for r in table] == ["0", "1", "2", "3"], out
    assert sum(int(r[3]) for r in table) == COUNT and all(r[2] == "0" for r in table), out
    assert "Topic Put TPS:" in out


def test_consumer_progress_of_a_group(online: Online) -> None:
    out = ok(online, "consumerProgress", "-g", GROUP)
    table = rows(out, TOPIC)
    assert len(table) == 4, out
    assert sum(int(r[3]) for r in table) == COUNT, out  # broker offsets
    assert [r[3] for r in table] == [r[4] for r in table], out  # consumer offsets caught up
    assert "Consume Diff Total: 0" in out


def test_consumer_progress_lists_the_group_online(online: Online) -> None:
    out = ok(online, "consumerProgress")
    row = next(r for r in rows(out, GROUP))
    assert row[1:5] == ["1", "V5_3_3", "PUSH", "CLUSTERING"], out


def test_consumer_connection(online: Online) -> None:
    out = ok(online, "consumerConnection", "-g", GROUP)
    conns = [line.split() for line in out.splitlines() if "@" in line and "JAVA" in line]
    assert len(conns) == 1 and conns[0][3] == "V5_3_3", out
    assert re.search(rf"^{TOPIC}\s+\*$", out, re.M), out
    assert "ConsumeType: CONSUME_PASSIVELY" in out and "MessageModel: CLUSTERING" in out


def test_consumer_status_asks_the_java_consumer(online: Online) -> None:
    conns = ok(online, "consumerConnection", "-g", GROUP)
    client_id = next(line.split()[0] for line in conns.splitlines() if "JAVA" in line)
    out = ok(online, "consumerStatus", "-g", GROUP)
    assert re.search(rf"^1\s+{re.escape(client_id)}\s+V5_3_3", out, re.M), out
    assert "Rebalance OK" in out
    detail = ok(online, "consumerStatus", "-g", GROUP, "-i", client_id)
    assert "#Consumer Subscription#" in detail and f"Topic: {TOPIC}" in detail
    assert "PROP_CONSUME_TYPE                       : CONSUME_PASSIVELY" in detail


def test_consumer_status_asks_our_sdk_consumer(online: Online) -> None:
    """The Java mqadmin's consumerStatus against a group our SDK consumes: the broker relays 307 to our
    consumer, whose ConsumerRunningInfo the Java tool decodes, analyses and prints."""
    consumer = BlockingPushConsumer("CID-jadm-sdk", online.servers.namesrv_addr)
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()
    try:
        client_id = consumer.consumer.instance.client_id
        deadline = time.monotonic() + 30
        while len([mq for mq in consumer.consumer.assignment() if mq.topic == TOPIC]) < 4:
            assert time.monotonic() < deadline, "our consumer never took the topic's 4 queues"
            time.sleep(0.2)
        out = ok(online, "consumerStatus", "-g", "CID-jadm-sdk")
        assert re.search(rf"^1\s+{re.escape(client_id)}\s+V5_3_3\s", out, re.M), out
        assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out, out
        detail = ok(online, "consumerStatus", "-g", "CID-jadm-sdk", "-i", client_id)
        assert re.search(r"^PROP_CONSUME_TYPE\s+: CONSUME_PASSIVELY$", detail, re.M), detail
        assert re.search(r"^PROP_CONSUMEORDERLY\s+: false$", detail, re.M), detail
        assert re.search(r"^consumerGroup\s+: CID-jadm-sdk$", detail, re.M), detail
        assert re.search(rf"^\d{{3}} Topic: {TOPIC}\s+ClassFilter: false\s+SubExpression: \*$", detail, re.M), detail
        # #Consumer Offset#: one row per queue our consumer holds, with the offset it keeps
        offsets = [r for r in rows(detail, TOPIC) if len(r) == 4 and r[1] == BROKER_NAME]
        assert sorted(r[2] for r in offsets) == ["0", "1", "2", "3"] and all(int(r[3]) >= 0 for r in offsets), detail
        assert "#Consumer RT&TPS#" in detail and re.search(rf"^{TOPIC}\s+\d+\.\d\d ", detail, re.M), detail
        missing = mqadmin(online, "consumerStatus", "-g", "CID-jadm-sdk", "-i", "10.0.0.1@nobody")
        assert "not online" in missing, missing
    finally:
        consumer.shutdown()


def test_producer_connection(online: Online) -> None:
    out = ok(online, "producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC)
    assert re.search(r"^0001\s+\S+@\S+\s+127\.0\.0\.1:\d+\s+PYTHON\s+", out, re.M), out


def test_broker_consume_stats(online: Online) -> None:
    out = ok(online, "brokerConsumeStats", "-b", online.servers.broker_addr)
    table = [r for r in rows(out, TOPIC) if r[1] == GROUP]
    assert len(table) == 4 and sum(int(r[4]) for r in table) == COUNT, out
    assert "Diff Total: 0" in out


def test_clone_group_offset(online: Online) -> None:
    out = ok(online, "cloneGroupOffset", "-s", GROUP, "-d", "CID-jadm-copy", "-t", TOPIC)
    assert "clone group offset success" in out
    with BlockingAdmin(online.servers.namesrv_addr) as admin:
        copied = admin.consumer_progress("CID-jadm-copy", TOPIC)
    assert sum(p.consumer_offset for p in copied) == COUNT


def test_query_messages_print_who_consumed_them(online: Online) -> None:
    for args in (
        ("queryMsgById", "-t", TOPIC, "-i", online.offset_id),
        ("queryMsgByUniqueKey", "-t", TOPIC, "-i", online.uniq_id),
    ):
        out = ok(online, *args)
        assert online.uniq_id in out, out
        assert f"MessageTrack [consumerGroup={GROUP}, trackType=CONSUMED" in out, out
    queue = online.producer.send(sdk_message("sdk", TOPIC, 0)).message_queue.queue_id
    out = ok(online, "queryMsgByOffset", "-t", TOPIC, "-b", BROKER_NAME, "-i", str(queue), "-o", "0")
    assert f"MessageTrack [consumerGroup={GROUP}" in out, out


def test_stats_all(online: Online) -> None:
    out = ok(online, "statsAll", "-t", TOPIC)
    row = next(r for r in rows(out, TOPIC) if r[1] == GROUP)
    assert int(row[-2]) >= COUNT, out  # #InMsg24Hour
    assert int(row[-1]) >= COUNT, out  # #OutMsg24Hour: what the Java consumer pulled (GROUP_GET_NUMS)


def test_update_broker_config_live_and_persisted(online: Online) -> None:
    broker = online.servers.broker_addr
    out = ok(online, "updateBrokerConfig", "-b", broker, "-k", "defaultTopicQueueNums", "-v", "6")
    assert f"update broker config success, {broker}" in out
    assert re.search(r"^defaultTopicQueueNums\s+=\s+6$", ok(online, "getBrokerConfig", "-b", broker), re.M)
    assert load_properties(online.servers.root / "broker.conf")["defaultTopicQueueNums"] == "6"
    refused = mqadmin(online, "updateBrokerConfig", "-b", broker, "-k", "noSuchKey", "-v", "1")
    assert "CODE: 29" in refused and "noSuchKey" in refused


def test_update_namesrv_config_live_and_persisted(online: Online) -> None:
    out = ok(online, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert "update name server config success" in out
    assert re.search(r"^orderMessageEnable\s+=\s+true$", ok(online, "getNamesrvConfig"), re.M)
    assert load_properties(online.servers.root / "namesrv.properties")["orderMessageEnable"] == "true"


def test_delete_sub_group(online: Online) -> None:
    ok(online, "updateSubGroup", "-c", CLUSTER, "-g", "CID-jadm-gone")
    out = ok(online, "deleteSubGroup", "-c", CLUSTER, "-g", "CID-jadm-gone")
    assert f"delete subscription group [CID-jadm-gone] from broker [{online.servers.broker_addr}]" in out
    again = mqadmin(online, "deleteSubGroup", "-b", online.servers.broker_addr, "-g", "CID-jadm-gone")
    assert "CODE: 26" in again, again


def test_clean_expired_cq_and_unused_topic(online: Online) -> None:
    """306 and 316 from the Java tools: nothing has left the CommitLog and every topic has its config, so
    both succeed and the topic's messages stay readable (what they clean: tests/server/test_admin_clean.py)."""
    for command in ("cleanExpiredCQ", "cleanUnusedTopic"):
        assert ok(online, command, "-b", online.servers.broker_addr).rstrip().endswith("success")
        assert ok(online, command, "-c", CLUSTER).rstrip().endswith("success")
    table = rows(ok(online, "topicStatus", "-t", TOPIC), BROKER_NAME)
    assert sum(int(r[3]) for r in table) >= COUNT, table
