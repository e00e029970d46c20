"""Route bodies in both key dialects, and the queue views derived from them."""

from __future__ import annotations

import orjson
import pytest

from broker.client.message import MessageQueue
from broker.client.route import TopicPublishInfo, parse_route, subscribe_queues

UNQUOTED = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b","cluster":"C"},'
    b'{"brokerAddrs":{1:"10.0.0.4:10911"},"brokerName":"c","cluster":"C"},'
    b'{"brokerAddrs":{0:"10.0.0.3:10911"},"brokerName":"a","cluster":"C"}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2},'
    b'{"brokerName":"c","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2},'
    b'{"brokerName":"a","perm":4,"readQueueNums":3,"topicSynFlag":0,"writeQueueNums":3}]}'
)
QUOTED = UNQUOTED.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":').replace(b"{1:", b'{"1":')


@pytest.mark.parametrize("body", [UNQUOTED, QUOTED], ids=["fastjson", "standard"])
def test_parse_route_accepts_both_key_forms(body: bytes) -> None:
    route = parse_route(body)
    assert [b.broker_name for b in route.broker_datas] == ["a", "b", "c"]
    assert route.master_addr("b") == "10.0.0.1:10911"
    assert route.broker_addr("b", 1) == "10.0.0.2:10911"
    assert route.master_addr("c") is None
    assert route.broker_addr("c") == "10.0.0.4:10911"  # a slave serves reads when no master is known
    assert route.master_addrs() == {"10.0.0.1:10911", "10.0.0.3:10911"}


def test_addresses_with_commas_and_colons_in_strings_are_untouched() -> None:
    body = orjson.dumps(
        {"brokerDatas": [{"brokerName": "x,1:y", "cluster": "C", "brokerAddrs": {"0": "h:1"}}], "queueDatas": []}
    ).replace(b'"0"', b"0")
    route = parse_route(body)
    assert route.broker_datas[0].broker_name == "x,1:y"
    assert route.master_addr("x,1:y") == "h:1"


def test_publish_info_takes_writable_queues_on_masters_only() -> None:
    info = TopicPublishInfo.from_route("T", parse_route(UNQUOTED))
    # a: read-only perm; c: no master -> only b's two queues.
    assert info.queues == [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]


def test_subscribe_queues_are_the_readable_ones_sorted() -> None:
    mqs = subscribe_queues("T", parse_route(UNQUOTED))
    assert mqs == sorted(mqs)
    assert {(q.broker_name, q.queue_id) for q in mqs} == {
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("b", 1),
        ("c", 0),
        ("c", 1),
    }


def test_order_topic_conf_pins_the_layout() -> None:
    data = orjson.loads(QUOTED)
    data["orderTopicConf"] = "b:3;a:1"
    info = TopicPublishInfo.from_route("T", parse_route(data))
    assert info.order_topic
    assert info.queues == [MessageQueue("T", "b", i) for i in range(3)] + [MessageQueue("T", "a", 0)]


def test_select_one_skips_the_last_failed_broker() -> None:
    data = orjson.loads(QUOTED)
    data["queueDatas"][0]["perm"] = 6
    data["queueDatas"][2]["perm"] = 6
    info = TopicPublishInfo.from_route("T", parse_route(data))
    assert {q.broker_name for q in info.queues} == {"a", "b"}
    for _ in range(20):
        assert info.select_one("a").broker_name == "b"
    assert {info.select_one() for _ in info.queues} == set(info.queues)  # plain round robin visits all
