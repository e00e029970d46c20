"""Zero-fills a CommitLog file ahead of its writer, in the allocator's worker thread.

The allocator (broker.store.allocate) zero-fills every CommitLog file it prepares ahead of need when the
store asks for warm files (SYNC_FLUSH masters). The first file cannot be: it is created on the start-up
path, where zero-filling 1 GiB would delay "boot success" by 1-4 s. It starts fallocated, and on a
fallocated file every group-commit fdatasync also commits the journal (unwritten extents turning
written): p99 went from 7-8 ms to 28-30 ms with 256 SYNC_FLUSH writers. So a `FileWarmer` zero-fills
that file behind the start, chunk by chunk, far ahead of the write position.

Safety: the warmer never writes where a record is or may be being written. The writer (CommitLog, on
the event loop) first publishes the end of the record it is about to write (`MappedFile.writing_to`),
then checks it against `MappedFile.warm_guard` and, when the record would reach into the chunk being
zeroed, waits for that chunk (`wait`). The warmer publishes the chunk's start in `warm_guard` first and
only then reads `writing_to`; when the writer is within `margin_min` of the chunk, it skips ahead
instead. Either the writer sees the guard and waits, or its record's end is visible to the warmer,
which then leaves that region alone (each step is one bytecode under the GIL). The warmer writes
through its own duplicate descriptor, so a file closed meanwhile is never confused with another file
reusing the number.
"""

from __future__ import annotations

import logging
import os
import threading

from broker.store.mapped_file import NO_GUARD, OS_PAGE_SIZE, MappedFile, write_zeros

__all__ = ["FileWarmer"]

log = logging.getLogger(__name__)

CHUNK = 4 << 20
# fdatasync the zeros this often, so the extents are written before the writer's flushes; small, so a
# group commit meanwhile never waits behind many of them
SYNC_EVERY = 16 << 20


class FileWarmer:
    """Zero-fills [wrote_position + margin, file end) of one file; `run` in a worker thread."""

    def __init__(self, mf: MappedFile, margin: int = CHUNK, margin_min: int = 1 << 20, chunk: int = CHUNK) -> None:
        self.mf = mf
        self.chunk = min(chunk, CHUNK)
        self.margin = margin  # where zero-filling starts (and restarts), ahead of the writer
        self.margin_min = margin_min  # how close the writer may come to the chunk about to be zeroed
        self.lock = threading.Lock()
        self.warmed_from = -1  # where zero-filling started (tests, logs)
        self.warmed_to = -1
        self._stop = False

    def stop(self) -> None:
        self._stop = True

    def wait(self) -> None:
        """Writer side: the record would overlap the chunk being written; wait for that chunk."""
        with self.lock:
            pass

    def _ahead_of_writer(self) -> int:
        pos = max(self.mf.wrote_position, self.mf.writing_to) + self.margin
        return pos + (-pos % OS_PAGE_SIZE)

    def run(self) -> None:
        mf = self.mf
        size = mf.file_size
        try:
            fd = os.dup(mf.fd)
        except OSError:
            return  # closed already
        try:
            pos = self._ahead_of_writer()
            self.warmed_from = pos
            synced = pos
            while pos < size and not self._stop:
                n = min(self.chunk, size - pos)
                with self.lock:
                    mf.warm_guard = pos
                    if max(mf.wrote_position, mf.writing_to) + self.margin_min > pos:
                        mf.warm_guard = NO_GUARD  # the writer came close: jump ahead of it again
                        pos = self._ahead_of_writer()
                        continue
                    try:
                        write_zeros(fd, pos, pos + n)
                    finally:
                        mf.warm_guard = NO_GUARD
                pos += n
                self.warmed_to = pos
                if pos - synced >= SYNC_EVERY or pos >= size:
                    os.fdatasync(fd)
                    synced = pos
        except OSError as exc:  # the file stays fallocated beyond this point: slower flushes, nothing lost
            log.warning("could not zero-fill %s ahead of the writer: %s", mf.path.name, exc)
        finally:
            mf.warm_guard = NO_GUARD
            os.close(fd)
        if not self._stop:
            log.info("zero-filled %s from %d to %d ahead of the writer", mf.path.name, self.warmed_from, pos)
