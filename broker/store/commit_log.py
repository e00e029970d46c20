"""The CommitLog: every message of every topic, appended as exact RocketMQ v1 records into mapped files.

Used by MessageStore (broker.store.message_store), which awaits `put_message`/`put_messages`, and by
recovery, reput and HA through `queue`. The event loop is the single writer: an append runs without an
await between reading the write position and advancing it, so no lock is needed; only a roll to a new
file awaits (the allocator's thread), and `_roll_lock` keeps concurrent rollers from racing. Queue
offsets are assigned here, in the same step as the write, from `topic_queue_table`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import zlib

from broker.protocol.message import (
    BLANK_MAGIC_CODE,
    MessageExt,
    SysFlag,
    encode_record,
    host_bytes,
    pack_record_into,
)
from broker.protocol.properties import encode_properties
from broker.store.allocate import AllocateService, is_disk_full
from broker.store.config import StoreConfig
from broker.store.mapped_file import MappedFile
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.results import MessageToStore, PutResult, PutStatus

__all__ = ["END_FILE_MIN_BLANK_LENGTH", "CommitLog"]

log = logging.getLogger(__name__)

END_FILE_MIN_BLANK_LENGTH = 8  # int32 remaining + int32 BLANK_MAGIC_CODE
MAX_TOPIC_LENGTH = 127  # v1 records have a 1-byte topic length
MAX_PROPERTIES_LENGTH = 0x7FFF  # int16 length field
_BLANK = struct.Struct(">ii")
_NOT_QUEUED = (SysFlag.TRANSACTION_PREPARED_TYPE, SysFlag.TRANSACTION_ROLLBACK_TYPE)
_NEED_FILE = object()  # internal: the current file is full (blank written); roll and retry


class CommitLog:
    def __init__(self, config: StoreConfig, store_host: tuple[str, int]) -> None:
        self.config = config
        self.queue = MappedFileQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log, preallocate=config.warm_mapped_file_enable
        )
        self.allocator = AllocateService(self.queue)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.store_ip = host_bytes(store_host[0])
        if len(self.store_ip) != 4:
            raise ValueError("the store host must be an IPv4 address (v1 records, readable by every client)")
        self.store_port = store_host[1]
        self.store_host_prefix = self.store_ip + store_host[1].to_bytes(4, "big", signed=True)
        self.max_message_size = config.max_message_size
        self._topics: dict[str, bytes] = {}
        self._born_ips: dict[str, bytes] = {}
        self._roll_lock = asyncio.Lock()
        self.begin_time_in_lock = 0  # monotonic ns when an append started, 0 when idle (page-cache busy check)

    # -- offsets --------------------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        first = self.queue.get_first_mapped_file()
        return first.file_from_offset if first is not None else -1

    # -- put ------------------------------------------------------------------------------------------

    async def put_message(self, msg: MessageToStore) -> PutResult:
        result = self._append_one(msg)
        if result is _NEED_FILE:
            result = await self._roll_and_retry(lambda: self._append_one(msg))
        assert isinstance(result, PutResult)
        return result

    async def put_messages(self, msgs: list[MessageToStore]) -> PutResult:
        if not msgs:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        result = self._append_batch(msgs)
        if result is _NEED_FILE:
            result = await self._roll_and_retry(lambda: self._append_batch(msgs))
        assert isinstance(result, PutResult)
        return result

    async def _roll_and_retry(self, append: object) -> PutResult:
        async with self._roll_lock:
            for _ in range(3):
                last = self.queue.files[-1] if self.queue.files else None
                if last is None or last.is_full:
                    try:
                        await self.allocator.take()
                    except OSError as exc:
                        status = PutStatus.DISK_FULL if is_disk_full(exc) else PutStatus.CREATE_MAPPED_FILE_FAILED
                        log.error("cannot create CommitLog file at offset %d: %s", self.queue.next_file_offset(), exc)
                        return PutResult(status)
                result = append()  # type: ignore[operator]
                if result is not _NEED_FILE:
                    return result  # type: ignore[no-any-return]
        log.error("a message did not fit into a fresh CommitLog file")
        return PutResult(PutStatus.UNKNOWN_ERROR)

    def _current_file(self) -> MappedFile | None:
        files = self.queue.files
        if not files:
            return None
        mf = files[-1]
        return None if mf.is_full else mf

    def _encode_parts(self, msg: MessageToStore) -> tuple[bytes, bytes] | PutStatus:
        topic = self._topics.get(msg.topic)
        if topic is None:
            topic = msg.topic.encode()
            if not topic or len(topic) > MAX_TOPIC_LENGTH:
                return PutStatus.MESSAGE_ILLEGAL
            if len(self._topics) < 100_000:
                self._topics[msg.topic] = topic
        props = msg.properties_bytes
        if props is None:
            props = encode_properties(msg.properties).encode() if msg.properties else b""
        if len(props) > MAX_PROPERTIES_LENGTH:
            return PutStatus.PROPERTIES_SIZE_EXCEEDED
        if len(msg.body) > self.max_message_size:
            return PutStatus.MESSAGE_ILLEGAL
        return topic, props

    def _born_ip(self, host: str) -> bytes:
        ip = self._born_ips.get(host)
        if ip is None:
            ip = host_bytes(host)
            if len(self._born_ips) < 10_000:
                self._born_ips[host] = ip
        return ip

    def _append_one(self, msg: MessageToStore) -> PutResult | object:
        mf = self._current_file()
        if mf is None:
            return _NEED_FILE
        parts = self._encode_parts(msg)
        if isinstance(parts, PutStatus):
            return PutResult(parts)
        topic, props = parts
        body = msg.body
        total = 91 + len(body) + len(topic) + len(props)
        if total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        pos = mf.wrote_position
        if total + END_FILE_MIN_BLANK_LENGTH > mf.file_size - pos:
            self._write_blank(mf)
            return _NEED_FILE
        key = (msg.topic, msg.queue_id)
        queued = (msg.sys_flag & SysFlag.TRANSACTION_MASK) not in _NOT_QUEUED
        queue_offset = self.topic_queue_table.get(key, 0) if queued else 0
        phy = mf.file_from_offset + pos
        store_ts = time.time_ns() // 1_000_000
        born_ip = self._born_ip(msg.born_host[0])
        if len(born_ip) == 4:
            pack_record_into(
                mf.mm,
                pos,
                total_size=total,
                crc=zlib.crc32(body) & 0x7FFFFFFF,
                queue_id=msg.queue_id,
                flag=msg.flag,
                queue_offset=queue_offset,
                physical_offset=phy,
                sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp,
                born_ip=born_ip,
                born_port=msg.born_host[1],
                store_timestamp=store_ts,
                store_ip=self.store_ip,
                store_port=self.store_port,
                reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset,
                body=body,
                topic=topic,
                properties=props,
            )
        else:
            # IPv6 born host: the general encoder (20-byte host field), rare enough to allocate
            record = self._encode_slow(msg, queue_offset, phy, store_ts)
            total = len(record)
            if total + END_FILE_MIN_BLANK_LENGTH > mf.file_size - pos:
                self._write_blank(mf)
                return _NEED_FILE
            mf.mm[pos : pos + total] = record
        mf.wrote_position = pos + total
        mf.store_timestamp = store_ts
        if queued:
            self.topic_queue_table[key] = queue_offset + 1
        return PutResult(PutStatus.PUT_OK, phy, total, queue_offset, store_ts, 1, (), self.store_host_prefix)

    def _encode_slow(self, msg: MessageToStore, queue_offset: int, phy: int, store_ts: int) -> bytes:
        ext = MessageExt(
            topic=msg.topic,
            body=bytes(msg.body),
            properties=msg.properties,
            flag=msg.flag,
            queue_id=msg.queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=store_ts,
            store_host=(str(self.store_ip[0]) + "." + ".".join(str(b) for b in self.store_ip[1:]), self.store_port),
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            queue_offset=queue_offset,
            commit_log_offset=phy,
        )
        return encode_record(ext)

    def _append_batch(self, msgs: list[MessageToStore]) -> PutResult | object:
        """All messages of a batch share topic and queue and land in one file with consecutive offsets."""
        mf = self._current_file()
        if mf is None:
            return _NEED_FILE
        first = msgs[0]
        encoded: list[tuple[MessageToStore, bytes, bytes, int, bytes]] = []
        needed = 0
        for msg in msgs:
            if msg.topic != first.topic or msg.queue_id != first.queue_id:
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
            parts = self._encode_parts(msg)
            if isinstance(parts, PutStatus):
                return PutResult(parts)
            born_ip = self._born_ip(msg.born_host[0])
            if len(born_ip) != 4:
                return PutResult(PutStatus.MESSAGE_ILLEGAL)  # batches from IPv6 producers: not supported
            total = 91 + len(msg.body) + len(parts[0]) + len(parts[1])
            encoded.append((msg, parts[0], parts[1], total, born_ip))
            needed += total
        if needed + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        pos = mf.wrote_position
        if needed + END_FILE_MIN_BLANK_LENGTH > mf.file_size - pos:
            self._write_blank(mf)
            return _NEED_FILE
        key = (first.topic, first.queue_id)
        queue_offset = self.topic_queue_table.get(key, 0)
        store_ts = time.time_ns() // 1_000_000
        mm = mf.mm
        start_phy = mf.file_from_offset + pos
        offsets: list[int] = []
        for i, (msg, topic, props, total, born_ip) in enumerate(encoded):
            phy = mf.file_from_offset + pos
            offsets.append(phy)
            pack_record_into(
                mm,
                pos,
                total_size=total,
                crc=zlib.crc32(msg.body) & 0x7FFFFFFF,
                queue_id=msg.queue_id,
                flag=msg.flag,
                queue_offset=queue_offset + i,
                physical_offset=phy,
                sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp,
                born_ip=born_ip,
                born_port=msg.born_host[1],
                store_timestamp=store_ts,
                store_ip=self.store_ip,
                store_port=self.store_port,
                reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset,
                body=msg.body,
                topic=topic,
                properties=props,
            )
            pos += total
        mf.wrote_position = pos
        mf.store_timestamp = store_ts
        self.topic_queue_table[key] = queue_offset + len(encoded)
        return PutResult(
            PutStatus.PUT_OK, start_phy, needed, queue_offset, store_ts, len(encoded), offsets, self.store_host_prefix
        )

    def _write_blank(self, mf: MappedFile) -> None:
        pos = mf.wrote_position
        _BLANK.pack_into(mf.mm, pos, mf.file_size - pos, BLANK_MAGIC_CODE)
        mf.wrote_position = mf.file_size

    # -- read -----------------------------------------------------------------------------------------

    def get_data(self, offset: int, size: int = -1) -> memoryview | None:
        """A view of `size` bytes at global `offset` (size -1: to the end of what that file holds)."""
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select(offset - mf.file_from_offset, size)

    def record_size_at(self, offset: int) -> int:
        """TOTALSIZE of the record at `offset` (0 when there is none)."""
        view = self.get_data(offset, 4)
        if view is None:
            return 0
        size = int.from_bytes(view, "big", signed=True)
        view.release()
        return size

    def store_timestamp_at(self, offset: int) -> int:
        """STORETIMESTAMP of the record at `offset`, -1 when it is gone (retention) or unreadable."""
        view = self.get_data(offset, 64)
        if view is None:
            return -1
        try:
            (sys_flag,) = struct.unpack_from(">i", view, 36)
            at = 56 if not sys_flag & SysFlag.BORNHOST_V6 else 68
            (ts,) = struct.unpack_from(">q", view, at)
            return int(ts)
        finally:
            view.release()

    # -- HA slave -------------------------------------------------------------------------------------

    async def append_data(self, offset: int, data: bytes | memoryview) -> bool:
        """Copy replicated bytes at exactly the end of the log; they never cross a file boundary."""
        # An empty slave starts wherever the master's transfer starts (the start of the master's last
        # file, or of its first): any file boundary; otherwise the bytes must continue the log exactly.
        empty_start = not self.queue.files and offset % self.queue.file_size == 0
        if offset != self.max_offset and not empty_start:
            log.warning("HA append at %d refused: the CommitLog ends at %d", offset, self.max_offset)
            return False
        view = memoryview(data)
        while len(view):
            mf = self._current_file()
            if mf is None:
                async with self._roll_lock:
                    if self._current_file() is None:
                        try:
                            await self.allocator.take(offset)
                        except OSError as exc:
                            log.error("cannot create CommitLog file for HA data at %d: %s", offset, exc)
                            return False
                continue
            n = min(len(view), mf.remaining)
            mf.append_bytes(view[:n])
            view = view[n:]
        return True
