"""Creates the CommitLog's next mapped file ahead of need, in a worker thread.

Used by CommitLog (broker.store.commit_log): when a file is installed, the allocator starts creating
the following one (fallocate, or zero-fill + fdatasync when warm_mapped_file_enable) in its own
1-thread executor, so a roll costs the event loop nothing but a list append. The first file, created
at start-up, is zero-filled behind the start by a FileWarmer (broker.store.warm) in the same thread.
Zero-filling 1 GiB takes seconds; it must never share a thread with the group-commit fdatasync.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from concurrent.futures import ThreadPoolExecutor

from broker.store.mapped_file import MappedFile, file_name_for
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.warm import FileWarmer

__all__ = ["AllocateService", "is_disk_full"]

log = logging.getLogger(__name__)


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class AllocateService:
    """One file in preparation at a time, for the offset right after the queue's last file."""

    def __init__(self, queue: MappedFileQueue) -> None:
        self.queue = queue
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="store-allocate")
        self._next: asyncio.Future[MappedFile] | None = None
        self._next_offset = -1
        self._warmer: FileWarmer | None = None

    def request_next(self) -> None:
        """Start creating the file after the current last one, unless already under way."""
        offset = self.queue.next_file_offset()
        if self._next is not None and self._next_offset == offset:
            return
        self._discard()
        path = self.queue.directory / file_name_for(offset)
        loop = asyncio.get_running_loop()
        self._next_offset = offset
        self._next = loop.run_in_executor(
            self._executor, lambda: MappedFile.create(path, self.queue.file_size, warm=self.queue.preallocate)
        )
        # a failure is reported by take(); mark it retrieved so asyncio does not log it as lost
        self._next.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def take(self, start_offset: int = 0) -> MappedFile:
        """Install and return the next file (awaiting its creation); raises OSError (ENOSPC...)."""
        if not self.queue.files:
            offset = self.queue.next_file_offset(start_offset)
            path = self.queue.directory / file_name_for(offset)
            self.queue.directory.mkdir(parents=True, exist_ok=True)
            loop = asyncio.get_running_loop()
            # The first file is on the start-up path: fallocate only, which is instant. Zero-filling
            # 1 GiB here would delay "boot success" by seconds; the files after it are zero-filled
            # ahead of need in the background, where group commit gains from it...
            mf = await loop.run_in_executor(
                self._executor, lambda: MappedFile.create(path, self.queue.file_size, warm=False)
            )
            self.queue.install(mf)
            if self.queue.preallocate:  # ...and this one is zero-filled behind the start, ahead of the writer
                self._warmer = mf.warmer = FileWarmer(mf)
                self._executor.submit(self._warmer.run)
            self.request_next()
            return mf
        for attempt in (1, 2):
            self.request_next()
            fut = self._next
            assert fut is not None
            try:
                mf = await fut
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
        self.request_next()
        return mf

    async def ready(self) -> None:
        """Wait until the file being prepared exists (benchmarks: measure without a zero-fill running)."""
        if self._next is not None:
            await asyncio.gather(self._next, return_exceptions=True)

    def release_spare(self) -> bool:
        """Delete the prepared next file to give its space back (a full disk); True when space was freed.

        The spare is speculative; units of acknowledged messages (ConsumeQueue) come first. The next roll
        prepares it again.
        """
        fut = self._next
        if fut is None or not fut.done() or fut.cancelled() or fut.exception() is not None:
            return False
        self._next = None
        fut.result().destroy()
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
        if self._warmer is not None:
            self._warmer.stop()  # at its next chunk; the executor's shutdown below waits for it
        fut = self._next
        if fut is not None:
            try:
                mf = await fut
                mf.destroy()
            except OSError:
                pass
            self._next = None
        self._executor.shutdown(wait=True)
