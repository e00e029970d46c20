"""Typed headers (broker.protocol.headers): wire names, V1/V2 send names, parsing rules, round trips."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol import headers as h
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import FrameDecoder, RemotingCommand, encode, encode_binary

ALL_HEADERS = sorted({cls for cls in vars(h).values() if isinstance(cls, type) and issubclass(cls, h.Header)
                      and cls is not h.Header}, key=lambda c: c.__name__)  # fmt: skip

CPP_V2 = {  # rocketmq-python-cvs, after command.py turned its JSON numbers into strings
    "AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "sig", "a": "PID", "b": "TopicTest", "c": "TBW102",
    "d": "4", "e": "0", "f": "0", "g": "1795342481527", "h": "0", "i": "KEYS\x01k0\x02WAIT\x01true\x02",
    "j": "0", "k": "0", "l": "16", "m": "0",
}  # fmt: skip


def _value(spec: h._Spec) -> object:
    return {"str": "v-" + spec.wire, "int": -7, "long": 2**40, "bool": True}[spec.kind]


def _full(cls: type[h.Header]) -> h.Header:
    kwargs = {s.name: _value(s) for s in cls._SPECS}
    if cls is h.EndTransactionRequestHeader:
        kwargs["commit_or_rollback"] = 8
    if cls is h.CreateTopicRequestHeader:
        kwargs["topic_filter_type"] = "SINGLE_TAG"
    if cls is h.SearchOffsetRequestHeader:
        kwargs["boundary_type"] = "UPPER"
    return cls(**kwargs)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_every_header_round_trips_through_strings(cls: type[h.Header]) -> None:
    header = _full(cls)
    header.validate()
    ext = header.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    assert set(ext) == {s.wire for s in cls._SPECS}
    assert cls.from_ext_fields(ext) == header
    assert dataclasses.is_dataclass(header) and not hasattr(header, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.__setattr__(cls._SPECS[0].name, None)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_missing_required_field_names_it(cls: type[h.Header]) -> None:
    ext = _full(cls).to_ext_fields()
    for spec in cls._SPECS:
        if spec.required:
            broken = {k: v for k, v in ext.items() if k != spec.wire}
            with pytest.raises(h.MissingHeaderField, match=f"<{spec.wire}>") as info:
                cls.from_ext_fields(broken)
            assert info.value.response_code == ResponseCode.SYSTEM_ERROR
            assert info.value.wire_name == spec.wire


def test_send_v1_and_v2_parse_to_the_same_header() -> None:
    v2 = h.parse_send_request_header(RequestCode.SEND_MESSAGE_V2, CPP_V2)
    assert v2.producer_group == "PID" and v2.default_topic_queue_nums == 4 and v2.born_timestamp == 1795342481527
    assert v2.unit_mode is False and v2.batch is False and v2.max_reconsume_times == 16
    assert h.parse_send_request_header(RequestCode.SEND_MESSAGE, v2.to_ext_fields()) == v2
    assert h.parse_send_request_header(RequestCode.SEND_BATCH_MESSAGE, v2.to_v2_ext_fields()) == v2
    assert v2.to_v2_ext_fields()["a"] == "PID" and v2.to_ext_fields()["producerGroup"] == "PID"


def test_send_v1_bname_and_v2_n_are_the_broker_name() -> None:
    v1 = {**h.parse_send_request_header(310, CPP_V2).to_ext_fields(), "bname": "broker-a"}
    assert h.parse_send_request_header(10, v1).broker_name == "broker-a"
    assert h.parse_send_request_header(310, {**CPP_V2, "n": "broker-b"}).broker_name == "broker-b"


@pytest.mark.parametrize(
    ("raw", "expected"), [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False), ("yes", False)]
)
def test_booleans_follow_java_plus_cpp_digits(raw: str, expected: bool) -> None:
    assert h.parse_send_request_header(310, {**CPP_V2, "m": raw}).batch is expected


@pytest.mark.parametrize("bad", ["", "x", "1.5", "2147483648", "-2147483649"])
def test_bad_int_is_invalid_field(bad: str) -> None:
    with pytest.raises(h.InvalidHeaderField, match="<e>"):
        h.parse_send_request_header(310, {**CPP_V2, "e": bad})


def test_long_range_is_checked() -> None:
    assert h.parse_send_request_header(310, {**CPP_V2, "g": str(2**63 - 1)}).born_timestamp == 2**63 - 1
    with pytest.raises(h.InvalidHeaderField):
        h.parse_send_request_header(310, {**CPP_V2, "g": str(2**63)})


def test_defaults_and_optional_fields() -> None:
    base = {"topic": "T", "queueId": "3"}
    assert h.GetMaxOffsetRequestHeader.from_ext_fields(base).committed is True
    q = h.QueryConsumerOffsetRequestHeader.from_ext_fields({**base, "consumerGroup": "G"})
    assert q.set_zero_if_not_found is None
    r = h.ResetOffsetRequestHeader.from_ext_fields({"topic": "T", "group": "G", "timestamp": "5", "isForce": "true"})
    assert r.queue_id == -1 and r.offset is None and r.is_force is True
    assert "offset" not in r.to_ext_fields()


def test_header_specific_checks_like_java_checkfields() -> None:
    end = {"producerGroup": "P", "tranStateTableOffset": "1", "commitLogOffset": "2", "msgId": "m"}
    for ok in ("0", "8", "12"):
        assert h.EndTransactionRequestHeader.from_ext_fields({**end, "commitOrRollback": ok})
    with pytest.raises(h.InvalidHeaderField, match="commitOrRollback"):
        h.EndTransactionRequestHeader.from_ext_fields({**end, "commitOrRollback": "4"})
    topic = _full(h.CreateTopicRequestHeader).to_ext_fields()
    with pytest.raises(h.InvalidHeaderField, match="topicFilterType"):
        h.CreateTopicRequestHeader.from_ext_fields({**topic, "topicFilterType": "BOTH"})


def test_validate_catches_wrong_python_types() -> None:
    header = dataclasses.replace(_full(h.PullMessageRequestHeader), queue_id="1")  # type: ignore[arg-type]
    with pytest.raises(h.InvalidHeaderField, match="queueId"):
        header.validate()
    with pytest.raises(h.MissingHeaderField, match="topic"):
        dataclasses.replace(_full(h.PullMessageRequestHeader), topic=None).validate()  # type: ignore[arg-type]
    wrong = {"consumer_group": 5, "suspend_timeout_millis": True, "queue_offset": 2**63}  # str, long, long
    for name, value in wrong.items():
        with pytest.raises(h.InvalidHeaderField):
            dataclasses.replace(_full(h.PullMessageRequestHeader), **{name: value}).validate()
    bools = dataclasses.replace(_full(h.GetMaxOffsetRequestHeader), committed=1)  # type: ignore[arg-type]
    with pytest.raises(h.InvalidHeaderField, match="committed"):
        bools.validate()
    with pytest.raises(h.InvalidHeaderField, match="commitOrRollback"):  # the header's own rule
        dataclasses.replace(_full(h.EndTransactionRequestHeader), commit_or_rollback=4).validate()


def test_unknown_and_cpp_extra_keys_are_ignored() -> None:
    ext = {"topic": "T", "Signature": "s", "AccessKey": "", "OnsChannel": "ALIYUN", "bname": "b", "lo": "true"}
    assert h.GetRouteInfoRequestHeader.from_ext_fields(ext) == h.GetRouteInfoRequestHeader(topic="T")


@pytest.mark.parametrize("encoder", [encode, encode_binary])
def test_header_survives_a_frame(encoder: object) -> None:
    header = _full(h.PullMessageResponseHeader)
    cmd = RemotingCommand(code=0, ext_fields=header.to_ext_fields())
    (decoded,) = FrameDecoder().feed(encoder(cmd))  # type: ignore[operator]
    assert h.PullMessageResponseHeader.from_ext_fields(decoded.ext_fields) == header


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=30),
    st.booleans(),
)
def test_send_header_property(queue_id: int, born: int, props: str, batch: bool) -> None:
    header = dataclasses.replace(
        h.parse_send_request_header(310, CPP_V2), queue_id=queue_id, born_timestamp=born, properties=props, batch=batch
    )
    assert h.SendMessageRequestHeader.from_v2_ext_fields(header.to_v2_ext_fields()) == header
    assert h.SendMessageRequestHeader.from_ext_fields(header.to_ext_fields()) == header
