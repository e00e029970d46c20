"""mqadmin's group, connection, broker and NameServer commands as a user runs them, against a real NameServer
+ broker pair: consumerProgress (every group, one group's rows), cloneGroupOffset, statsAll,
updateSubGroup/deleteSubGroup, consumerConnection/producerConnection/consumerStatus with live clients,
getBrokerConfig/updateBrokerConfig, brokerStatus, sendMsgStatus, clusterRT, cleanExpiredCQ/cleanUnusedTopic,
wipeWritePerm/addWritePerm, the NameServer's config and KV commands. Commands that need a request code the
servers do not answer yet are expected failures naming the code."""

from __future__ import annotations

import json
import re

import pytest

from broker.client import Admin, BlockingProducer, BlockingPushConsumer, ConsumeStatus, Message
from broker.client.message import MessageQueue
from broker.transport.loop import run
from tests.cli.conftest import Run
from tests.cli.mqadmin_checks import fails, ok, ok_or_missing, table
from tests.interop.interop_harness import BROKER_NAME, CLUSTER, ServerPair

TOPIC = "GroupTopic"
GROUP = "ProgressGroup"


@pytest.fixture(scope="module")
def committed(pair: ServerPair, mqadmin: Run) -> None:
    """GroupTopic: queue 0 holds 3 messages, queue 1 holds 2; ProgressGroup (made by updateSubGroup) has
    committed 2 on queue 0 and 0 on queue 1, so its lag is 1 + 2."""
    ok(mqadmin("updateTopic", "-b", pair.broker_addr, "-t", TOPIC, "-r", "2", "-w", "2"))
    for qid, n in ((0, 3), (1, 2)):
        for i in range(n):
            ok(mqadmin("sendMessage", "-t", TOPIC, "-p", f"q{qid}-{i}", "-b", BROKER_NAME, "-i", str(qid)))
    out = ok(mqadmin("updateSubGroup", "-b", pair.broker_addr, "-g", GROUP, "-r", "3"))
    assert f"create subscription group to {pair.broker_addr} success." in out and '"retryMaxTimes":3' in out

    async def commit() -> None:
        async with Admin(pair.namesrv_addr) as admin:
            for qid, offset in ((0, 2), (1, 0)):
                mq = MessageQueue(TOPIC, BROKER_NAME, qid)
                await admin.instance.api.update_consumer_offset(pair.broker_addr, GROUP, mq, offset)

    run(commit())


def test_consumer_progress_of_one_group(mqadmin: Run, committed: None) -> None:
    out = ok(mqadmin("consumerProgress", "-g", GROUP, "-t", TOPIC))
    head = out.splitlines()[0].split()
    assert head[:3] == ["#Topic", "#Broker", "Name"] and head[-3:] == ["#Diff", "#Inflight", "#LastTime"], out
    rows = [r[:7] for r in table(out, TOPIC)]
    assert rows == [[TOPIC, BROKER_NAME, "0", "3", "2", "1", "0"], [TOPIC, BROKER_NAME, "1", "2", "0", "2", "0"]]
    # lastTimestamp: the store time of the last consumed message; none consumed on queue 1
    assert re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", out.splitlines()[1]) and out.splitlines()[2].endswith("N/A")
    assert "Consume TPS: 0.00" in out and re.search(r"^Consume Diff Total: 3$", out, re.M), out
    assert re.search(r"^Consume Inflight Total: 0$", out, re.M)
    with_ip = ok(mqadmin("consumerProgress", "-g", GROUP, "-t", TOPIC, "-s", "true"))
    assert "#Client IP" in with_ip.splitlines()[0] and [r[5] for r in table(with_ip, TOPIC)] == ["N/A", "N/A"]


def test_consumer_progress_lists_every_group(mqadmin: Run, committed: None) -> None:
    out = ok(mqadmin("consumerProgress"))
    assert out.splitlines()[0].split() == ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff", "Total"]
    assert table(out, GROUP) == [[GROUP, "0", "OFFLINE", "0", "3"]], out
    assert "TOOLS_CONSUMER" not in out and "CID_SYS_RMQ_TRANS" not in out


def test_consumer_progress_bad_input(mqadmin: Run, committed: None) -> None:
    fails(mqadmin("consumerProgress", "-g", "NoSuchGroup"), "consumer group NoSuchGroup does not exist")
    fails(mqadmin("consumerProgress", "-g", GROUP, "-t", "NoSuchTopic"), "topic NoSuchTopic does not exist")
    fails(mqadmin("consumerProgress", "-g", GROUP, "-s", "yes"), "expected true or false", code=2)


def test_clone_group_offset_and_stats_all(mqadmin: Run, committed: None) -> None:
    out = ok(mqadmin("cloneGroupOffset", "-s", GROUP, "-d", "ClonedGroup", "-t", TOPIC))
    assert f"clone group offset success. srcGroup[{GROUP}], destGroup=[ClonedGroup], topic[{TOPIC}]" in out
    rows = [r[:5] for r in table(ok(mqadmin("consumerProgress", "-g", "ClonedGroup")), TOPIC)]
    assert rows == [[TOPIC, BROKER_NAME, "0", "3", "2"], [TOPIC, BROKER_NAME, "1", "2", "0"]]
    fails(mqadmin("cloneGroupOffset", "-s", "NoSuchGroup", "-d", "X", "-t", TOPIC), "NoSuchGroup does not exist")
    fails(mqadmin("cloneGroupOffset", "-s", GROUP, "-d", "X"), "required: -t", code=2)

    stats = ok(mqadmin("statsAll", "-t", TOPIC))
    assert stats.splitlines()[0].split()[:3] == ["#Topic", "#Consumer", "Group"]
    by_group = {r[1]: r for r in table(stats, TOPIC)}
    assert set(by_group) == {GROUP, "ClonedGroup"} and by_group[GROUP][2] == "3", stats
    assert by_group[GROUP][5] in ("5", "N/A"), stats  # 24 h put count where the broker keeps the statistic
    fails(mqadmin("statsAll", "-t", "NoSuchTopic"), "topic NoSuchTopic does not exist")


def test_delete_sub_group(pair: ServerPair, mqadmin: Run) -> None:
    ok(mqadmin("updateSubGroup", "-c", CLUSTER, "-g", "DoomedGroup"))
    out = ok_or_missing(mqadmin("deleteSubGroup", "-b", pair.broker_addr, "-g", "DoomedGroup"), 207)
    assert f"delete subscription group [DoomedGroup] from broker [{pair.broker_addr}] success." in out
    fails(mqadmin("deleteSubGroup", "-b", pair.broker_addr, "-g", "DoomedGroup"), "DoomedGroup does not exist")


def test_update_sub_group_bad_input(mqadmin: Run) -> None:
    fails(mqadmin("updateSubGroup", "-g", "G"), "give -b brokerAddr (ip:port) or -c clusterName")
    fails(mqadmin("updateSubGroup", "-b", "127.0.0.1:1", "-g", "G"), "broker 127.0.0.1:1 is not registered")
    fails(mqadmin("updateSubGroup", "-c", CLUSTER, "-g", "G", "-q", "x"), "invalid int value", code=2)


@pytest.fixture(scope="module")
def live_clients(pair: ServerPair, mqadmin: Run, committed: None):  # type: ignore[no-untyped-def]
    consumer = BlockingPushConsumer("LiveGroup", pair.namesrv_addr)
    consumer.subscribe(TOPIC, "q || r")
    consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()
    producer = BlockingProducer("LiveProducers", pair.namesrv_addr)
    producer.start()
    producer.send(Message(TOPIC, "hello"))
    try:
        yield consumer, producer
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_consumer_and_producer_connections(mqadmin: Run, live_clients) -> None:  # type: ignore[no-untyped-def]
    consumer, producer = live_clients
    out = ok_or_missing(mqadmin("consumerConnection", "-g", "LiveGroup"), 203)
    assert consumer.consumer.instance.client_id in out and "PYTHON" in out
    assert re.search(rf"^\d{{3}}\s+{TOPIC}\s+q \|\| r$", out, re.M), out
    assert "MessageModel: CLUSTERING" in out and "ConsumeType: CONSUME_PASSIVELY" in out
    fails(mqadmin("consumerConnection", "-g", GROUP), "has no consumer online")

    out = ok_or_missing(mqadmin("producerConnection", "-g", "LiveProducers", "-t", TOPIC), 204)
    assert re.search(rf"^0001\s+{re.escape(producer.producer.instance.client_id)}\s", out, re.M), out
    fails(mqadmin("producerConnection", "-g", "NobodyProduces", "-t", TOPIC), "has no producer connected")

    listed = ok(mqadmin("consumerProgress"))
    assert re.search(r"^LiveGroup\s+1\s+V5_3_3\s+PUSH\s+CLUSTERING\s", listed, re.M), listed


def test_consumer_status(mqadmin: Run, live_clients) -> None:  # type: ignore[no-untyped-def]
    consumer, _ = live_clients
    client_id = consumer.consumer.instance.client_id
    out = ok(mqadmin("consumerStatus", "-g", "LiveGroup"))
    # our SDK's consumer answers 307 itself: the queues it holds and what it subscribes
    row = re.search(rf"^001\s+{re.escape(client_id)}\s+V5_3_3\s+queues=(\d+) subscriptions=\[(.*)\]$", out, re.M)
    assert row and int(row[1]) >= 2 and TOPIC in row[2].split(", "), out
    info = json.loads(ok(mqadmin("consumerStatus", "-g", "LiveGroup", "-i", client_id)))
    props = info["properties"]
    assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
    assert props["consumerGroup"] == "LiveGroup" and int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0
    assert int(props["PROP_THREADPOOL_CORE_SIZE"]) > 0 and props["PROP_CLIENT_VERSION"] == "V5_3_3"
    assert {s["topic"]: s["subString"] for s in info["subscriptionSet"]}[TOPIC] == "q || r"
    mine = {k: v for k, v in info["mqTable"].items() if TOPIC in k}
    assert len(mine) == 2 and all(v["commitOffset"] >= 0 and v["lastPullTimestamp"] > 0 for v in mine.values())
    assert set(info["statusTable"][TOPIC]) >= {"pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedMsgs"}
    fails(mqadmin("consumerStatus", "-g", "NoSuchGroup"), "NoSuchGroup does not exist")
    fails(mqadmin("consumerStatus", "-g", "LiveGroup", "-i", "1.2.3.4@nobody"), "is not an online consumer")


def test_broker_config_and_status(pair: ServerPair, mqadmin: Run) -> None:
    out = ok(mqadmin("getBrokerConfig", "-b", pair.broker_addr))
    assert out.startswith(f"============{pair.broker_addr}============\n")
    assert re.search(rf"^brokerName\s+=  {BROKER_NAME}$", out, re.M), out
    assert f"============Master: {pair.broker_addr}============" in ok(mqadmin("getBrokerConfig", "-c", CLUSTER))
    status = ok(mqadmin("brokerStatus", "-c", CLUSTER))
    assert re.search(rf"^{re.escape(pair.broker_addr)}\s+brokerVersionDesc\s+: V5_3_3$", status, re.M), status
    fails(mqadmin("brokerStatus"), "give -b brokerAddr (ip:port) or -c clusterName")
    fails(mqadmin("getBrokerConfig", "-b", "10.9.9.9:10911"), "broker 10.9.9.9:10911 is not registered")

    out = ok_or_missing(
        mqadmin("updateBrokerConfig", "-b", pair.broker_addr, "-k", "maxMessageSize", "-v", "4000000"), 25
    )
    assert f"update broker config success, {pair.broker_addr}" in out
    assert re.search(r"^maxMessageSize\s+=  4000000$", ok(mqadmin("getBrokerConfig", "-b", pair.broker_addr)), re.M)
    fails(mqadmin("updateBrokerConfig", "-b", pair.broker_addr, "-k", "maxMessageSize"), "required: -v", code=2)


def test_broker_consume_stats(pair: ServerPair, mqadmin: Run, committed: None) -> None:
    out = ok_or_missing(mqadmin("brokerConsumeStats", "-b", pair.broker_addr), 317)
    rows = [r for r in table(out, TOPIC) if r[1] == GROUP]
    # queue, committed offset, and diff = broker offset - committed (the live producer may have added one)
    assert [(r[3], r[5], int(r[6])) for r in rows] == [("0", "2", int(r[4]) - 2) for r in rows[:1]] + [
        ("1", "0", int(r[4])) for r in rows[1:]
    ], out


def test_send_msg_status_and_cluster_rt(mqadmin: Run) -> None:
    out = ok(mqadmin("sendMsgStatus", "-b", BROKER_NAME, "-c", "3", "-s", "64"))
    lines = out.splitlines()
    assert len(lines) == 3 and all(re.match(r"^rt=\d+ms, SendResult \[sendStatus=SEND_OK, ", line) for line in lines)
    fails(mqadmin("sendMsgStatus", "-b", "no-such-broker"), "broker no-such-broker is not registered")
    out = ok(mqadmin("clusterRT", "-a", "3", "-c", CLUSTER))
    assert table(out, CLUSTER)[0][1:] == [BROKER_NAME, table(out, CLUSTER)[0][2], "3", "0"], out
    fails(mqadmin("clusterRT", "-c", "NoCluster"), "cluster NoCluster does not exist")


def test_clean_commands(pair: ServerPair, mqadmin: Run, committed: None) -> None:
    """Nothing has left this broker's CommitLog and every topic has its config, so both clean nothing: the
    topics, their queues' offsets and the group's progress are as before (what each does clean is tested
    in tests/server/test_admin_clean.py, where retention deletes CommitLog files)."""
    before = table(ok(mqadmin("consumerProgress", "-g", GROUP, "-t", TOPIC)), TOPIC)
    topics = ok(mqadmin("topicList"))
    assert ok(mqadmin("cleanExpiredCQ", "-b", pair.broker_addr)) == "success\n"
    assert ok(mqadmin("cleanExpiredCQ", "-c", CLUSTER)) == "success\n"
    assert ok(mqadmin("cleanUnusedTopic", "-c", CLUSTER)) == "success\n"
    assert ok(mqadmin("cleanUnusedTopic", "-b", pair.broker_addr)) == "success\n"
    assert table(ok(mqadmin("consumerProgress", "-g", GROUP, "-t", TOPIC)), TOPIC)[:2] == before[:2]
    assert ok(mqadmin("topicList")) == topics


def test_clean_commands_bad_input(mqadmin: Run) -> None:
    fails(mqadmin("cleanExpiredCQ"), "give -b brokerAddr (ip:port) or -c clusterName")
    fails(mqadmin("cleanUnusedTopic", "-c", "NoCluster"), "cluster NoCluster does not exist")


def test_write_perm(pair: ServerPair, mqadmin: Run) -> None:
    try:
        out = ok(mqadmin("wipeWritePerm", "-b", BROKER_NAME))
        assert f"wipe write perm of broker[{BROKER_NAME}] in name server[{pair.namesrv_addr}] OK" in out
    finally:
        out = ok(mqadmin("addWritePerm", "-b", BROKER_NAME))
    assert f"add write perm of broker[{BROKER_NAME}] in name server[{pair.namesrv_addr}] OK" in out
    fails(mqadmin("wipeWritePerm", "-b", "no-such-broker"), "broker no-such-broker is not registered")


def test_namesrv_config_and_kv(pair: ServerPair, mqadmin: Run) -> None:
    out = ok(mqadmin("getNamesrvConfig"))
    assert out.startswith(f"============{pair.namesrv_addr}============\n")
    assert re.search(r"^kvConfigPath\s+=  .*kv\.json$", out, re.M), out

    assert ok(mqadmin("updateKvConfig", "-s", "TestNs", "-k", "k1", "-v", "v1")) == (
        "create or update kv config to namespace success.\n"
    )
    assert ok(mqadmin("deleteKvConfig", "-s", "TestNs", "-k", "k1")) == "delete kv config from namespace success.\n"
    fails(mqadmin("deleteKvConfig", "-s", "TestNs", "-k", "k1"), "no KV config k1 in namespace TestNs")
    fails(mqadmin("updateKvConfig", "-s", "TestNs", "-k", "k1"), "required: -v", code=2)

    assert "update orderConf success. topic=[OrderT], orderConf=[b:4]" in ok(
        mqadmin("updateOrderConf", "-t", "OrderT", "-m", "put", "-v", "b:4")
    )
    assert "orderConf=[b:4]" in ok(mqadmin("updateOrderConf", "-t", "OrderT", "-m", "get"))
    ok(mqadmin("updateOrderConf", "-t", "OrderT", "-m", "delete"))
    fails(mqadmin("updateOrderConf", "-t", "OrderT", "-m", "get"), "topic OrderT has no order conf")
    fails(mqadmin("updateOrderConf", "-t", "OrderT", "-m", "put"), "-m put needs -v orderConf")
    fails(mqadmin("updateOrderConf", "-t", "OrderT", "-m", "list"), "invalid choice", code=2)


def test_update_namesrv_config(pair: ServerPair, mqadmin: Run) -> None:
    out = ok_or_missing(mqadmin("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"), 318)
    assert "orderMessageEnable : true" in out
    assert re.search(r"^orderMessageEnable\s+=  true$", ok(mqadmin("getNamesrvConfig")), re.M)


def test_no_name_server_or_nothing_there(mqadmin: Run) -> None:
    fails(mqadmin("topicStatus", "-n", "127.0.0.1:1", "-t", "T"), "mqadmin topicStatus:")
