"""Batch sends: validating a list of messages and splitting it into SEND_BATCH_MESSAGE bodies.

`Producer.send_batch()` calls `split_batches()` so no request body exceeds the limit (4 MiB, the
broker's maxMessageSize), then `encode_batch_body()` for each part. A single message larger than
the limit cannot be sent in any batch and raises MessageTooLarge.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.client.config import DEFAULT_MAX_MESSAGE_SIZE
from broker.client.errors import ClientError, MessageTooLarge
from broker.client.message import Message
from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.properties import Prop, encode_properties

__all__ = ["batch_record_size", "check_batch", "encode_batch_body", "split_batches"]

log = logging.getLogger(__name__)

# TOTALSIZE + MAGICCODE + BODYCRC + FLAG + BODYLEN + PROPLEN.
_RECORD_OVERHEAD = 22


def batch_record_size(msg: Message) -> int:
    """Bytes the message takes inside a batch body."""
    return _RECORD_OVERHEAD + len(msg.body) + len(encode_properties(msg.properties).encode())


def check_batch(messages: Sequence[Message]) -> str:
    """The common topic; raises ClientError for what brokers refuse in a batch."""
    if not messages:
        raise ClientError("a batch needs at least one message")
    topic = messages[0].topic
    wait = messages[0].properties.get(Prop.WAIT, "true")
    for msg in messages:
        if msg.topic != topic:
            raise ClientError(f"a batch must target one topic, got {topic!r} and {msg.topic!r}")
        if msg.topic.startswith("%RETRY%"):
            raise ClientError("retry topics cannot take batches")
        if msg.delay_time_level > 0:
            raise ClientError("delayed messages cannot be sent in a batch")
        if msg.properties.get(Prop.TRAN_MSG) == "true":
            raise ClientError("transactional messages cannot be sent in a batch")
        if msg.properties.get(Prop.WAIT, "true") != wait:
            raise ClientError("all messages of a batch need the same waitStoreMsgOK")
    return topic


def split_batches(messages: Sequence[Message], limit: int = DEFAULT_MAX_MESSAGE_SIZE) -> list[list[Message]]:
    """Greedy split in order: each part's encoded body stays within `limit` bytes."""
    parts: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for msg in messages:
        rec = batch_record_size(msg)
        if rec > limit:
            raise MessageTooLarge(f"a message of {rec} bytes does not fit a batch limit of {limit} bytes")
        if current and size + rec > limit:
            parts.append(current)
            current, size = [], 0
        current.append(msg)
        size += rec
    if current:
        parts.append(current)
    return parts


def encode_batch_body(messages: Sequence[Message]) -> bytes:
    return encode_batch(BatchMessage(m.body, encode_properties(m.properties), m.flag) for m in messages)
