"""mqadmin's topic and message commands as a user runs them, against a real NameServer + broker pair:
consumeMessage with RocketMQ's flags, printMsg, printMsgByQueue, queryMsgByOffset, topicStatus,
topicClusterList, updateTopicPerm, deleteTopic, allocateMQ; values checked exactly, bad input refused."""

from __future__ import annotations

import json
import time

import pytest

from tests.cli.conftest import Run
from tests.cli.mqadmin_checks import fails, ok, table
from tests.interop.interop_harness import BROKER_NAME, CLUSTER, ServerPair

TOPIC = "MsgTopic"


@pytest.fixture(scope="module")
def sent(pair: ServerPair, mqadmin: Run) -> dict[str, int]:
    """Two queues: queue 0 gets a0 a1 a2 (TagA, TagB, TagA), queue 1 gets b0 b1 (TagB); `cut` is a store time
    between a1 and a2."""
    ok(mqadmin("updateTopic", "-b", pair.broker_addr, "-t", TOPIC, "-r", "2", "-w", "2"))
    for i, tag in enumerate(("TagA", "TagB")):
        ok(mqadmin("sendMessage", "-t", TOPIC, "-p", f"a{i}", "-c", tag, "-k", f"ka{i}", "-b", BROKER_NAME, "-i", "0"))
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    ok(mqadmin("sendMessage", "-t", TOPIC, "-p", "a2", "-c", "TagA", "-b", BROKER_NAME, "-i", "0"))
    for i in range(2):
        ok(mqadmin("sendMessage", "-t", TOPIC, "-p", f"b{i}", "-c", "TagB", "-b", BROKER_NAME, "-i", "1"))
    return {"cut": cut}


def bodies(out: str) -> list[str]:
    return [line.split(None, 2)[2] for line in out.splitlines() if line.startswith("Message Body:")]


def test_consume_message_by_queue_offset_and_time(mqadmin: Run, sent: dict[str, int]) -> None:
    out = ok(mqadmin("consumeMessage", "-t", TOPIC, "-b", BROKER_NAME, "-i", "0", "-o", "1"))
    assert bodies(out) == ["a1", "a2"] and "Consumed 2 message(s) from MsgTopic" in out
    out = ok(mqadmin("consumeMessage", "-t", TOPIC, "-b", BROKER_NAME, "-i", "1"))
    assert bodies(out) == ["b0", "b1"]
    out = ok(mqadmin("consumeMessage", "-t", TOPIC, "-c", "4"))
    assert bodies(out) == ["a0", "a1", "a2", "b0"]
    # -s/-e are store times: a2 and everything of queue 1 were stored after the cut
    out = ok(mqadmin("consumeMessage", "-t", TOPIC, "-s", str(sent["cut"])))
    assert bodies(out) == ["a2", "b0", "b1"]
    out = ok(mqadmin("consumeMessage", "-t", TOPIC, "-b", BROKER_NAME, "-i", "0", "-e", str(sent["cut"])))
    assert bodies(out) == ["a0", "a1"]
    when = time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(sent["cut"] / 1000)) + f":{sent['cut'] % 1000:03d}"
    assert bodies(ok(mqadmin("consumeMessage", "-t", TOPIC, "-s", when))) == ["a2", "b0", "b1"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("-s", "TagA"), "-s beginTimestamp 'TagA' is not milliseconds"),  # the old tag-filter usage
        (("-s", "2999-01-01#00:00:00:000"), "is in the future"),
        (("-s", "2000", "-e", "1000"), "-s beginTimestamp 2000 is after -e endTimestamp 1000"),
        (("-e", "yesterday"), "-e endTimestamp 'yesterday' is not"),
        (("-i", "0"), "-i queueId needs -b brokerName"),
        (("-b", BROKER_NAME, "-o", "1"), "-o offset needs -i queueId"),
        (("-b", "no-such-broker"), "broker no-such-broker is not registered"),
        (("-b", BROKER_NAME, "-i", "7"), "has no queue 7 on broker"),
        (("-b", BROKER_NAME, "-i", "0", "-o", "99"), "has no message at offset 99"),
        (("-s", "0", "-e", "1"), "no message of topic MsgTopic"),  # nothing stored in 1970: an error, not "0 messages"
    ],
)
def test_consume_message_bad_input(mqadmin: Run, sent: dict[str, int], args: tuple[str, ...], says: str) -> None:
    fails(mqadmin("consumeMessage", "-t", TOPIC, *args), says)


def test_consume_message_unknown_topic_and_missing_flag(mqadmin: Run) -> None:
    fails(mqadmin("consumeMessage", "-t", "NoSuchTopic"), "topic NoSuchTopic does not exist")
    fails(mqadmin("consumeMessage"), "the following arguments are required: -t", code=2)
    fails(mqadmin("consumeMessage", "-t", TOPIC, "-c", "0"), "expected a positive number", code=2)


def test_print_msg_and_print_msg_by_queue(mqadmin: Run, sent: dict[str, int]) -> None:
    out = ok(mqadmin("printMsg", "-t", TOPIC, "-s", "TagB", "-d", "false"))
    assert f"minOffset=0, maxOffset=3, MessageQueue [topic={TOPIC}, brokerName={BROKER_NAME}, queueId=0]" in out
    assert f"minOffset=0, maxOffset=2, MessageQueue [topic={TOPIC}, brokerName={BROKER_NAME}, queueId=1]" in out
    lines = [line for line in out.splitlines() if line.startswith("MSGID:")]
    assert len(lines) == 3 and all("tags=TagB" in line and line.endswith("BODY: NOT PRINT BODY") for line in lines)
    out = ok(mqadmin("printMsg", "-t", TOPIC, "-b", str(sent["cut"])))
    assert [line.rsplit("BODY: ", 1)[1] for line in out.splitlines() if line.startswith("MSGID:")] == ["a2", "b0", "b1"]

    out = ok(mqadmin("printMsgByQueue", "-t", TOPIC, "-a", BROKER_NAME, "-i", "0", "-f", "true"))
    assert table(out, "Tag:") == [["Tag:", "TagA", "Count:", "2"], ["Tag:", "TagB", "Count:", "1"]]
    out = ok(mqadmin("printMsgByQueue", "-t", TOPIC, "-a", BROKER_NAME, "-i", "0", "-p", "true", "-d", "true"))
    assert [line.rsplit("BODY: ", 1)[1] for line in out.splitlines()] == ["a0", "a1", "a2"]
    fails(mqadmin("printMsgByQueue", "-t", TOPIC, "-a", BROKER_NAME), "required: -i", code=2)
    fails(mqadmin("printMsg", "-t", TOPIC, "-b", "noon"), "-b beginTimestamp 'noon' is not")


def test_query_msg_by_offset(pair: ServerPair, mqadmin: Run, sent: dict[str, int]) -> None:
    out = ok(mqadmin("queryMsgByOffset", "-t", TOPIC, "-b", BROKER_NAME, "-i", "0", "-o", "1"))
    assert bodies(out) == ["a1"] and "Tags:               [TagB]" in out and "Queue Offset:       1" in out
    fails(mqadmin("queryMsgByOffset", "-t", TOPIC, "-b", BROKER_NAME, "-i", "0", "-o", "3"), "holds offsets 0 to 2")
    fails(mqadmin("queryMsgByOffset", "-t", TOPIC, "-b", pair.broker_addr, "-i", "0", "-o", "0"), "is a broker address")
    fails(mqadmin("queryMsgByOffset", "-t", TOPIC, "-b", BROKER_NAME, "-i", "0"), "required: -o", code=2)


def test_topic_status_and_cluster_list(mqadmin: Run, sent: dict[str, int]) -> None:
    out = ok(mqadmin("topicStatus", "-t", TOPIC))
    rows = [r[:4] for r in table(out, BROKER_NAME)]
    assert rows == [[BROKER_NAME, "0", "0", "3"], [BROKER_NAME, "1", "0", "2"]], out
    assert ok(mqadmin("topicClusterList", "-t", TOPIC)).split() == [CLUSTER]
    fails(mqadmin("topicStatus", "-t", "NoSuchTopic"), "topic NoSuchTopic does not exist")


def test_allocate_mq(mqadmin: Run, sent: dict[str, int]) -> None:
    result = json.loads(ok(mqadmin("allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2")))["result"]
    assert {ip: [q["queueId"] for q in qs] for ip, qs in result.items()} == {"10.0.0.1": [0], "10.0.0.2": [1]}


def test_update_topic_perm_and_delete_topic(pair: ServerPair, mqadmin: Run) -> None:
    ok(mqadmin("updateTopic", "-c", CLUSTER, "-t", "PermTopic", "-r", "2", "-w", "2"))
    out = ok(mqadmin("updateTopicPerm", "-t", "PermTopic", "-c", CLUSTER, "-p", "4"))
    assert f"update topic perm from 6 to 4 in {pair.broker_addr} success." in out
    route = ok(mqadmin("topicRoute", "-t", "PermTopic"))
    assert [BROKER_NAME, "2", "2", "4"] in table(route, BROKER_NAME)
    fails(mqadmin("updateTopicPerm", "-t", "PermTopic", "-c", CLUSTER, "-p", "5"), "invalid choice", code=2)
    fails(mqadmin("updateTopicPerm", "-t", "PermTopic", "-p", "6"), "give -b brokerAddr (ip:port) or -c clusterName")
    fails(mqadmin("updateTopicPerm", "-t", "PermTopic", "-b", BROKER_NAME, "-p", "6"), "is a broker name")

    out = ok(mqadmin("deleteTopic", "-t", "PermTopic", "-c", CLUSTER))
    assert f"delete topic [PermTopic] from cluster [{CLUSTER}] success." in out
    assert "PermTopic" not in ok(mqadmin("topicList")).split()
    fails(mqadmin("deleteTopic", "-t", "PermTopic", "-c", CLUSTER), "topic PermTopic does not exist")
    fails(mqadmin("deleteTopic", "-t", TOPIC, "-c", "NoCluster"), "cluster NoCluster does not exist")
