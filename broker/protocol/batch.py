"""The SEND_BATCH_MESSAGE (320) body: inner messages packed back to back (reference section 4.4).

The broker's send processor calls `decode_batch(cmd.body)` to split a batch into its messages;
our client calls `encode_batch()` to build one. Each record is
`int32 TOTALSIZE | int32 MAGICCODE(0) | int32 BODYCRC(0) | int32 FLAG | int32 BODYLEN | body |
int16 PROPLEN | properties`, with TOTALSIZE = 20 + bodyLen + 2 + propsLen. A malformed or truncated
batch raises `BatchFormatError` (answer MESSAGE_ILLEGAL; the connection is fine).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from broker.protocol.codes import ResponseCode
from broker.protocol.errors import ProtocolError
from broker.protocol.properties import PROPERTY_SEPARATOR, decode_properties

__all__ = [
    "MAX_PROPERTIES_LENGTH",
    "BatchFormatError",
    "BatchMessage",
    "decode_batch",
    "decode_batch_reference",
    "encode_batch",
    "iter_batch",
    "merge_batch_properties",
]

_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_SHORT = struct.Struct(">h")
_FIXED = _HEAD.size + _SHORT.size  # 22: every record is at least this long
MAX_PROPERTIES_LENGTH = 0x7FFF  # PROPLEN is a signed int16 here and on disk


class BatchFormatError(ProtocolError):
    """The batch body does not parse. Java would fail the request, not the connection."""

    response_code = ResponseCode.MESSAGE_ILLEGAL


class BatchMessage(NamedTuple):
    """One inner message: the topic, queue and sysFlag come from the request header. A NamedTuple: the
    broker builds one per inner message of every batch it receives, and a tuple's constructor is C."""

    body: bytes
    properties: str = ""
    flag: int = 0

    def props(self) -> dict[str, str]:
        return decode_properties(self.properties)


def iter_batch(data: bytes | bytearray | memoryview) -> Iterator[BatchMessage]:
    """Yield the inner messages one by one; raises BatchFormatError at the first bad record."""
    view = memoryview(data)
    size = len(view)
    pos = 0
    index = 0
    while pos < size:
        if size - pos < _FIXED:
            raise BatchFormatError(f"batch record {index} at byte {pos} is truncated: {size - pos} bytes left")
        total, _magic, _crc, flag, body_len = _HEAD.unpack_from(view, pos)
        if body_len < 0 or total < _FIXED + body_len or pos + total > size:
            raise BatchFormatError(
                f"batch record {index} at byte {pos}: TOTALSIZE {total} / BODYLEN {body_len} do not fit "
                f"the {size - pos} bytes left"
            )
        body_start = pos + _HEAD.size
        props_at = body_start + body_len
        (props_len,) = _SHORT.unpack_from(view, props_at)
        if props_len < 0 or total != _FIXED + body_len + props_len:
            raise BatchFormatError(
                f"batch record {index} at byte {pos}: TOTALSIZE {total} != 22 + BODYLEN {body_len} "
                f"+ PROPLEN {props_len}"
            )
        try:
            properties = str(view[props_at + 2 : props_at + 2 + props_len], "utf-8")  # decoded without a copy
        except UnicodeDecodeError as exc:
            raise BatchFormatError(f"batch record {index}: properties are not UTF-8 ({exc.reason})") from None
        yield BatchMessage(bytes(view[body_start:props_at]), properties, flag)
        pos += total
        index += 1


def decode_batch(data: bytes | bytearray | memoryview) -> list[BatchMessage]:
    """All inner messages of a batch body; an empty body is an error, as a batch needs one message.

    The broker's per-batch decode: a plain loop over bytes (slices copy straight out of them) that
    takes any record it does not like to `decode_batch_reference`, which says what is wrong. Held equal
    to it, answers and errors, by tests/protocol/test_batch_body.py.
    """
    buf = data if type(data) is bytes else bytes(data)
    size = len(buf)
    unpack_head, unpack_short = _HEAD.unpack_from, _SHORT.unpack_from
    messages: list[BatchMessage] = []
    pos = 0
    try:
        while pos < size:
            if size - pos < _FIXED:
                return decode_batch_reference(data)
            total, _magic, _crc, flag, body_len = unpack_head(buf, pos)
            props_at = pos + 20 + body_len
            end = pos + total
            if body_len < 0 or end > size or props_at + 2 > end:
                return decode_batch_reference(data)
            (props_len,) = unpack_short(buf, props_at)
            if props_len < 0 or total != _FIXED + body_len + props_len:
                return decode_batch_reference(data)
            messages.append(BatchMessage(buf[pos + 20 : props_at], buf[props_at + 2 : end].decode(), flag))
            pos = end
    except UnicodeDecodeError:
        return decode_batch_reference(data)
    if not messages:
        return decode_batch_reference(data)
    return messages


def decode_batch_reference(data: bytes | bytearray | memoryview) -> list[BatchMessage]:
    """`decode_batch` written plainly, record by record through `iter_batch`: the reference its fast
    loop is held equal to, and what explains a malformed body."""
    messages = list(iter_batch(data))
    if not messages:
        raise BatchFormatError("batch body holds no message")
    return messages


def encode_batch(messages: Iterable[BatchMessage]) -> bytes:
    """Pack messages as MessageDecoder.encodeMessages does (MAGICCODE and BODYCRC written as 0)."""
    parts: list[bytes] = []
    for msg in messages:
        props = msg.properties.encode()
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise BatchFormatError(f"properties of {len(props)} bytes exceed the int16 PROPLEN")
        total = _FIXED + len(msg.body) + len(props)
        parts += [_HEAD.pack(total, 0, 0, msg.flag, len(msg.body)), msg.body, _SHORT.pack(len(props)), props]
    return b"".join(parts)


def merge_batch_properties(inner: str, batch_level: str) -> str:
    """Inner properties with the batch-level ones appended, as 4.9.x-5.3.x brokers store them
    (a \\x02 is added first when the inner string does not end with one)."""
    if not batch_level:
        return inner
    if inner and not inner.endswith(PROPERTY_SEPARATOR):
        inner += PROPERTY_SEPARATOR
    return inner + batch_level
