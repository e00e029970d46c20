"""CommitLog recovery at startup: find the end of the valid records and cut everything after it.

Called by MessageStore.start (broker.store.message_store) before any service runs, so it may block.
- Clean stop (no `abort` file and the checkpoint carries the shutdown end offset): no scan at all.
- Clean stop without that offset: scan the last three files.
- Crash (`abort` present): scan from the newest file whose first record is older than the checkpoint's
  timestamps, checking magic, lengths, the record's own PHYSICALOFFSET and (checkCRCOnRecover) BODYCRC.
The first invalid record ends the log: the tail is zeroed, later files are deleted, and one WARNING line
says where and why and how much was dropped. The caller then cuts ConsumeQueues to the new end and
re-dispatches from the report's `scan_from`.
"""

from __future__ import annotations

import logging
import mmap
import struct
from dataclasses import dataclass

from broker.protocol.message import body_crc
from broker.protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BODY_LEN_AT,
    HEAD,
    HOSTS_V6,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGICS,
    MIN_RECORD_SIZE,
    PREFIX,
    PROPS_LEN_SIZE,
    STORE_TIMESTAMP_AT,
)
from broker.store.checkpoint import StoreCheckpoint
from broker.store.mapped_file import MappedFile
from broker.store.mapped_file_queue import MappedFileQueue

__all__ = ["RecoveryReport", "check_record", "recover_commit_log"]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")

END = 0
BLANK = -1


@dataclass(slots=True)
class RecoveryReport:
    abnormal: bool
    scan_from: int  # CommitLog offset where the scan started (= redispatch start after a crash)
    end_offset: int  # new end of the CommitLog
    records: int  # whole records scanned
    dropped_bytes: int  # non-zero bytes zeroed past the end
    dropped_files: int
    reason: str | None  # why the scan stopped before the data's end, None when it ended cleanly
    last_store_timestamp: int = 0


def check_record(
    buf: mmap.mmap | bytes | bytearray | memoryview, pos: int, limit: int, phy: int, check_crc: bool
) -> tuple[int, str | None, int]:
    """Validate the record at `pos`: (size, None, store_ts) for a good one, (END, None, 0) for zeros,
    (BLANK, None, 0) for the end-of-file filler, (END, reason, 0) for anything broken.

    A fast copy of broker.protocol.record_layout.parse_record, held equal to it by
    tests/protocol/test_record_readers.py: recovery runs it on every record of the files it scans, and
    reading only the lengths (nothing is built) kept recovery without a checkpoint at 1.22-1.55 s for
    512 MiB where the reference parser took 1.44-3.15 s, in four alternating pairs (docs/benchmarks.md).
    """
    if pos + PREFIX.size > limit:
        return (END, None, 0)
    total, magic = PREFIX.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return (BLANK, None, 0)
    if total == 0 and magic == 0:
        return (END, None, 0)
    if magic not in MESSAGE_MAGICS:
        return (END, f"bad magic code {magic & 0xFFFFFFFF:#x}", 0)
    if total < MIN_RECORD_SIZE or pos + total > limit:
        return (END, f"record length {total} runs past the file (torn write)", 0)
    end = pos + total
    _, _, crc, _, _, _, physical, sys_flag, _ = HEAD.unpack_from(buf, pos)
    if physical != phy:
        return (END, f"record says it is at offset {physical} (stale or torn data)", 0)
    hosts = sys_flag & HOSTS_V6
    (store_ts,) = _I64.unpack_from(buf, pos + STORE_TIMESTAMP_AT[hosts])
    p = pos + BODY_LEN_AT[hosts] + 4  # the body
    if p > end:
        return (END, "IPv6 hosts run past the record end (torn write)", 0)
    (body_len,) = _I32.unpack_from(buf, p - 4)
    if body_len < 0 or p + body_len > end:
        return (END, f"body length {body_len} does not fit the record (torn write)", 0)
    if check_crc and body_crc(buf[p : p + body_len]) != crc:
        return (END, "BODYCRC mismatch (corrupted or torn body)", 0)
    p += body_len
    length_size = 1 if magic == MESSAGE_MAGIC_CODE else 2
    if p + length_size > end:
        return (END, "topic runs past the record end (torn write)", 0)
    topic_len = buf[p] if length_size == 1 else _U16.unpack_from(buf, p)[0]
    p += length_size + topic_len
    if p + PROPS_LEN_SIZE > end:
        return (END, "topic runs past the record end (torn write)", 0)
    (props_len,) = _U16.unpack_from(buf, p)
    if p + PROPS_LEN_SIZE + props_len != end:
        return (END, "field lengths do not add up to TOTALSIZE (torn write)", 0)
    return (total, None, store_ts)


def _first_store_timestamp(mf: MappedFile) -> int:
    size, _, ts = check_record(mf.mm, 0, mf.file_size, mf.file_from_offset, False)
    return ts if size > 0 else 0


def _choose_scan_start(queue: MappedFileQueue, checkpoint: StoreCheckpoint, with_index: bool) -> int:
    """Index of the file to scan from after a crash (RocketMQ's isMappedFileMatchedRecover)."""
    min_ts = checkpoint.min_timestamp(with_index=with_index)
    if min_ts <= 0:
        return 0
    for i in range(len(queue.files) - 1, -1, -1):
        ts = _first_store_timestamp(queue.files[i])
        if 0 < ts <= min_ts:
            return i
    return 0


def _scan(queue: MappedFileQueue, start: int, check_crc: bool) -> RecoveryReport:
    files = queue.files
    records = 0
    end_offset = files[start].file_from_offset
    last_ts = 0
    reason: str | None = None
    for i in range(start, len(files)):
        mf = files[i]
        pos = 0
        buf = mf.mm
        base = mf.file_from_offset
        size_limit = mf.file_size
        while True:
            size, why, ts = check_record(buf, pos, size_limit, base + pos, check_crc)
            if size > 0:
                pos += size
                records += 1
                last_ts = ts
                continue
            break
        if size == BLANK:
            end_offset = base + mf.file_size
            continue  # the file ended with its filler: go on with the next
        end_offset = base + pos
        reason = why
        break
    return RecoveryReport(False, files[start].file_from_offset, end_offset, records, 0, 0, reason, last_ts)


def recover_commit_log(
    queue: MappedFileQueue,
    checkpoint: StoreCheckpoint,
    *,
    abnormal: bool,
    check_crc: bool = True,
    with_index: bool = True,
) -> RecoveryReport:
    """Set the queue's positions to the recovered end (blocking; startup only)."""
    if not queue.files:
        return RecoveryReport(abnormal, 0, 0, 0, 0, 0, None)
    first, last = queue.files[0], queue.files[-1]
    clean = checkpoint.clean_shutdown_offset
    if not abnormal and first.file_from_offset <= clean <= last.file_from_offset + queue.file_size:
        dropped = _cut(queue, clean)
        log.info("CommitLog: clean shutdown, end offset %d taken from the checkpoint", clean)
        return RecoveryReport(False, clean, clean, 0, 0, dropped, None)
    start = _choose_scan_start(queue, checkpoint, with_index) if abnormal else max(0, len(queue.files) - 3)
    report = _scan(queue, start, check_crc)
    report.abnormal = abnormal
    end = report.end_offset
    holder = queue.find_mapped_file_by_offset(end)
    later = sum(1 for mf in queue.files if mf.file_from_offset > end)
    # how much is thrown away: non-zero bytes past the end in its file (zeroed below), and later files
    zeroed = holder.zero_from(end - holder.file_from_offset) if holder is not None else 0
    report.dropped_bytes = zeroed
    report.dropped_files = _cut(queue, end)
    if report.reason is not None or zeroed or (later and report.dropped_files and abnormal):
        log.warning(
            "CommitLog recovery: kept %d whole records scanned from offset %d; truncated at offset %d "
            "(file %s, position %d) because %s; dropped %d dirty bytes and %d later files",
            report.records,
            report.scan_from,
            end,
            holder.path.name if holder is not None else "-",
            end - holder.file_from_offset if holder is not None else 0,
            report.reason or "the data ends there",
            zeroed,
            report.dropped_files,
        )
    else:
        log.info(
            "CommitLog recovery (%s): %d records scanned from offset %d, end offset %d",
            "after a crash" if abnormal else "normal",
            report.records,
            report.scan_from,
            end,
        )
    return report


def _cut(queue: MappedFileQueue, end: int) -> int:
    """Truncate the queue at `end`; returns how many whole files were deleted."""
    before = len(queue.files)
    queue.truncate_dirty_files(end, zero_tail=False)
    queue.set_positions(end)
    return before - len(queue.files)
