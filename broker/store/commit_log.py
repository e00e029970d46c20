"""The CommitLog: every message of every topic, appended as exact RocketMQ v1 records into mapped files.

Used by MessageStore (broker.store.message_store), which calls the synchronous `append_message` /
`append_messages` and awaits `roll_and_retry` only when a file is full, and by recovery, reput and HA
through `queue`. The event loop is the single writer: an append runs without an await between reading
the write position and advancing it, so no lock is needed; only a roll to a new file awaits (the
allocator's thread, which prepares the next file ahead of need), and `_roll_lock` keeps concurrent
rollers from racing. Queue offsets are assigned here, in the same step as the write, from
`topic_queue_table`.

Built with a dispatch sink (broker.store.dispatch_request.DispatchSink; the store's ReputService): each
record written here is handed to `sink.appended` once, in CommitLog order, right after it is written,
with the fields dispatch needs; bytes appended by HA replication are announced with `sink.written`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable

from broker.protocol.crc import crc32  # body_crc's CRC, inlined on the put path (one call less a put)
from broker.protocol.javahash import java_string_hash
from broker.protocol.message import LAYOUT_SYS_FLAGS, NO_QUEUE_OFFSET, MessageExt, encode_record, host_bytes
from broker.protocol.properties import decode_properties, encode_properties
from broker.protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6,
    FIXED_SIZE_V4,
    FIXED_V4_HOSTS,
    MESSAGE_MAGIC_CODE,
    PREFIX,
    PROPS_LEN_SIZE,
    SYS_FLAG_AT,
    store_timestamp_at,
    total_size,
)
from broker.store.allocate import AllocateService, is_disk_full
from broker.store.config import StoreConfig
from broker.store.dispatch_request import DispatchSink, dispatch_fields
from broker.store.mapped_file import MappedFile
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.results import PUT_OK, BatchToStore, MessageToStore, PutResult, PutStatus

__all__ = ["END_FILE_MIN_BLANK_LENGTH", "CommitLog"]

log = logging.getLogger(__name__)

END_FILE_MIN_BLANK_LENGTH = 8  # int32 remaining + int32 BLANK_MAGIC_CODE
MAX_TOPIC_LENGTH = 127  # v1 records have a 1-byte topic length
MAX_PROPERTIES_LENGTH = 0x7FFF  # int16 length field
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NO_LAYOUT_BITS = ~LAYOUT_SYS_FLAGS
# TOTALSIZE = this + body + topic field + properties: the size formula (total_size) of a v1 record with
# IPv4 hosts, less the topic field, which the put path keeps ready with its length byte
_SIZE_BESIDES = total_size(0, 0, 0) - 1
assert _SIZE_BESIDES == FIXED_SIZE_V4 + PROPS_LEN_SIZE


def commit_log_files(config: StoreConfig) -> MappedFileQueue:
    """The CommitLog's mapped files (not loaded yet): the CommitLog writes them, the reput service reads
    them, so the store builds them first and hands them to both."""
    return MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log, preallocate=config.zero_fill())


class CommitLog:
    def __init__(
        self,
        config: StoreConfig,
        store_host: tuple[str, int],
        sink: DispatchSink,
        files: MappedFileQueue | None = None,
    ) -> None:
        self.config = config
        self.queue = files if files is not None else commit_log_files(config)
        self.sink = sink
        self._appended = sink.appended  # once per record: the bound method, looked up once
        self.allocator = AllocateService(self.queue, config.commit_log_preallocate_ahead)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.store_host = store_host
        store_ip = host_bytes(store_host[0])
        if len(store_ip) != 4:
            raise ValueError("the store host must be an IPv4 address (v1 records, readable by every client)")
        # STOREHOST as the record holds it (address, int32 port), packed once
        self.store_host_field = store_ip + store_host[1].to_bytes(4, "big", signed=True)
        # offsetMsgId = hex(store ip + int32 port + int64 offset): the constant part, formatted once
        self.store_host_prefix = self.store_host_field.hex().upper()
        self.max_message_size = config.max_message_size
        self._topics: dict[str, bytes] = {}
        self._born_fields: dict[tuple[str, int], bytes] = {}
        self._roll_lock = asyncio.Lock()
        self._delay_levels = config.delay_levels()
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
        """Append one message, rolling to a new file when needed (tests, HA tools; the store uses append)."""
        result = self.append_message(msg)
        if result is None:
            result = await self.roll_and_retry(lambda: self.append_message(msg))
        return result

    async def put_messages(self, msgs: list[MessageToStore]) -> PutResult:
        result = self.append_messages(msgs)
        if result is None:
            result = await self.roll_and_retry(lambda: self.append_messages(msgs))
        return result

    async def roll_and_retry(self, append: Callable[[], PutResult | None]) -> PutResult:
        """Install the next file (created ahead by the allocator) and call `append` again."""
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
                result = append()
                if result is not None:
                    return result
        log.error("a message did not fit into a fresh CommitLog file")
        return PutResult(PutStatus.UNKNOWN_ERROR)

    def _topic_field(self, topic: str) -> bytes | None:
        """TOPICLEN byte + topic bytes (cached per topic); None when the topic cannot be stored."""
        field = self._topics.get(topic)
        if field is None:
            raw = topic.encode()
            if not raw or len(raw) > MAX_TOPIC_LENGTH:
                return None
            field = bytes((len(raw),)) + raw
            if len(self._topics) < 100_000:
                self._topics[topic] = field
        return field

    def _born_field(self, born_host: tuple[str, int]) -> bytes:
        """BORNHOST as the record holds it: address (4 or 16 bytes) and int32 port, cached per producer
        connection (a bounded number of them)."""
        field = self._born_fields.get(born_host)
        if field is None:
            field = host_bytes(born_host[0]) + born_host[1].to_bytes(4, "big", signed=True)
            if len(self._born_fields) < 10_000:
                self._born_fields[born_host] = field
        return field

    def append_message(self, msg: MessageToStore) -> PutResult | None:
        """Append one message now, without awaiting: the store's hot path.

        Encodes straight into the mapped file (one struct pack for the fixed part, three slice copies)
        and assigns the queue offset in the same step. Returns None when the current file cannot take
        the record (a blank record then closes it, or there is no file yet): the caller rolls with
        `roll_and_retry`. Refusals come back as a PutResult carrying their status.
        """
        files = self.queue.files
        if not files:
            return None
        mf = files[-1]
        pos = mf.wrote_position
        file_size = mf.file_size
        if pos >= file_size:
            return None
        topic = msg.topic
        topic_field = self._topics.get(topic) or self._topic_field(topic)
        if topic_field is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        props = msg.properties_bytes
        if props is None:
            props = encode_properties(msg.properties).encode() if msg.properties else b""
        body = msg.body
        body_len = len(body)
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
        if body_len > self.max_message_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        total = _SIZE_BESIDES + body_len + len(topic_field) + props_len
        if total + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
            if total + END_FILE_MIN_BLANK_LENGTH > file_size:
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
            return self._write_blank(mf)
        born = msg.born_host
        born_field = self._born_fields.get(born) or self._born_field(born)
        # The store owns the layout bits: whatever the caller passed, this record's hosts decide them
        sys_flag = msg.sys_flag & _NO_LAYOUT_BITS
        queue_id = msg.queue_id
        queued = not sys_flag & NO_QUEUE_OFFSET
        key = (topic, queue_id)
        table = self.topic_queue_table
        queue_offset = table.get(key, 0) if queued else 0
        phy = mf.file_from_offset + pos
        store_ts = time.time_ns() // 1_000_000
        if len(born_field) == 8:  # an IPv4 producer
            end = pos + total
            if end > mf.reserve_trigger and not mf.make_room(end):  # disk space: see broker.store.reserve
                return PutResult(PutStatus.DISK_FULL)
            mm = mf.mm
            FIXED_V4_HOSTS.pack_into(
                mm, pos, total, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, msg.flag,
                queue_offset, phy, sys_flag, msg.born_timestamp, born_field, store_ts, self.store_host_field,
                msg.reconsume_times, msg.prepared_transaction_offset, body_len,
            )  # fmt: skip
            p = pos + FIXED_SIZE_V4 + body_len
            mm[pos + FIXED_SIZE_V4 : p] = body
            mm[p:end] = topic_field + props_len.to_bytes(2, "big") + props
        else:
            # IPv6 born host: the general encoder (20-byte host field), rare enough to allocate
            record = self._encode_slow(msg, queue_offset, phy, store_ts)
            sys_flag |= BORNHOST_V6  # as the record says (the store host is IPv4)
            total = len(record)
            if total + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
                return self._write_blank(mf)
            end = pos + total
            if end > mf.reserve_trigger and not mf.make_room(end):
                return PutResult(PutStatus.DISK_FULL)
            mf.mm[pos:end] = record
        mf.wrote_position = end
        mf.store_timestamp = store_ts
        if queued:
            table[key] = queue_offset + 1
        known = msg.dispatch_keys  # (TAGS, KEYS, UNIQ_KEY) when the send path looked them up
        found: tuple[object, str | None, str | None]
        if known is not None:
            tags = known[0]
            code = java_string_hash(tags) if tags else 0  # tags_code, without its call
            found = known
        else:
            fields = dispatch_fields(topic, props.decode(), store_ts, self._delay_levels)
            code = fields[0]
            found = fields
        self._appended(key, phy, total, code, store_ts, queue_offset, sys_flag, found, msg.prepared_transaction_offset)
        return PutResult(PUT_OK, phy, total, queue_offset, store_ts, 1, (), self.store_host_prefix)

    def _encode_slow(self, msg: MessageToStore, queue_offset: int, phy: int, store_ts: int) -> bytes:
        ext = MessageExt(
            topic=msg.topic,
            body=bytes(msg.body),
            properties=msg.properties
            if msg.properties_bytes is None
            else decode_properties(msg.properties_bytes.decode()),
            flag=msg.flag,
            queue_id=msg.queue_id,
            sys_flag=msg.sys_flag & _NO_LAYOUT_BITS,  # encode_record sets the host bits it writes
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=store_ts,
            store_host=self.store_host,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            queue_offset=queue_offset,
            commit_log_offset=phy,
        )
        return encode_record(ext)

    def append_messages(self, msgs: list[MessageToStore]) -> PutResult | None:
        """A batch: same topic and queue, one file, consecutive queue offsets (None: roll, as above).

        The records are those `append_message` writes for each message in turn, with one store timestamp."""
        if not msgs:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        first = msgs[0]
        topic, queue_id = first.topic, first.queue_id
        props_list: list[bytes] = []
        born_fields: list[bytes] = []
        for msg in msgs:
            if msg.topic != topic or msg.queue_id != queue_id:
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
            props = msg.properties_bytes
            if props is None:
                props = encode_properties(msg.properties).encode() if msg.properties else b""
            props_list.append(props)
            born_fields.append(self._born_fields.get(msg.born_host) or self._born_field(msg.born_host))
        sys_flags = [msg.sys_flag & _NO_LAYOUT_BITS for msg in msgs]
        prepared = [msg.prepared_transaction_offset for msg in msgs]
        return self._append_run(
            topic, queue_id, [msg.body for msg in msgs], [msg.flag for msg in msgs], props_list, sys_flags,
            [msg.born_timestamp for msg in msgs], born_fields, [msg.reconsume_times for msg in msgs], prepared,
            [msg.dispatch_keys for msg in msgs],
            len(set(born_fields)) == 1 and len(set(sys_flags)) == 1 and not any(prepared),
        )  # fmt: skip

    def append_batch(self, batch: BatchToStore) -> PutResult | None:
        """A producer's batch (BatchToStore), stored as `append_messages` of its `messages()` (None: roll)."""
        n = len(batch.bodies)
        if not n:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        born = batch.born_host
        born_field = self._born_fields.get(born) or self._born_field(born)
        return self._append_run(
            batch.topic, batch.queue_id, batch.bodies, batch.flags, batch.properties,
            [batch.sys_flag & _NO_LAYOUT_BITS] * n, [batch.born_timestamp] * n, [born_field] * n, None, None,
            batch.dispatch_keys, True,
        )  # fmt: skip

    def _append_run(
        self,
        topic: str,
        queue_id: int,
        bodies: list[bytes | memoryview],
        flags: list[int],
        props_list: list[bytes],
        sys_flags: list[int],
        born_timestamps: list[int],
        born_fields: list[bytes],
        reconsumes: list[int] | None,
        prepared: list[int] | None,
        keys: list[tuple[str | None, str | None, str | None] | None],
        uniform: bool,
    ) -> PutResult | None:
        """Records of one queue, back to back, from their fields in parallel lists (reconsume times and
        prepared offsets None: all 0). `uniform`: one born host and sysFlag, no prepared offset, so the
        ConsumeQueue units go to the sink as one run (`DispatchSink.appended_run`)."""
        files = self.queue.files
        if not files or files[-1].is_full:
            return None
        mf = files[-1]
        topic_field = self._topics.get(topic) or self._topic_field(topic)
        if topic_field is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        max_size = self.max_message_size
        for body, props, born in zip(bodies, props_list, born_fields, strict=True):
            if len(props) > MAX_PROPERTIES_LENGTH:
                return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
            if len(body) > max_size or len(born) != 8:  # batches from IPv6 producers: not supported
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
        fixed_size = _SIZE_BESIDES + len(topic_field)
        totals = [fixed_size + len(body) + len(props) for body, props in zip(bodies, props_list, strict=True)]
        needed = sum(totals)
        n = len(totals)
        if needed + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        pos = mf.wrote_position
        if needed + END_FILE_MIN_BLANK_LENGTH > mf.file_size - pos:
            return self._write_blank(mf)
        key = (topic, queue_id)
        queue_offset = self.topic_queue_table.get(key, 0)
        store_ts = time.time_ns() // 1_000_000
        if pos + needed > mf.reserve_trigger and not mf.make_room(pos + needed):
            return PutResult(PutStatus.DISK_FULL)
        mm = mf.mm
        base = mf.file_from_offset
        start_phy = base + pos
        offsets: list[int] = []
        pack_into = FIXED_V4_HOSTS.pack_into
        host_field = self.store_host_field
        zeros = [0] * n
        cq_offset = queue_offset
        for body, flag, props, total, sys_flag, born_ts, born, reconsume, prepared_offset in zip(
            bodies, flags, props_list, totals, sys_flags, born_timestamps, born_fields, reconsumes or zeros,
            prepared or zeros, strict=True,
        ):  # fmt: skip
            phy = base + pos
            offsets.append(phy)
            body_len = len(body)
            pack_into(
                mm, pos, total, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag, cq_offset, phy,
                sys_flag, born_ts, born, store_ts, host_field, reconsume, prepared_offset, body_len,
            )  # fmt: skip
            p = pos + FIXED_SIZE_V4 + body_len
            mm[pos + FIXED_SIZE_V4 : p] = body
            pos += total
            mm[p:pos] = topic_field + len(props).to_bytes(2, "big") + props
            cq_offset += 1
        mf.wrote_position = pos
        mf.store_timestamp = store_ts
        self.topic_queue_table[key] = cq_offset
        codes: list[int] = []
        founds: list[tuple[object, str | None, str | None]] = []
        last_tags: str | None = None
        last_code = 0
        for known, props in zip(keys, props_list, strict=True):
            if known is not None:  # (TAGS, KEYS, UNIQ_KEY) as the send path looked them up
                tags = known[0]
                if tags != last_tags:  # a batch's messages mostly share their tags: hashed once
                    last_tags = tags
                    last_code = java_string_hash(tags) if tags else 0
                codes.append(last_code)
                founds.append(known)
            else:
                fields = dispatch_fields(topic, props.decode(), store_ts, self._delay_levels)
                codes.append(fields[0])
                founds.append(fields)
        if uniform:
            self.sink.appended_run(key, offsets, totals, codes, store_ts, queue_offset, sys_flags[0], founds)
        else:
            appended = self._appended
            for i, phy in enumerate(offsets):
                appended(
                    key, phy, totals[i], codes[i], store_ts, queue_offset + i, sys_flags[i], founds[i],
                    prepared[i] if prepared else 0,
                )  # fmt: skip
        return PutResult(PUT_OK, start_phy, needed, queue_offset, store_ts, n, offsets, self.store_host_prefix)

    def _current_file(self) -> MappedFile | None:
        files = self.queue.files
        if not files:
            return None
        mf = files[-1]
        return None if mf.is_full else mf

    def _write_blank(self, mf: MappedFile) -> PutResult | None:
        """Close `mf` with a blank record (None: roll to the next file), or DISK_FULL when even that fails."""
        pos = mf.wrote_position
        end = pos + END_FILE_MIN_BLANK_LENGTH  # only the blank's header is written; the rest stays a hole
        if end > mf.reserve_trigger and not mf.make_room(end):
            return PutResult(PutStatus.DISK_FULL)
        PREFIX.pack_into(mf.mm, pos, mf.file_size - pos, BLANK_MAGIC_CODE)
        mf.wrote_position = mf.file_size
        return None

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
        view = self.get_data(offset, store_timestamp_at(BORNHOST_V6) + 8)  # enough for either born host
        if view is None:
            return -1
        try:
            (sys_flag,) = _I32.unpack_from(view, SYS_FLAG_AT)
            (ts,) = _I64.unpack_from(view, store_timestamp_at(sys_flag))
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
        try:
            return await self._append_replicated(offset, view)
        finally:
            if self.max_offset > offset:
                self.sink.written(self.max_offset)  # the sink reads these records from the files

    async def _append_replicated(self, offset: int, view: memoryview) -> bool:
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
            try:
                mf.append_bytes(view[:n])
            except OSError as exc:
                log.error("cannot store HA data at %d: %s", mf.file_from_offset + mf.wrote_position, exc)
                return False
            view = view[n:]
        return True
