"""Keeps the CommitLog's disk space reserved a bounded distance ahead of its writer, in the allocator's thread.

RocketMQ creates each 1 GiB CommitLog file whole, and the next one ahead of need: 2 GiB of disk before the
first message, which a laptop notices. Here a CommitLog file is created sparse, and the `Reserver` gives it
real blocks from the writer's position to `commitLogPreallocateAhead` bytes beyond (128 MiB by default),
crossing into the prepared next file when the writer is that close to the end of its own. So the disk used
is the data plus at most that much, and a full disk still shows as a clean error: the writer never writes
into a hole (`MappedFile.make_room`).

Zero-filled (`warmMapedFileEnable`, on for SYNC_FLUSH masters) the reservation is written zeros, synced
chunk by chunk: group commit into zero-filled extents is ~40% faster than into fallocated (unwritten) ones,
whose every fdatasync also commits the journal; otherwise it is fallocate, metadata only.

The writer asks for more when it passes a file's `reserve_trigger`, which the reserver sets half the
distance short of what it has reserved; the work runs in the allocator's one thread (never the event
loop's, never the flusher's). A writer that outran it waits for the chunk in progress, or fallocates the
little it needs itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor

from broker.log_limit import LimitedLog
from broker.store.mapped_file import OS_PAGE_SIZE, MappedFile, page_up
from broker.store.mapped_file_queue import MappedFileQueue

__all__ = ["ZERO_CHUNK", "Reserver"]

log = logging.getLogger(__name__)
limited_log = LimitedLog(log)

# Zero-filled reservations go in chunks this large, each fdatasynced: a writer that catches up waits for
# at most one, and a group commit meanwhile never waits behind many zero pages.
ZERO_CHUNK = 4 << 20


class Reserver:
    def __init__(
        self,
        queue: MappedFileQueue,
        executor: Executor,
        ahead: int,
        *,
        zero: bool,
        spare: Callable[[], MappedFile | None],
    ) -> None:
        self.queue = queue
        self.ahead = page_up(max(ahead, OS_PAGE_SIZE))
        self.gap = page_up(self.ahead // 2)  # ask for more this far before the reservation ends
        self.zero = zero
        self._executor = executor
        self._spare = spare  # the allocator's prepared next file, when it exists
        self._scheduled = False
        self._stopped = False
        self.runs = 0  # tests and benchmarks

    def attach(self, mf: MappedFile) -> None:
        """Reserve for `mf` (the file the writer is in, or about to be): its first write asks for space."""
        mf.reserver = self.poke
        mf.reserve_trigger = 0

    def poke(self, mf: MappedFile | None = None) -> None:
        """The writer passed a trigger: schedule a run unless one is pending (cheap: called per write then)."""
        if self._scheduled or self._stopped:
            return
        self._scheduled = True
        try:
            self._executor.submit(self.run)
        except RuntimeError:  # the executor is shutting down
            self._scheduled = False

    def stop(self) -> None:
        self._stopped = True

    def run(self) -> None:
        """Reserve [writer, writer + ahead) across the current file and the prepared next one."""
        self._scheduled = False  # a poke from here on schedules another run
        files = self.queue.files
        if not files or self._stopped:
            return
        last = files[-1]
        target = last.file_from_offset + last.wrote_position + self.ahead
        reached = last.file_from_offset + last.reserved_to  # reserved without a hole, as a CommitLog offset
        spare = self._spare()
        reachable = last.file_from_offset + last.file_size + (spare.file_size if spare is not None else 0)
        try:
            for mf in (last, spare):
                if mf is None or (mf is not last and mf.file_from_offset != last.file_from_offset + last.file_size):
                    break  # no next file yet, or not the one right after (the queue moved meanwhile)
                want = min(mf.file_size, target - mf.file_from_offset)
                if want > mf.reserved_to:
                    chunk = ZERO_CHUNK if self.zero else want
                    mf.reserve(want, zero=self.zero, chunk=chunk, stop=lambda: self._stopped)
                reached = mf.file_from_offset + mf.reserved_to
                if mf.reserved_to < mf.file_size:
                    break
        except OSError as exc:  # the writer's own attempt reports the full disk to the sender
            reached = last.file_from_offset + last.reserved_to
            limited_log.warning("reserve-ahead", "cannot reserve CommitLog space ahead of the writer: %s", exc)
        finally:
            self.runs += 1
        # Ask again once the writer comes within `gap` of the end of the reservation (never above what the
        # file itself has reserved: the trigger is also the writer's guard); not at all while everything
        # within reach (this file and the next) is reserved: the roll to the next file asks then.
        if reached >= reachable:
            last.reserve_trigger = last.reserved_to
        else:
            last.reserve_trigger = max(0, min(last.reserved_to, reached - self.gap - last.file_from_offset))
