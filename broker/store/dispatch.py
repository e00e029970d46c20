"""Reput: reads CommitLog records from `reput_from_offset` and feeds the ConsumeQueues, the IndexFile
and the arrival listeners (long polling).

Started by MessageStore (broker.store.message_store). The put path calls `notify()` after each append;
the service wakes, parses every new whole record straight from the mapped file (one struct unpack of the
fixed part per record, properties parsed only when the record has them), and hands a `DispatchRequest` to
`consume_queue_store.dispatch(request)` and `index_service.dispatch(request)`. Recovery uses the same
parser (`parse_record`) with CRC checking on, and `dispatch_range` to rebuild ConsumeQueue/Index tails.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol.javahash import tags_code as java_tags_code
from broker.protocol.message import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, SysFlag
from broker.protocol.properties import Prop, decode_properties

if TYPE_CHECKING:
    from broker.store.commit_log import CommitLog

__all__ = [
    "BLANK",
    "CORRUPT",
    "SCHEDULE_TOPIC",
    "ArrivalListener",
    "DispatchRequest",
    "Dispatcher",
    "ReputService",
    "parse_record",
]

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BLANK = -1  # parse_record: end-of-file blank record (skip to the next file)
CORRUPT = -2  # parse_record: not a whole valid record (end of data, torn write or bad CRC)

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTS
_HEAD = struct.Struct(">iiiiiqqiq")
_FIXED_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")  # up to and including BODYLEN, IPv4 hosts
_SYS_FLAG = struct.Struct(">i")
_HOSTS_V6 = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_PREPARED_OR_ROLLBACK = (SysFlag.TRANSACTION_PREPARED_TYPE, SysFlag.TRANSACTION_ROLLBACK_TYPE)


@dataclass(slots=True)
class DispatchRequest:
    """One stored record as the dispatchers see it (RocketMQ's DispatchRequest).

    `keys` is the raw KEYS property (space-separated), `uniq_key` the UNIQ_KEY property; `tags_code` is
    already computed (Java String.hashCode of TAGS, or the delivery time in SCHEDULE_TOPIC_XXXX).
    PREPARED/ROLLBACK transaction records carry their sys_flag: ConsumeQueueStore skips them.
    """

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None = None
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def is_transaction_prepared_or_rollback(self) -> bool:
        return (self.sys_flag & SysFlag.TRANSACTION_MASK) in _PREPARED_OR_ROLLBACK


class Dispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...


ArrivalListener = Callable[[str, int, int, int, "dict[str, str] | None"], Any]


def parse_record(
    buf: Any, pos: int, limit: int, *, check_crc: bool, delay_levels: dict[int, int] | None = None
) -> tuple[int, DispatchRequest | None]:
    """Parse the record at `pos` of a file's buffer, reading no further than `limit` (the written end).

    Returns (size, request): (size>0, request) for a whole valid record, (BLANK, None) for the
    end-of-file filler, (0, None) when nothing was written here yet (zeros / end of data), and
    (CORRUPT, None) for a torn or corrupted record. The physical offset comes from the record itself.
    """
    if pos + 8 > limit:
        return (0, None)
    total, magic = struct.unpack_from(">ii", buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return (BLANK, None)
    if total == 0 and magic == 0:
        return (0, None)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or total < 91 or pos + total > limit:
        return (CORRUPT, None)
    end = pos + total
    try:
        if magic == MESSAGE_MAGIC_CODE and not sys_flag_v6(buf, pos):
            # the common case in one unpack: v1 magic, IPv4 hosts
            (_, _, crc, queue_id, _f, queue_offset, phy, sys_flag, _b, _bh, store_ts, _sh, _r, prepared_offset,
             body_len) = _FIXED_V4.unpack_from(buf, pos)  # fmt: skip
            p = pos + 88
        else:
            _, _, crc, queue_id, _flag, queue_offset, phy, sys_flag, _born = _HEAD.unpack_from(buf, pos)
            p = pos + 48 + (20 if sys_flag & SysFlag.BORNHOST_V6 else 8)
            (store_ts,) = _I64.unpack_from(buf, p)
            p += 8 + (20 if sys_flag & SysFlag.STOREHOST_V6 else 8)
            (prepared_offset,) = _I64.unpack_from(buf, p + 4)
            p += 12
            (body_len,) = _I32.unpack_from(buf, p)
            p += 4
        if body_len < 0 or p + body_len > end:
            return (CORRUPT, None)
        if check_crc and (zlib.crc32(buf[p : p + body_len]) & 0x7FFFFFFF) != crc:
            return (CORRUPT, None)
        p += body_len
        if magic == MESSAGE_MAGIC_CODE:
            topic_len = buf[p]
            p += 1
        else:
            (topic_len,) = _U16.unpack_from(buf, p)
            p += 2
        topic = buf[p : p + topic_len].decode()
        p += topic_len
        (props_len,) = _U16.unpack_from(buf, p)
        p += 2
        if p + props_len != end:
            return (CORRUPT, None)
        props = decode_properties(buf[p:end].decode()) if props_len else {}
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        return (CORRUPT, None)
    tags = props.get(Prop.TAGS)
    code = java_tags_code(tags) if tags else 0
    if topic == SCHEDULE_TOPIC and delay_levels is not None:
        level = props.get(Prop.DELAY)
        if level is not None and level.isdigit():
            code = store_ts + delay_levels.get(int(level), 0)
    return (
        total,
        DispatchRequest(
            topic=topic,
            queue_id=queue_id,
            commit_log_offset=phy,
            msg_size=total,
            tags_code=code,
            store_timestamp=store_ts,
            consume_queue_offset=queue_offset,
            keys=props.get(Prop.KEYS),
            uniq_key=props.get(Prop.UNIQ_KEY),
            sys_flag=sys_flag,
            prepared_transaction_offset=prepared_offset,
            properties=props,
        ),
    )


def sys_flag_v6(buf: Any, pos: int) -> bool:
    """True when the record at `pos` has an IPv6 born or store host (a longer fixed part)."""
    return bool(_SYS_FLAG.unpack_from(buf, pos + 36)[0] & _HOSTS_V6)


class ReputService:
    """Owns one task that dispatches everything between `reput_from_offset` and the CommitLog's end."""

    def __init__(
        self,
        commit_log: CommitLog,
        dispatchers: list[Dispatcher],
        *,
        delay_levels: dict[int, int] | None = None,
    ) -> None:
        self.commit_log = commit_log
        self.dispatchers = dispatchers
        self.delay_levels = delay_levels
        self.listeners: list[ArrivalListener] = []
        self.reput_from_offset = 0
        self.last_dispatch_timestamp = 0
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def notify(self) -> None:
        self._event.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="store-reput")
        self._task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("reput service died", exc_info=task.exception())

    async def close(self) -> None:
        """Dispatch what is left, then stop."""
        self._closing = True
        self._event.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self.dispatch_available()

    async def _run(self) -> None:
        while not self._closing:
            await self._event.wait()
            self._event.clear()
            self.dispatch_available()

    @property
    def behind(self) -> int:
        return self.commit_log.max_offset - self.reput_from_offset

    def dispatch_available(self, *, notify_listeners: bool = True, limit: int | None = None) -> int:
        """Dispatch every whole record up to the CommitLog's written end (or `limit`); returns how many."""
        end = self.commit_log.max_offset if limit is None else limit
        count = 0
        queue = self.commit_log.queue
        listeners = self.listeners if notify_listeners else []
        dispatchers = self.dispatchers
        delay_levels = self.delay_levels
        while self.reput_from_offset < end:
            offset = self.reput_from_offset
            mf = queue.find_mapped_file_by_offset(offset)
            if mf is None:
                # before the first file (retention moved it): jump forward
                first = queue.get_first_mapped_file()
                if first is None or first.file_from_offset <= offset:
                    break
                self.reput_from_offset = first.file_from_offset
                continue
            pos = offset - mf.file_from_offset
            file_end = min(mf.wrote_position, end - mf.file_from_offset)
            buf = mf.mm
            while pos < file_end:
                size, req = parse_record(buf, pos, file_end, check_crc=False, delay_levels=delay_levels)
                if req is None:
                    if size == BLANK:
                        pos = mf.file_size
                    elif size == CORRUPT:
                        log.error("reput: unreadable record at CommitLog offset %d", mf.file_from_offset + pos)
                    break
                for d in dispatchers:
                    d.dispatch(req)
                self.last_dispatch_timestamp = req.store_timestamp
                for listener in listeners:
                    try:
                        listener(req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code, req.properties)
                    except Exception:  # a listener bug must not stop dispatch
                        log.exception("arrival listener failed")
                pos += size
                count += 1
            new_offset = mf.file_from_offset + pos
            if new_offset == self.reput_from_offset:
                break
            self.reput_from_offset = new_offset
        return count
