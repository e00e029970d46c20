"""Request headers of the POP codes (reference A.2), parsed like every other header (broker.protocol.headers):
a missing required key or an unparsable number is refused with SYSTEM_ERROR, as Java's checkFields() does."""

from __future__ import annotations

from broker.protocol.headers import Header, header, opt, req

__all__ = [
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "NotificationRequestHeader",
    "PeekMessageRequestHeader",
    "PollingInfoRequestHeader",
    "PopMessageRequestHeader",
]


@header
class PopMessageRequestHeader(Header):
    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    max_msg_nums: int = req("maxMsgNums", "int")
    invisible_time: int = req("invisibleTime", "long")
    poll_time: int = req("pollTime", "long")
    born_time: int = req("bornTime", "long")
    init_mode: int = req("initMode", "int")
    exp_type: str | None = opt("expType")
    exp: str | None = opt("exp")
    order: bool = opt("order", "bool", False)
    attempt_id: str | None = opt("attemptId")


@header
class AckMessageRequestHeader(Header):
    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    extra_info: str = req("extraInfo")
    offset: int = req("offset", "long")


@header
class ChangeInvisibleTimeRequestHeader(Header):
    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    extra_info: str = req("extraInfo")
    offset: int = req("offset", "long")
    invisible_time: int = req("invisibleTime", "long")


@header
class PeekMessageRequestHeader(Header):
    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    max_msg_nums: int = req("maxMsgNums", "int")


@header
class NotificationRequestHeader(Header):
    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    poll_time: int = req("pollTime", "long")
    born_time: int = req("bornTime", "long")
    order: bool = opt("order", "bool", False)
    attempt_id: str | None = opt("attemptId")


@header
class PollingInfoRequestHeader(Header):
    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
