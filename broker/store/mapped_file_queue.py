"""An ordered run of fixed-size mapped files forming one logical byte stream (global offsets).

Used by the CommitLog (broker.store.commit_log) and by each ConsumeQueue (broker.store.consume_queue).
Files are named by their 20-digit start offset and all have `file_size` bytes. Methods that only touch
memory run on the event loop; `flush`, `get_last_mapped_file(need_create=True)` and the delete methods
touch the disk and are cheap for ConsumeQueue-sized files; the CommitLog calls the blocking ones from a
worker thread (see flush.py and allocate.py) or installs files created elsewhere with `install`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from broker.store.mapped_file import MappedFile, file_name_for

__all__ = ["MappedFileQueue"]

log = logging.getLogger(__name__)

_INT64 = 8


class MappedFileQueue:
    """Files of one stream, oldest first. `flushed_where` is the global offset known to be on disk."""

    def __init__(self, directory: Path, file_size: int, *, preallocate: bool = False) -> None:
        """`preallocate` zero-fills new files (RocketMQ's warmMapedFileEnable); otherwise they are fallocated."""
        self.directory = Path(directory)
        self.file_size = file_size
        self.preallocate = preallocate
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._pending_close: list[MappedFile] = []  # deleted files still viewed by a reader

    # -- loading --------------------------------------------------------------------------------------

    def load(self) -> bool:
        """Map every existing file, oldest first, marked fully written (recovery fixes the tail).

        Returns False when a file has the wrong size (a configuration change or a foreign file).
        Leftover `*.tmp` files from an interrupted creation are removed.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        for tmp in self.directory.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
        names = sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit())
        for i, path in enumerate(names):
            size = path.stat().st_size
            if size < self.file_size and i == len(names) - 1:
                # the newest file was cut short (a crash during creation or a torn copy): pad it with
                # zeros so recovery can scan it and truncate at the last whole record
                log.warning("%s is %d bytes, short of %d: padding with zeros", path, size, self.file_size)
                with open(path, "r+b") as fh:
                    fh.truncate(self.file_size)
                size = self.file_size
            if size != self.file_size:
                log.error("%s is %d bytes, expected %d: check the mapped file size setting", path, size, self.file_size)
                return False
            mf = MappedFile(path, self.file_size)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)
        return True

    # -- lookup ---------------------------------------------------------------------------------------

    def get_first_mapped_file(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True) -> MappedFile | None:
        """The file being written; when there is none or it is full and `need_create`, create the next one.

        `start_offset` places the first file when the queue is empty (aligned down to the file size).
        Creation blocks (fallocate/zero-fill); raises OSError (ENOSPC...) with nothing left behind.
        """
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        if not need_create:
            return last
        mf = MappedFile.create(
            self.directory / file_name_for(self.next_file_offset(start_offset)), self.file_size, warm=self.preallocate
        )
        self.install(mf)
        return mf

    def next_file_offset(self, start_offset: int = 0) -> int:
        """Start offset of the file that would be created next."""
        if self.files:
            return self.files[-1].file_from_offset + self.file_size
        return start_offset - start_offset % self.file_size

    def install(self, mf: MappedFile) -> None:
        """Append a file created elsewhere (the allocator thread); it must continue the stream."""
        expected = self.next_file_offset(mf.file_from_offset)
        if mf.file_from_offset != expected or mf.file_size != self.file_size:
            raise ValueError(f"{mf.path.name} does not continue the queue (expected {file_name_for(expected)})")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.files.append(mf)

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        """The file holding global `offset` (files are contiguous, so this is arithmetic)."""
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return files[0] if return_first_on_not_found else None

    # -- offsets --------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else -1

    @property
    def max_offset(self) -> int:
        """Global offset one past the last written byte."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    def get_max_offset(self) -> int:
        return self.max_offset

    def get_min_offset(self) -> int:
        return self.min_offset

    @property
    def unflushed_bytes(self) -> int:
        return self.max_offset - self.flushed_where

    # -- durability (blocking) ------------------------------------------------------------------------

    def flush(self, least_pages: int = 0) -> bool:
        """Flush the file holding `flushed_where`; returns True when nothing was left to flush.

        Blocking (fdatasync). A flush that finds the file full moves on to the next file on the next call,
        so callers loop until it returns True when they need everything on disk.
        """
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        flushed = mf.flush(least_pages)
        where = mf.file_from_offset + flushed
        self.flushed_where = where
        return where >= self.max_offset

    def unmap_written(self) -> None:
        """`MappedFile.unmap_written` for every file not yet flushed (the writer's thread, before a flush)."""
        for f in self.files:
            if f.file_from_offset + f.file_size > self.flushed_where:
                f.unmap_written()

    def flush_all(self) -> None:
        """Flush until everything written is on disk (blocking)."""
        for _ in range(len(self.files) + 1):
            if self.flush(0):
                return

    # -- truncation and deletion ----------------------------------------------------------------------

    def truncate_dirty_files(self, offset: int, *, zero_tail: bool = True) -> None:
        """Make `offset` the end of the stream: delete whole files beyond it, shorten the one holding it.

        The bytes past `offset` in the kept file are zeroed so that a later scan cannot mistake them for
        records (blocking only for the memset of one file).
        """
        keep: list[MappedFile] = []
        for mf in self.files:
            tail = mf.file_from_offset + self.file_size
            if tail <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                if zero_tail:
                    mf.zero_from(pos)
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                log.info("truncating %s: it lies beyond offset %d", mf.path.name, offset)
                self._destroy(mf)
        self.files = keep
        if self.flushed_where > offset:
            self.flushed_where = offset

    def set_positions(self, offset: int) -> None:
        """After recovery: files before `offset` are full, the one holding it is written up to it."""
        for mf in self.files:
            if mf.file_from_offset + self.file_size <= offset:
                mf.wrote_position = mf.flushed_position = self.file_size
            elif mf.file_from_offset <= offset:
                mf.wrote_position = mf.flushed_position = offset - mf.file_from_offset
        self.flushed_where = offset

    def delete_last_mapped_file(self) -> None:
        if self.files:
            self._destroy(self.files.pop())

    def delete_expired_files_by_time(
        self,
        expired_ms: int,
        *,
        clean_immediately: bool = False,
        max_files: int = 10,
        now_ms: int | None = None,
        may_delete: Callable[[MappedFile], bool] | None = None,
    ) -> int:
        """Delete files (never the last, active one) whose last modification is older than `expired_ms`.

        `clean_immediately` deletes the oldest files regardless of age (disk above its watermark). At most
        `max_files` per call so that one pass never stalls; returns how many were deleted.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        deleted = 0
        for mf in list(self.files[:-1]):
            if deleted >= max_files:
                break
            if not clean_immediately and now < mf.last_modified_ms + expired_ms:
                break  # files are in age order: the rest are younger
            if may_delete is not None and not may_delete(mf):
                break
            self.files.remove(mf)
            self._destroy(mf)
            deleted += 1
        return deleted

    def delete_expired_files_by_offset(self, offset: int, unit_size: int) -> int:
        """ConsumeQueue: delete files (never the last) whose last unit points below CommitLog `offset`."""
        deleted = 0
        for mf in list(self.files[:-1]):
            pos = self.file_size - unit_size
            max_phy = int.from_bytes(mf.mm[pos : pos + _INT64], "big", signed=True)
            if max_phy >= offset:
                break
            self.files.remove(mf)
            self._destroy(mf)
            deleted += 1
        return deleted

    def _destroy(self, mf: MappedFile) -> None:
        if not mf.destroy():
            self._pending_close.append(mf)
        self._pending_close = [p for p in self._pending_close if not p.close()]

    # -- shutdown -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap everything (views still held by readers keep their file mapped until released)."""
        for mf in self.files + self._pending_close:
            if not mf.close():
                log.warning("%s is still viewed by a reader at shutdown", mf.path.name)

    def destroy(self) -> None:
        """Delete every file (topic deletion)."""
        for mf in self.files:
            self._destroy(mf)
        self.files = []
        self.flushed_where = 0
