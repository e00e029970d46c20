"""One fixed-size, memory-mapped store file named by its 20-digit start offset.

Used by `MappedFileQueue` (CommitLog and ConsumeQueue files) and by the allocator, which creates files in
a worker thread. Writers on the event loop write straight into `mm` (an `mmap.mmap`) and advance
`wrote_position`; `flush()` (fdatasync) and `create()` (fallocate / zero-fill) block, so callers run them
in an executor.

Disk space is reserved before anything is written into it: a write through the mapping into a hole of a
sparse file would turn a full disk into SIGBUS instead of a clean error. [0, `reserved_to`) has real
blocks (fallocated or zero-filled). A ConsumeQueue file is reserved whole when created; a CommitLog file
is created sparse and reserved ahead of its writer by the allocator's `Reserver` (broker.store.reserve), a
bounded distance, so the disk used follows the data. A writer checks `end > reserve_trigger` (one compare)
and then calls `make_room(end)`, which asks the reserver for more and, when `end` is past `reserved_to`,
reserves the space itself (or reports a full disk).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.log_limit import LimitedLog

__all__ = [
    "OS_PAGE_SIZE",
    "SYNC_RESERVE",
    "MappedFile",
    "file_name_for",
    "page_up",
    "write_zeros",
]

log = logging.getLogger(__name__)
limited_log = LimitedLog(log)

OS_PAGE_SIZE = 4096
# A writer that outran the reserver reserves this much beyond its record itself (fallocate: metadata only)
SYNC_RESERVE = 4 << 20
_ZERO_CHUNK = bytes(1 << 20)
# Zero-filling writes this much at a time. The kernel gives a buffered write a page-cache folio as large as
# the write (ext4 since Linux 6.16, XFS), and a store through the mapping dirties its whole folio: after a
# 1 MiB zero-fill write, each group commit wrote back ~2 MiB for ~40 KiB of records (12.3 GiB reached the
# disk for 260 MB of SYNC_FLUSH sends). With 16 KiB folios a flush writes what it covers, plus a few KiB.
ZERO_FILL_WRITE = 16 << 10
_ZERO_PIECE = bytes(ZERO_FILL_WRITE)


def write_zeros(fd: int, start: int, end: int) -> None:
    """Write zeros over [start, end) of a file in ZERO_FILL_WRITE pieces (blocking: a worker thread).
    Each piece is one short syscall with the GIL released, so the event loop is barely held up."""
    pos = start
    piece = _ZERO_PIECE
    while pos < end:
        n = end - pos
        pos += os.pwrite(fd, piece if n >= ZERO_FILL_WRITE else piece[:n], pos)


def page_up(n: int) -> int:
    return n + (-n % OS_PAGE_SIZE)


def _allocated_prefix(fd: int, size: int) -> int:
    """How far from the start the file has real blocks with no hole (SEEK_HOLE). Conservative: a filesystem
    may report fallocated but unwritten extents as holes, and reserving those again costs nothing."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), size)
    except OSError:
        return 0


def file_name_for(offset: int) -> str:
    """RocketMQ's file name: the start offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


class MappedFile:
    """A mapped file. `wrote_position` is owned by the single writer; `flushed_position` by the flusher."""

    __slots__ = (
        "_closed",
        "_reserve_lock",
        "fd",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "mm",
        "path",
        "reserve_trigger",
        "reserved_to",
        "reserver",
        "store_timestamp",
        "unmapped_to",
        "wrote_position",
    )

    def __init__(self, path: Path, file_size: int) -> None:
        """Map an existing file of exactly `file_size` bytes (use `create` for a new one)."""
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self.fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(self.fd).st_size
            if actual != file_size:
                raise ValueError(f"{path}: size {actual} is not the configured mapped file size {file_size}")
            self.mm = mmap.mmap(self.fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # store timestamp of the last record written (CommitLog only)
        self.unmapped_to = 0  # see unmap_written
        self._reserve_lock = threading.Lock()  # one reservation at a time: the reserver's thread or the writer
        self.reserved_to = _allocated_prefix(self.fd, file_size)
        # A write reaching past this calls make_room; never above reserved_to. The reserver (a CommitLog
        # file's) sets it lower, to be asked for more before the writer gets there.
        self.reserve_trigger = self.reserved_to
        self.reserver: Callable[[MappedFile], None] | None = None
        self._closed = False

    @classmethod
    def create(cls, path: Path, file_size: int, *, warm: bool = False, reserve: int | None = None) -> MappedFile:
        """Create and map a new file (blocking: call from a worker thread on the hot path).

        `reserve` bytes from the start get real blocks now (None: the whole file; the rest stays sparse
        until `reserve`/`make_room`). warm=True zero-fills and fdatasyncs them instead of fallocating, so
        later group commits do not pay for converting unwritten extents (measured +40-50% throughput, 7x
        lower p99). OSError (ENOSPC...) propagates after the partial file is removed, so a full disk leaves
        nothing behind.
        """
        reserved = file_size if reserve is None else min(page_up(reserve), file_size)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, file_size)
            if reserved and warm:
                write_zeros(fd, 0, reserved)
            elif reserved:
                os.posix_fallocate(fd, 0, reserved)
            os.fdatasync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        # rename last: a crash mid-creation never leaves a short file with a valid name behind
        os.rename(tmp, path)
        mf = cls(path, file_size)
        mf.reserved_to = mf.reserve_trigger = max(mf.reserved_to, reserved)
        return mf

    # -- disk space -----------------------------------------------------------------------------------

    def reserve(self, upto: int, *, zero: bool, chunk: int, stop: Callable[[], bool] = lambda: False) -> None:
        """Give [reserved_to, upto) real blocks, `chunk` bytes at a time (blocking: the reserver's thread).

        zero=True writes zeros (see `create`), else fallocates; each chunk is fdatasynced. (Zeros written
        with O_DIRECT measured far worse: the writer's page faults then read the file in large folios, and
        every group commit wrote each one back whole, 40x the records.) A writer that
        needs a chunk being reserved waits for it in `make_room`. OSError (ENOSPC) propagates; what was
        reserved before it stays reserved."""
        upto = min(page_up(upto), self.file_size)
        while self.reserved_to < upto and not stop():
            with self._reserve_lock:
                start = self.reserved_to
                end = min(upto, start + chunk)
                if self._closed or end <= start:
                    return
                self._reserve_range(start, end, zero)
                # the new extents (or zeros) reach the disk here, not in the writer's next flush
                os.fdatasync(self.fd)

    def _reserve_range(self, start: int, end: int, zero: bool) -> None:
        # under _reserve_lock, the file open
        if zero:
            write_zeros(self.fd, start, end)
        else:
            os.posix_fallocate(self.fd, start, end - start)
        self.reserved_to = end
        if self.reserver is None:
            self.reserve_trigger = end

    def make_room(self, end: int) -> bool:
        """A write up to `end` passed `reserve_trigger`: ask the reserver for more, and when `end` is past
        what is reserved, wait for a chunk being reserved or reserve now (fallocate, SYNC_RESERVE beyond
        `end`). False when the disk has no room: nothing may be written then."""
        if self.reserver is not None:
            self.reserver(self)
        if end <= self.reserved_to:
            return True
        with self._reserve_lock:
            if end <= self.reserved_to:
                return True
            if self._closed:
                return False
            try:
                self._reserve_range(self.reserved_to, min(self.file_size, page_up(end + SYNC_RESERVE)), False)
            except OSError as exc:
                limited_log.error("reserve", "cannot reserve disk space in %s for a write: %s", self.path, exc)
                return False
        return True

    # -- positions ------------------------------------------------------------------------------------

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def closed(self) -> bool:
        return self._closed

    def append_bytes(self, data: bytes | memoryview) -> bool:
        """Copy raw bytes at the write position (HA data, tests); False when they don't fit. OSError (ENOSPC)
        when the disk has no room for them."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        if end > self.reserve_trigger and not self.make_room(end):
            raise OSError(errno.ENOSPC, f"no disk space for {len(data)} bytes in {self.path.name}")
        self.mm[pos:end] = data
        self.wrote_position = end
        return True

    def select(self, pos: int, size: int = -1) -> memoryview | None:
        """A view of [pos, pos+size) within what was written; size -1 means up to the write position."""
        wrote = self.wrote_position
        if pos < 0 or pos >= wrote or self._closed:
            return None
        end = wrote if size < 0 else pos + size
        if end > wrote:
            return None
        return memoryview(self.mm)[pos:end]

    def unmap_written(self) -> None:
        """Drop this process's page-table entries of the whole pages written so far (MADV_DONTNEED; the
        data stays in the page cache, dirty pages stay dirty). Call on the writer's thread before a periodic
        flush.

        Why: fdatasync write-protects every dirty page still mapped writable, and on x86 that is one TLB
        shootdown per page (an IPI to each other CPU running this process, a VM exit each here); measured
        ~20% of a busy store's CPU. Pages no longer mapped cost nothing to clean, and one madvise call
        does a single shootdown for all of them. Readers map them back on access (cheap, page cache).
        """
        end = self.wrote_position - self.wrote_position % OS_PAGE_SIZE
        start = self.unmapped_to
        if end > start and not self._closed:
            self.mm.madvise(mmap.MADV_DONTNEED, start, end - start)
            self.unmapped_to = end

    # -- durability (blocking) ------------------------------------------------------------------------

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync when at least `least_pages` dirty pages wait (0: whenever anything waits).

        Blocking: run in the flush executor. fdatasync on the fd also writes back pages dirtied through
        the shared mapping (same page cache), and measured faster than msync here.
        Returns the new flushed position.
        """
        wrote = self.wrote_position
        flushed = self.flushed_position
        if wrote <= flushed or self._closed:
            return flushed
        dirty_pages = wrote // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE
        if least_pages > 0 and dirty_pages < least_pages and wrote < self.file_size:
            return flushed
        os.fdatasync(self.fd)
        self.flushed_position = wrote
        return wrote

    def zero_from(self, pos: int) -> int:
        """Zero every non-zero 1 MiB chunk from `pos` to the end of the file; returns the bytes zeroed.

        Used when truncating a dirty tail, so that a later scan can never take stale bytes (old records
        beyond a torn one) for data. Pages that are already zero are only read, not dirtied.
        """
        zeroed = 0
        mm = self.mm
        end = self.file_size
        while pos < end:
            n = min(len(_ZERO_CHUNK), end - pos)
            zeros = _ZERO_CHUNK if n == len(_ZERO_CHUNK) else _ZERO_CHUNK[:n]
            if mm[pos : pos + n] != zeros:
                mm[pos : pos + n] = zeros
                zeroed += n
            pos += n
        return zeroed

    @property
    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            return int(time.time() * 1000)

    # -- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> bool:
        """Unmap and close; False while a reader still holds a view (retry later)."""
        with self._reserve_lock:  # not while a chunk is being reserved through fd
            if self._closed:
                return True
            try:
                self.mm.close()
            except BufferError:
                return False
            os.close(self.fd)
            self._closed = True
            return True

    def destroy(self) -> bool:
        """Delete the file. The unlink happens at once (the mapping stays valid for readers until released);
        True when the mapping is also gone."""
        self.path.unlink(missing_ok=True)
        done = self.close()
        if done:
            log.info("deleted mapped file %s", self.path)
        return done

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
