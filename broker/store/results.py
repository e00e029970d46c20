"""Result types of the store's API: put/get/query statuses and results, and the message to store.

Returned by MessageStore (broker.store.message_store) to the broker's processors and the HA service;
the send processor maps PutStatus to a response code in one table. Statuses, not exceptions, describe
every expected outcome (RocketMQ's PutMessageStatus / GetMessageStatus).
"""

from __future__ import annotations

import binascii
import enum
import logging
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from broker.protocol.message import MessageExt

__all__ = [
    "PUT_OK",
    "GetResult",
    "GetStatus",
    "MessageToStore",
    "PutResult",
    "PutStatus",
    "QueryResult",
    "StoreError",
]

log = logging.getLogger(__name__)

_OFFSET_ID = struct.Struct(">iq")


class StoreError(Exception):
    """Corruption, I/O failure or a bug: never an expected outcome of a request."""


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    DISK_FULL = "DISK_FULL"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


# The member as a module constant, for the put path: on Python 3.11 every attribute lookup on an Enum class
# goes through EnumType.__getattr__'s hook, several times slower than a module constant, and every put
# looks it up two or three times.
PUT_OK = PutStatus.PUT_OK


# the message was appended (and will be served) even though a durability step did not confirm in time
_STORED = frozenset(
    {PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE}
)


@dataclass(slots=True)
class MessageToStore:
    """A message as the broker hands it to the store.

    `properties` is the dict form; a send processor that already holds the wire's properties string can
    pass it as `properties_bytes` (UTF-8) and skip re-encoding; then `properties` is only consulted when
    `properties_bytes` is None. The send path builds it with positional arguments: keep the field order.
    """

    topic: str
    queue_id: int
    body: bytes | memoryview
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties_bytes: bytes | None = None
    # (TAGS, KEYS, UNIQ_KEY) of `properties_bytes` when the sender already looked them up: the
    # CommitLog's dispatch hint then need not search the properties again
    dispatch_keys: tuple[str | None, str | None, str | None] | None = None

    @classmethod
    def from_stored(
        cls,
        stored: MessageExt,
        *,
        topic: str,
        queue_id: int,
        properties: dict[str, str],
        sys_flag: int | None = None,
        reconsume_times: int | None = None,
        prepared_transaction_offset: int = 0,
    ) -> MessageToStore:
        """A stored message put again (a delivery, a retry, a commit, a renewed half): its body, flag,
        birth time and host kept; topic, queue and properties as given; sysFlag and reconsume times the
        stored ones unless given."""
        return cls(
            topic=topic,
            queue_id=queue_id,
            body=stored.body,
            flag=stored.flag,
            properties=properties,
            sys_flag=stored.sys_flag if sys_flag is None else sys_flag,
            born_timestamp=stored.born_timestamp,
            born_host=stored.born_host,
            reconsume_times=stored.reconsume_times if reconsume_times is None else reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
        )


@dataclass(slots=True)
class BatchToStore:
    """A producer's batch as the send path hands it to the store: what its messages share, once, and each
    message's own fields in parallel lists (no object per message). Stored byte for byte as the list of
    `messages()` would be: one topic and queue, consecutive queue offsets, reconsume times and
    prepared-transaction offset 0."""

    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    bodies: list[bytes | memoryview]
    flags: list[int]
    properties: list[bytes]  # each message's stored properties, UTF-8
    # each message's (TAGS, KEYS, UNIQ_KEY), or None: as MessageToStore.dispatch_keys
    dispatch_keys: list[tuple[str | None, str | None, str | None] | None]

    @classmethod
    def of(cls, messages: list[MessageToStore]) -> BatchToStore:
        """The batch of `messages`, which share the first one's topic, queue, sysFlag, birth time and host
        and carry their properties as bytes (`properties_bytes`)."""
        first = messages[0]
        if any(m.properties_bytes is None for m in messages):
            raise ValueError("a batch's messages carry their properties as bytes")
        return cls(
            first.topic, first.queue_id, first.sys_flag, first.born_timestamp, first.born_host,
            [m.body for m in messages], [m.flag for m in messages],
            [m.properties_bytes or b"" for m in messages], [m.dispatch_keys for m in messages],
        )  # fmt: skip

    def messages(self) -> list[MessageToStore]:
        """The same messages, one object each."""
        fields = zip(self.bodies, self.flags, self.properties, self.dispatch_keys, strict=True)
        return [
            MessageToStore(
                self.topic, self.queue_id, body, flag, {}, self.sys_flag, self.born_timestamp, self.born_host, 0, 0,
                props, keys,
            )
            for body, flag, props, keys in fields
        ]  # fmt: skip


class PutResult(msgspec.Struct, gc=False):
    """Outcome of a put. A msgspec Struct because one is built per put on the hot path: its constructor
    is C (~80 ns here against ~180 for a slotted class's Python __init__); msg_ids are made on demand.
    Not tracked by the GC: its fields never refer back to it."""

    status: PutStatus
    commit_log_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    store_timestamp: int = 0
    message_count: int = 0
    offsets: tuple[int, ...] | list[int] = ()  # commit-log offset of each message (batch); empty for a single put
    store_host: str = ""  # upper-case hex of the 4-byte ip + int32 port: offsetMsgId's prefix

    @property
    def ok(self) -> bool:
        return self.status in _STORED

    @property
    def msg_ids(self) -> list[str]:
        """offsetMsgId of each stored message (upper-case hex of store ip, port, commit-log offset)."""
        if self.commit_log_offset < 0:
            return []
        host = self.store_host
        if not self.offsets:
            return [f"{host}{self.commit_log_offset:016X}"]
        return [f"{host}{o:016X}" for o in self.offsets]

    @property
    def msg_id_text(self) -> bytes:
        """`msg_ids` joined by commas, as a batch's send reply carries them. For an IPv4 store host each id is
        the hex of two 8-byte words, (ip, port) and the offset: a batch's ids are one hex pass over their
        packing, with a comma every 16 bytes."""
        offsets = self.offsets
        if len(self.store_host) != 16 or not offsets or self.commit_log_offset < 0:
            return ",".join(self.msg_ids).encode()
        words = [int(self.store_host, 16)] * (2 * len(offsets))
        words[1::2] = offsets
        return binascii.hexlify(struct.pack(f">{len(words)}Q", *words), b",", 16).upper()

    def with_status(self, status: PutStatus) -> PutResult:
        self.status = status
        return self

    def __repr__(self) -> str:
        return (
            f"PutResult({self.status.name}, offset={self.commit_log_offset}, queue_offset={self.queue_offset}, "
            f"count={self.message_count})"
        )


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """Records of one queue. `buffers` are views into the mapped files: call release() when sent."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    def release(self) -> None:
        for b in self.buffers:
            b.release()
        self.buffers = []


@dataclass(slots=True)
class QueryResult:
    """Records found by key (raw, back to back when joined) and how fresh the index was."""

    buffers: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0

    def release(self) -> None:
        for b in self.buffers:
            b.release()
        self.buffers = []
