"""A SEND_BATCH_MESSAGE body turned into the messages the store appends: `batch_messages`.

The send processor (broker.server.processors.send) checks the request header, then hands the body here.
Each inner message is checked (size, properties, no delay, transaction or delivery time), gets its
UNIQ_KEY (the sender's, or one the broker generates), and its properties as stored: its own followed by
the batch-level ones and the broker's CLUSTER, as 4.9.x-5.3.x brokers store them.

`batch_messages` is the broker's: one loop over the body's records that fills a BatchToStore (the
shared fields once, each message's body view, flag, stored properties and dispatch keys in lists)
straight from the bytes. Whatever it does not take as it is (a malformed record, bad properties, a
message a batch may not hold) goes to `batch_messages_reference`, the same written plainly in steps
(decode_batch_reference, then each message in turn), which says what is wrong. tests/server/
test_batch_send.py holds the two equal.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from broker.protocol.batch import (
    MAX_PROPERTIES_LENGTH,
    BatchFormatError,
    decode_batch_reference,
    merge_batch_properties,
)
from broker.protocol.codes import ResponseCode
from broker.protocol.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop
from broker.server.errors import RequestError
from broker.server.put_rules import BATCH_CHECKED, batch_dispatch_keys, batch_message_problem, checked_properties
from broker.store.results import BatchToStore, MessageToStore

__all__ = ["BatchSend", "batch_messages", "batch_messages_reference"]

_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_SHORT = struct.Struct(">h")
_FIXED = _HEAD.size + _SHORT.size
_UNIQ = Prop.UNIQ_KEY
_TAGS = Prop.TAGS
_KEYS = Prop.KEYS


class BatchSend:
    """What every message of one batch shares: the request header's fields and the batch-level properties."""

    __slots__ = ("batch_level", "batch_props", "born_host", "born_timestamp", "max_size", "queue_id", "sys_flag",
                 "topic")  # fmt: skip

    def __init__(
        self,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        max_size: int,
        batch_props: dict[str, str],
        batch_level: str,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.max_size = max_size
        self.batch_props = batch_props  # the header's properties, parsed (no CLUSTER)
        self.batch_level = batch_level  # what is appended to each inner message's properties text


def batch_messages(body: bytes, send: BatchSend, new_uniq: Callable[[], str]) -> tuple[BatchToStore, list[str]]:
    """The batch to store and its messages' UNIQ_KEYs, or a RequestError (MESSAGE_ILLEGAL and why). The
    bodies are views into `body`, which the store copies into the CommitLog."""
    buf = body if type(body) is bytes else bytes(body)
    view = memoryview(buf)
    size = len(buf)
    unpack_head, unpack_short = _HEAD.unpack_from, _SHORT.unpack_from
    queue_id, sys_flag = send.queue_id, send.sys_flag
    born_timestamp, born_host, max_size = send.born_timestamp, send.born_host, send.max_size
    batch_level = send.batch_level
    get_level = send.batch_props.get
    level_tags, level_keys, level_uniq = get_level(_TAGS), get_level(_KEYS), get_level(_UNIQ)
    bodies: list[bytes | memoryview] = []
    flags: list[int] = []
    stored_props: list[bytes] = []
    keys: list[tuple[str | None, str | None, str | None] | None] = []
    uniq_ids: list[str] = []
    pos = 0
    try:
        while pos < size:
            if size - pos < _FIXED:
                break
            total, _magic, _crc, flag, body_len = unpack_head(buf, pos)
            props_at = pos + 20 + body_len
            end = pos + total
            if body_len < 0 or end > size or props_at + 2 > end or body_len > max_size:
                break
            (props_len,) = unpack_short(buf, props_at)
            if props_len < 0 or total != _FIXED + body_len + props_len:
                break
            text = buf[props_at + 2 : end].decode()
            props = checked_properties(text)
            if not props.keys().isdisjoint(BATCH_CHECKED) and batch_message_problem(props) is not None:
                break
            uniq = props.get(_UNIQ)
            if not uniq:
                uniq = new_uniq()
                if text and text[-1] != PROPERTY_SEPARATOR:
                    text += PROPERTY_SEPARATOR
                text += f"{_UNIQ}{NAME_VALUE_SEPARATOR}{uniq}{PROPERTY_SEPARATOR}"
            if text and text[-1] != PROPERTY_SEPARATOR and batch_level:
                text += PROPERTY_SEPARATOR
            merged = (text + batch_level).encode()
            if len(merged) > MAX_PROPERTIES_LENGTH:
                break
            uniq_ids.append(uniq)
            bodies.append(view[pos + 20 : props_at])
            flags.append(flag)
            stored_props.append(merged)
            keys.append((level_tags or props.get(_TAGS), level_keys or props.get(_KEYS), level_uniq or uniq))
            pos = end
        else:
            if bodies:
                return BatchToStore(
                    send.topic, queue_id, sys_flag, born_timestamp, born_host, bodies, flags, stored_props, keys
                ), uniq_ids
    except (UnicodeDecodeError, RequestError):
        pass
    messages, uniq_ids = batch_messages_reference(buf, send, new_uniq)
    return BatchToStore.of(messages), uniq_ids


def batch_messages_reference(
    body: bytes, send: BatchSend, new_uniq: Callable[[], str]
) -> tuple[list[MessageToStore], list[str]]:
    """`batch_messages` written plainly: the body decoded (decode_batch_reference), then each message
    checked and built in turn; the error of the first message that fails."""
    try:
        inner = decode_batch_reference(body)
    except BatchFormatError as exc:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {exc}") from None
    messages: list[MessageToStore] = []
    uniq_ids: list[str] = []
    for index, m in enumerate(inner):
        if len(m.body) > send.max_size:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch message {index}: body size {len(m.body)} exceeds the maximum {send.max_size}",
            )
        try:
            props = checked_properties(m.properties)
        except RequestError as exc:
            raise RequestError(exc.code, f"batch message {index}: {exc.remark}") from None
        problem = batch_message_problem(props)
        if problem is not None:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"batch message {index}: {problem}")
        text = m.properties
        uniq = props.get(Prop.UNIQ_KEY)
        if not uniq:
            uniq = new_uniq()
            if text and not text.endswith(PROPERTY_SEPARATOR):
                text += PROPERTY_SEPARATOR
            text += f"{Prop.UNIQ_KEY}{NAME_VALUE_SEPARATOR}{uniq}{PROPERTY_SEPARATOR}"
        uniq_ids.append(uniq)
        merged = merge_batch_properties(text, send.batch_level).encode()
        if len(merged) > MAX_PROPERTIES_LENGTH:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"batch message {index}: properties too long")
        messages.append(
            MessageToStore(
                send.topic, send.queue_id, m.body, m.flag, {}, send.sys_flag, send.born_timestamp, send.born_host,
                0, 0, merged, batch_dispatch_keys(props, uniq, send.batch_props),
            )
        )  # fmt: skip
    return messages, uniq_ids
