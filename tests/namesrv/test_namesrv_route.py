"""Route table and body codecs without sockets: register body forms, JSON quirks, acting master, liveness."""

from __future__ import annotations

import zlib

import orjson
import pytest

from broker.namesrv.body import (
    BodyError,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    encode_register_body,
    parse_register_body,
)
from broker.namesrv.route import RouteInfoManager
from broker.protocol.fastjson import dumps


def _body(*topics: str) -> RegisterBrokerBody:
    return RegisterBrokerBody(
        topic_configs={t: TopicConfig(t, 8, 8, 6, attributes={"+message.type": "NORMAL"}) for t in topics},
        data_version=DataVersion(3, 0, 1700000000000),
        filter_server_list=[],
    )


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("version", [317, 479])
def test_register_body_round_trip(compressed: bool, version: int) -> None:
    body = _body("TopicA", "TBW102")
    parsed = parse_register_body(
        encode_register_body(body, compressed=compressed, version=version), compressed=compressed, version=version
    )
    assert parsed == body


def test_compressed_body_layout_matches_java() -> None:
    raw = zlib.decompress(encode_register_body(_body("TopicA"), compressed=True, version=479))
    dv_len = int.from_bytes(raw[:4], "big")
    assert orjson.loads(raw[4 : 4 + dv_len]) == {"counter": 3, "stateVersion": 0, "timestamp": 1700000000000}
    pos = 4 + dv_len
    assert int.from_bytes(raw[pos : pos + 4], "big") == 1
    line_len = int.from_bytes(raw[pos + 4 : pos + 8], "big")
    assert raw[pos + 8 : pos + 8 + line_len] == b'TopicA 8 8 6 SINGLE_TAG {"+message.type":"NORMAL"}'


def test_old_broker_body_and_bad_bodies() -> None:
    wrapper = {
        "topicConfigTable": {"T": {"topicName": "T", "readQueueNums": "2", "writeQueueNums": 2, "perm": 6}},
        "dataVersion": {"counter": 1, "timestamp": 5},
    }
    parsed = parse_register_body(orjson.dumps(wrapper), compressed=False, version=28)
    assert parsed.topic_configs["T"].read_queue_nums == 2
    with pytest.raises(BodyError, match="not valid JSON"):
        parse_register_body(b"{oops", compressed=False, version=479)
    truncated = zlib.compress(b"\x00\x00\x00\x50{}")
    with pytest.raises(BodyError, match="overruns"):
        parse_register_body(truncated, compressed=True, version=479)


def test_fastjson_int_keys() -> None:
    value = {"brokerAddrs": {0: "a:1", 1: "b:1"}, "name": "x y"}
    assert dumps(value, quote_int_keys=False) == b'{"brokerAddrs":{0:"a:1",1:"b:1"},"name":"x y"}'
    assert dumps(value, quote_int_keys=True) == b'{"brokerAddrs":{"0":"a:1","1":"b:1"},"name":"x y"}'


def test_single_topic_first_registration_is_refused() -> None:
    routes = RouteInfoManager()
    assert (
        routes.register_broker(
            cluster_name="c",
            broker_addr="a:1",
            broker_name="b",
            broker_id=0,
            ha_server_addr="a:2",
            body=_body("OnlyOne"),
        )
        is None
    )
    assert routes.cluster_info() == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


def test_acting_master_route_and_expiry() -> None:
    routes = RouteInfoManager(default_timeout_ms=1000)
    for broker_id, addr in ((1, "s1:1"), (2, "s2:1")):
        routes.register_broker(
            cluster_name="c",
            broker_addr=addr,
            broker_name="b",
            broker_id=broker_id,
            ha_server_addr=addr,
            body=_body("T", "U"),
            enable_acting_master=True,
            now_ms=0,
        )
    route = orjson.loads(routes.topic_route("T", standard_json=True))
    # No master: the lowest-id slave is presented as id 0, and its queues are read-only.
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "s1:1", "2": "s2:1"}
    assert route["queueDatas"][0]["perm"] == 4
    routes.refresh("c", "s2:1", now_ms=900)
    expired = routes.scan_not_active(now_ms=1500)
    assert [live.broker_id for live in expired] == [1]
    assert orjson.loads(routes.topic_route("T", standard_json=True))["brokerDatas"][0]["brokerAddrs"] == {"0": "s2:1"}
    routes.scan_not_active(now_ms=5000)
    assert routes.topic_route("T", standard_json=True) is None
