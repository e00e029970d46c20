"""Value types the SDK exchanges with applications: Message, MessageQueue, results and enums.

Built by applications (Message) and returned by the producer (SendResult) and consumers
(PullResult, the listener's ConsumeStatus). Received messages are broker.protocol.message.MessageExt,
the stored-record type, re-exported here so applications need one import.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

from broker.protocol.message import MessageExt
from broker.protocol.properties import Prop

__all__ = [
    "ConsumeFromWhere",
    "ConsumeStatus",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
]

log = logging.getLogger(__name__)


class Message:
    """A message to send. Tags, keys, delay level and WAIT live in `properties`, as in Java."""

    __slots__ = ("body", "flag", "properties", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes | str = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        delay_time_level: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> None:
        self.topic = topic
        self.body = body.encode() if isinstance(body, str) else bytes(body)
        self.flag = flag
        self.properties: dict[str, str] = dict(properties or {})
        if tags:
            self.properties[Prop.TAGS] = tags
        if keys:
            self.keys = [keys] if isinstance(keys, str) else list(keys)
        if delay_time_level > 0:
            self.properties[Prop.DELAY] = str(delay_time_level)
        if not wait_store_msg_ok:
            self.properties[Prop.WAIT] = "false"

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, body={len(self.body)} bytes)"

    @property
    def tags(self) -> str | None:
        return self.properties.get(Prop.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value:
            self.properties[Prop.TAGS] = value
        else:
            self.properties.pop(Prop.TAGS, None)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(Prop.KEYS, "").split(" ") if k]

    @keys.setter
    def keys(self, value: Iterable[str]) -> None:
        joined = " ".join(k for k in value if k)
        if joined:
            self.properties[Prop.KEYS] = joined
        else:
            self.properties.pop(Prop.KEYS, None)

    @property
    def delay_time_level(self) -> int:
        return int(self.properties.get(Prop.DELAY, "0") or 0)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(Prop.UNIQ_KEY)

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = value


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group. Ordered (topic, broker, id) like Java's compareTo."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MessageQueue:
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


class SendStatus(Enum):
    """Every status means the broker stored the message; anything else is an exception."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    #: UNIQ_KEY (comma-joined for a batch): the id applications and queryMsgById use.
    msg_id: str
    #: storeHost + commit-log offset id from the broker (comma-joined for a batch).
    offset_msg_id: str
    message_queue: MessageQueue
    #: consume-queue offset (of the first message, for a batch).
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None


class PullStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


class ConsumeStatus(Enum):
    """What a listener returns. Orderly listeners may also return SUSPEND_CURRENT_QUEUE_A_MOMENT
    (RECONSUME_LATER means the same there): the batch is retried in place after a pause."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class MessageModel(IntEnum):
    """Ordinals as C++ sends them in heartbeats; names as Java sends them."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(IntEnum):
    """Where a group without a committed offset starts (ordinals of the Java enum)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5
