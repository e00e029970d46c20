"""Creates the CommitLog's next mapped file ahead of need, in a worker thread, and reserves disk space ahead
of the writer there.

Used by CommitLog (broker.store.commit_log): when a file is installed, the allocator starts creating the
following one in its own 1-thread executor, so a roll costs the event loop nothing but a list append.
Files are created sparse (instant); the `Reserver` (broker.store.reserve) gives them real blocks a bounded
distance ahead of the writer (fallocate, or zero-fill + fdatasync when warm_mapped_file_enable), in the
same thread. Zero-filling takes time; it must never share a thread with the group-commit fdatasync.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from broker.store.mapped_file import MappedFile, file_name_for
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.reserve import ZERO_CHUNK, Reserver

__all__ = ["AllocateService", "is_disk_full"]

log = logging.getLogger(__name__)


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class AllocateService:
    """One file in preparation at a time, for the offset right after the queue's last file."""

    def __init__(self, queue: MappedFileQueue, reserve_ahead: int = 128 << 20) -> None:
        """`reserve_ahead`: bytes of disk kept reserved beyond the writer (commitLogPreallocateAhead);
        `queue.preallocate` makes the reservation zero-filled rather than fallocated."""
        self.queue = queue
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="store-allocate")
        # a concurrent future, so the reserver's thread sees the file as soon as it exists (an asyncio
        # future is only marked done when the event loop next turns)
        self._next: Future[MappedFile] | None = None
        self._next_offset = -1
        self.reserver = Reserver(queue, self._executor, reserve_ahead, zero=queue.preallocate, spare=self._spare)

    def _spare(self) -> MappedFile | None:
        fut = self._next
        if fut is None or not fut.done() or fut.cancelled() or fut.exception() is not None:
            return None
        return fut.result()

    def _create(self, path: Path) -> MappedFile:
        # sparse: the reserver gives it blocks when the writer comes within reach
        return MappedFile.create(path, self.queue.file_size, reserve=0)

    def request_next(self) -> None:
        """Start creating the file after the current last one, unless already under way; and make sure the
        reserver looks after the file being written (one loaded at start-up, too)."""
        if self.queue.files and self.queue.files[-1].reserver is None:
            self.reserver.attach(self.queue.files[-1])
        offset = self.queue.next_file_offset()
        if self._next is not None and self._next_offset == offset:
            return
        self._discard()
        path = self.queue.directory / file_name_for(offset)
        self._next_offset = offset
        self._next = self._executor.submit(self._create, path)  # a failure is reported by take()

    async def take(self, start_offset: int = 0) -> MappedFile:
        """Install and return the next file (awaiting its creation); raises OSError (ENOSPC...)."""
        if not self.queue.files:
            offset = self.queue.next_file_offset(start_offset)
            path = self.queue.directory / file_name_for(offset)
            self.queue.directory.mkdir(parents=True, exist_ok=True)
            loop = asyncio.get_running_loop()
            # On the start-up path: only its first chunk reserved now (zero-filled when warm: a few ms), so
            # the first puts neither reserve for themselves nor land in unwritten extents; the reserver
            # fills ahead from here on
            size, warm = self.queue.file_size, self.queue.preallocate
            mf = await loop.run_in_executor(
                self._executor, lambda: MappedFile.create(path, size, warm=warm, reserve=ZERO_CHUNK)
            )
            self.queue.install(mf)
            self.reserver.attach(mf)
            self.request_next()
            self.reserver.poke()
            return mf
        for attempt in (1, 2):
            self.request_next()
            fut = self._next
            assert fut is not None
            try:
                mf = await asyncio.wrap_future(fut)
                break
            except OSError:
                self._next = None
                if attempt == 2:
                    raise
                # space may have been freed since the background attempt: try once more, then report
        self._next = None
        if mf.file_from_offset != self.queue.next_file_offset():
            # the queue moved on meanwhile (truncation by recovery or HA): drop the stale file
            mf.destroy()
            return await self.take(start_offset)
        self.queue.install(mf)
        self.reserver.attach(mf)
        self.request_next()
        self.reserver.poke()
        return mf

    async def ready(self) -> None:
        """Wait until the file being prepared exists and the reservation under way is done (benchmarks:
        measure without a zero-fill running)."""
        if self._next is not None:
            await asyncio.gather(asyncio.wrap_future(self._next), return_exceptions=True)
        # the executor has one thread and runs in order: this runs after any reservation queued before it
        await asyncio.get_running_loop().run_in_executor(self._executor, lambda: None)

    def release_spare(self) -> bool:
        """Delete the prepared next file to give its space back (a full disk); True when space was freed.

        The spare is speculative; units of acknowledged messages (ConsumeQueue) come first. The next roll
        prepares it again.
        """
        spare = self._spare()
        if spare is None or spare.reserved_to == 0:
            return False
        self._next = None
        spare.destroy()
        log.warning("disk full: deleted the prepared CommitLog file to make room for consume queues")
        return True

    def _discard(self) -> None:
        fut, self._next = self._next, None
        if fut is None:
            return
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            fut.result().destroy()
        elif not fut.done():
            fut.add_done_callback(lambda f: None if f.cancelled() or f.exception() else f.result().destroy())

    async def close(self) -> None:
        """Delete a prepared but unused file, so a restart does not find an empty file with a valid name."""
        self.reserver.stop()  # at its next chunk; the executor's shutdown below waits for it
        fut = self._next
        if fut is not None:
            try:
                mf = await asyncio.wrap_future(fut)
                mf.destroy()
            except OSError:
                pass
            self._next = None
        self._executor.shutdown(wait=True)
