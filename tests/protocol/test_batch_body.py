"""SEND_BATCH_MESSAGE bodies (broker.protocol.batch): layout, round trips, malformed input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.batch import (
    BatchFormatError,
    BatchMessage,
    decode_batch,
    decode_batch_reference,
    encode_batch,
    iter_batch,
    merge_batch_properties,
)
from broker.protocol.codes import ResponseCode
from broker.protocol.properties import encode_properties

MESSAGES = [
    BatchMessage(body=b"hello", properties=encode_properties({"TAGS": "a", "KEYS": "k1"}), flag=3),
    BatchMessage(body=b"", properties="", flag=0),
    BatchMessage(body=b"\x00" * 300, properties=encode_properties({"UNIQ_KEY": "ABC"}), flag=-1),
]


def test_layout_is_the_java_record() -> None:
    data = encode_batch([MESSAGES[0]])
    props = MESSAGES[0].properties.encode()
    assert struct.unpack_from(">iiiii", data) == (20 + 5 + 2 + len(props), 0, 0, 3, 5)
    assert data[20:25] == b"hello"
    assert struct.unpack_from(">h", data, 25) == (len(props),) and data[27:] == props


def test_round_trip() -> None:
    decoded = decode_batch(encode_batch(MESSAGES))
    assert decoded == MESSAGES
    assert decoded[0].props() == {"TAGS": "a", "KEYS": "k1"}


@given(st.lists(st.builds(BatchMessage, st.binary(max_size=50), st.text(max_size=20), st.integers(-(2**31), 2**31 - 1)),
                min_size=1, max_size=5))  # fmt: skip
def test_round_trip_property(messages: list[BatchMessage]) -> None:
    assert decode_batch(encode_batch(messages)) == messages


def test_every_truncation_is_a_clear_error() -> None:
    data = encode_batch(MESSAGES)
    boundaries = {0}
    for msg in MESSAGES:
        boundaries.add(max(boundaries) + len(encode_batch([msg])))
    for cut in range(1, len(data)):
        if cut in boundaries:
            assert len(list(iter_batch(data[:cut]))) >= 1
            continue
        with pytest.raises(BatchFormatError) as info:
            decode_batch(data[:cut])
        assert info.value.response_code == ResponseCode.MESSAGE_ILLEGAL


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "no message"),
        (struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00", "BODYLEN -1"),
        (struct.pack(">iiiii", 30, 0, 0, 0, 0) + b"\x00\x00", "do not fit"),
        (struct.pack(">iiiii", 23, 0, 0, 0, 0) + b"\x00\x00x", "PROPLEN 0"),
        (struct.pack(">iiiii", 24, 0, 0, 0, 0) + b"\x00\x02\xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_records(data: bytes, match: str) -> None:
    with pytest.raises(BatchFormatError, match=match):
        decode_batch(data)


def test_oversized_properties_refused_on_encode() -> None:
    with pytest.raises(BatchFormatError):
        encode_batch([BatchMessage(b"", "x" * 40000)])


def test_merge_batch_properties_adds_separator_when_needed() -> None:
    assert merge_batch_properties("A\x01b\x02", "CLUSTER\x01c\x02") == "A\x01b\x02CLUSTER\x01c\x02"
    assert merge_batch_properties("A\x01b", "CLUSTER\x01c\x02") == "A\x01b\x02CLUSTER\x01c\x02"
    assert merge_batch_properties("", "W\x01x\x02") == "W\x01x\x02"
    assert merge_batch_properties("A\x01b\x02", "") == "A\x01b\x02"


def _outcome(decode: object, data: bytes | bytearray | memoryview) -> object:
    try:
        return decode(data)  # type: ignore[operator]
    except BatchFormatError as exc:
        return ("error", str(exc))


_VALID = st.lists(
    st.builds(BatchMessage, st.binary(max_size=40), st.text(max_size=12), st.integers(-(2**31), 2**31 - 1)),
    min_size=1,
    max_size=4,
).map(encode_batch)


@given(
    st.one_of(
        _VALID,
        st.binary(max_size=120),
        st.tuples(_VALID, st.integers(0, 200), st.binary(min_size=1, max_size=4)).map(
            lambda v: v[0][: v[1] % (len(v[0]) + 1)] + v[2] + v[0][v[1] % (len(v[0]) + 1) + len(v[2]) :]
        ),  # a few bytes overwritten somewhere: lengths, flags, bodies, properties
        st.tuples(_VALID, st.integers(0, 200)).map(lambda v: v[0][: v[1] % (len(v[0]) + 1)]),  # truncated
    ),
    st.sampled_from([bytes, bytearray, memoryview]),
)
def test_the_fast_decode_equals_the_reference(data: bytes, kind: type) -> None:
    """decode_batch (the broker's loop) gives what decode_batch_reference gives: the same messages, or
    the same error for a malformed body, whatever buffer type the body arrives in."""
    assert _outcome(decode_batch, kind(data)) == _outcome(decode_batch_reference, kind(data))
