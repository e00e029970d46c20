"""JSON bodies and the fastjson dialect (broker.protocol.bodies)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.bodies import (
    BodyError,
    ConsumeFromWhere,
    ConsumerIdList,
    ConsumeStats,
    ConsumeType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    TopicList,
    UnlockBatchRequestBody,
    fastjson_dumps,
    fastjson_loads,
)

CPP_HEARTBEAT = (
    b'{"clientID":"15754-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
    b'"groupName":"CID-test","messageModel":1,"subscriptionDataSet":[{"codeSet":[0],"subString":"tagA",'
    b'"subVersion":"1795342677882","tagsSet":["tagA"],"topic":"TopicTest"}]}],"producerDataSet":[{"groupName":"P"}]}'
)
ONS_HEARTBEAT = (
    b'{"clientID":"192.0.2.2@9899","consumerDataSet":[{"groupName":"CID-test","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":'
    b'"TopicTest","subString":"*","classFilterMode":false,"tagsSet":[],"codeSet":[],"subVersion":1795342677882}],'
    b'"unitMode":false}],"producerDataSet":[]}'
)


@pytest.mark.parametrize("raw", [CPP_HEARTBEAT, ONS_HEARTBEAT], ids=["cpp-int-enums", "ons-string-enums"])
def test_heartbeat_accepts_both_enum_styles(raw: bytes) -> None:
    hb = HeartbeatData.from_json(raw)
    (consumer,) = hb.consumers
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    (sub,) = consumer.subscriptions
    assert sub.sub_version == 1795342677882 and sub.expression_type == "TAG" and sub.topic == "TopicTest"
    assert HeartbeatData.from_json(hb.to_json()) == hb


def test_heartbeat_written_like_java() -> None:
    obj = orjson.loads(HeartbeatData.from_json(CPP_HEARTBEAT).to_json())
    consumer = obj["consumerDataSet"][0]
    assert consumer["consumeType"] == "CONSUME_PASSIVELY" and obj["producerDataSet"] == [{"groupName": "P"}]
    assert consumer["subscriptionDataSet"][0]["codeSet"] == [0]


@pytest.mark.parametrize(
    "raw",
    [b"[]", b'{"consumerDataSet":[]}', b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":9}]}',
     b'{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":"NOPE"}]}', b"{", b"\xff"],
)  # fmt: skip
def test_bad_heartbeats_raise_body_error(raw: bytes) -> None:
    with pytest.raises(BodyError):
        HeartbeatData.from_json(raw)


def test_lock_bodies_round_trip() -> None:
    mqs = frozenset({MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)})
    req = LockBatchRequestBody(consumer_group="G", client_id="cid", mq_set=mqs)
    raw = req.to_json()
    assert orjson.loads(raw)["mqSet"][0] == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert LockBatchRequestBody.from_json(raw) == req
    assert isinstance(UnlockBatchRequestBody.from_json(raw), UnlockBatchRequestBody)
    resp = LockBatchResponseBody(mqs)
    assert LockBatchResponseBody.from_json(resp.to_json()) == resp


def test_simple_lists() -> None:
    assert ConsumerIdList(("a", "b")).to_json() == b'{"consumerIdList":["a","b"]}'
    assert ConsumerIdList.from_json(b'{"consumerIdList":["a"]}').consumer_ids == ("a",)
    assert TopicList.from_json(TopicList(("t1", "t2"), "1.2.3.4:10911").to_json()) == TopicList(
        ("t1", "t2"), "1.2.3.4:10911"
    )


def test_fastjson_integer_and_object_keys() -> None:
    assert fastjson_dumps({"brokerAddrs": {0: "a:1", 1: "b:2"}}) == b'{"brokerAddrs":{0:"a:1",1:"b:2"}}'
    assert fastjson_loads(b'{"brokerAddrs":{0:"a:1",1:"b:2"}}') == {"brokerAddrs": {0: "a:1", 1: "b:2"}}
    raw = (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:12,{"brokerName":"b","queueId":1,"topic":"t"}:0}}'
    )
    assert ResetOffsetBody.from_json(raw).offset_table == {MessageQueue("t", "b", 0): 12, MessageQueue("t", "b", 1): 0}
    assert ResetOffsetBody.from_json(raw).to_json() == raw


def test_fastjson_tolerant_parser_details() -> None:
    text = '{ "a" : [1, 2.5, -3, true, false, null, "x\\u00e9\\n"], 7 : {}, {"k":[1]} : "q" }'
    assert fastjson_loads(text) == {"a": [1, 2.5, -3, True, False, None, "xé\n"], 7: {}, (("k", (1,)),): "q"}
    for bad in ["{", '{"a" 1}', "[1 2]", '{"a":}', '"open', "{1:2}x", "{nan:1}"]:
        with pytest.raises(BodyError):
            fastjson_loads(bad)


def test_consume_stats_and_reset_for_c() -> None:
    stats = ConsumeStats({MessageQueue("t", "b", 3): OffsetWrapper(10, 7, 8, 1700000000000)}, 2.5)
    assert ConsumeStats.from_json(stats.to_json()) == stats
    assert stats.to_json().startswith(b'{"consumeTps":2.5,"offsetTable":{{"brokerName":"b"')
    for_c = ResetOffsetBodyForC({MessageQueue("t", "b", 0): 5})
    assert orjson.loads(for_c.to_json()) == {
        "offsetTable": [{"brokerName": "b", "queueId": 0, "topic": "t", "offset": 5}]
    }
    assert ResetOffsetBodyForC.from_json(for_c.to_json()) == for_c


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5) | st.integers(0, 99), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values)
def test_fastjson_round_trip_property(value: object) -> None:
    assert fastjson_loads(fastjson_dumps(value)) == value
    assert fastjson_loads(fastjson_dumps(value).decode()) == value
