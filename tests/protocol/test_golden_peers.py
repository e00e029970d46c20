"""Golden tests: request frames captured from three real clients decode with our codec.

Each client (PyPI rocketmq 0.4.4, rocketmq-python-cvs 2.1.0.3, npm ali-ons 3.12.0) runs a
producer and a push consumer against the CaptureServer in tests/peers, once per session.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.protocol.bodies import ConsumeType, HeartbeatData, MessageModel
from broker.protocol.codes import LanguageCode, RequestCode, SerializeType
from broker.protocol.headers import (
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    parse_send_request_header,
)
from broker.protocol.properties import Prop, decode_properties
from tests.peers import PeerRun

pytestmark = pytest.mark.peers

RunPeer = Callable[[str], PeerRun]
# name -> (send code, language, version, int enums in heartbeat, sets UNIQ_KEY)
EXPECTED = {
    "rocketmq-0.4.4": (RequestCode.SEND_MESSAGE, LanguageCode.CPP, 63, True, True),
    "rocketmq-python-cvs-2.1.0.3": (RequestCode.SEND_MESSAGE_V2, LanguageCode.CPP, 333, True, True),
    "ali-ons-3.12.0": (RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, 121, False, False),
}
PEER_NAMES = list(EXPECTED)


def _run(peer_run: RunPeer, name: str) -> PeerRun:
    run = peer_run(name)
    assert run.returncode == 0, f"{name} failed: {run.stderr[-2000:]}"
    return run


@pytest.mark.parametrize("name", PEER_NAMES)
def test_client_completes_a_send_against_our_responses(peer_run: RunPeer, name: str) -> None:
    run = _run(peer_run, name)
    assert len(run.results) == 1
    assert run.results[0]["status"] in (0, "SEND_OK")


@pytest.mark.parametrize("name", PEER_NAMES)
def test_frames_are_json_with_the_clients_language_and_version(peer_run: RunPeer, name: str) -> None:
    run = _run(peer_run, name)
    _, language, version, _, _ = EXPECTED[name]
    requests = [f for f in run.capture.frames if not f.cmd.is_response]
    assert requests
    for frame in requests:
        assert frame.cmd.serialize_type == SerializeType.JSON
        assert frame.cmd.language == language and frame.cmd.version == version
        assert all(isinstance(v, str) for v in frame.cmd.ext_fields.values())


@pytest.mark.parametrize("name", PEER_NAMES)
def test_route_request(peer_run: RunPeer, name: str) -> None:
    run = _run(peer_run, name)
    topics = {GetRouteInfoRequestHeader.from_ext_fields(f.cmd.ext_fields).topic
              for f in run.capture.requests(RequestCode.GET_ROUTEINFO_BY_TOPIC, "namesrv")}  # fmt: skip
    assert "GoldenTopic" in topics


@pytest.mark.parametrize("name", PEER_NAMES)
def test_send_header_decodes(peer_run: RunPeer, name: str) -> None:
    run = _run(peer_run, name)
    code, _, _, _, has_uniq_key = EXPECTED[name]
    sends = [f for f in run.capture.frames if f.cmd.code in (10, 310, 320) and not f.cmd.is_response]
    assert [f.cmd.code for f in sends] == [code]
    frame = sends[0]
    raw_ext = frame.raw_header["extFields"]
    header = parse_send_request_header(frame.cmd.code, frame.cmd.ext_fields)
    assert header.producer_group == "PID-golden" and header.topic == "GoldenTopic"
    assert header.default_topic == "TBW102" and 0 <= header.queue_id < 4
    assert header.sys_flag == 0 and header.flag == 0 and header.born_timestamp > 1_600_000_000_000
    assert header.unit_mode is False and header.batch is False
    props = decode_properties(header.properties or "")
    assert props[Prop.TAGS] == "tagA" and props[Prop.KEYS] == "k0" and props["color"] == "blue"
    assert (Prop.UNIQ_KEY in props) is has_uniq_key
    assert frame.cmd.body == b"golden body 0"
    if code == RequestCode.SEND_MESSAGE:
        assert "producerGroup" in raw_ext and "a" not in raw_ext
        assert raw_ext["defaultTopicQueueNums"] == 4  # C++ writes some numbers as JSON numbers
        assert {"Signature", "AccessKey", "OnsChannel"} <= set(raw_ext)
    else:
        assert "a" in raw_ext and "producerGroup" not in raw_ext
        assert raw_ext["d"] == 4 and frame.cmd.ext_fields["d"] == "4"
        # A V2 header read with V1 names is missing everything: the code decides the names.
        with pytest.raises(Exception, match="producerGroup"):
            SendMessageRequestHeader.from_ext_fields(frame.cmd.ext_fields)
    if name.startswith("ali-ons"):
        assert raw_ext["k"] is False and frame.cmd.ext_fields["k"] == "false"
        assert isinstance(raw_ext["g"], int)


@pytest.mark.parametrize("name", PEER_NAMES)
def test_heartbeat_body_decodes(peer_run: RunPeer, name: str) -> None:
    run = _run(peer_run, name)
    int_enums = EXPECTED[name][3]
    beats = run.capture.requests(RequestCode.HEART_BEAT, "broker")
    assert beats
    consumers = []
    for frame in beats:
        hb = HeartbeatData.from_json(frame.cmd.body)
        assert hb.client_id
        consumers += [c for c in hb.consumers if c.group_name == "CID-golden"]
    assert consumers, "no consumer heartbeat captured"
    consumer = consumers[0]
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    subs = {s.topic: s for s in consumer.subscriptions}
    assert subs["GoldenTopic"].sub_string == "tagA" and subs["GoldenTopic"].sub_version > 0
    raw = next(f.cmd.body for f in beats if b"consumeType" in f.cmd.body)
    assert (b'"consumeType":1' in raw) is int_enums
    assert (b'"consumeType":"CONSUME_PASSIVELY"' in raw) is not int_enums


@pytest.mark.parametrize("name", PEER_NAMES)
def test_pull_header_decodes(peer_run: RunPeer, name: str) -> None:
    run = _run(peer_run, name)
    pulls = run.capture.requests(RequestCode.PULL_MESSAGE, "broker")
    assert pulls
    for frame in pulls:
        header = PullMessageRequestHeader.from_ext_fields(frame.cmd.ext_fields)
        assert header.consumer_group == "CID-golden" and header.max_msg_nums == 32
        assert header.sys_flag & 0x2 and header.sys_flag & 0x4  # SUSPEND + SUBSCRIPTION, always sent by these
        assert header.suspend_timeout_millis == 15000 and header.queue_offset >= 0
