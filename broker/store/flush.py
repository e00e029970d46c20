"""Flushing the CommitLog to disk: group commit for SYNC_FLUSH, a periodic flush for ASYNC_FLUSH, and
the periodic ConsumeQueue/Index/checkpoint flush.

Started by MessageStore (broker.store.message_store). Every fdatasync runs in one dedicated 1-thread
executor, never on the event loop. With SYNC_FLUSH a writer calls `wait_flushed(end_offset, result)` and
awaits a future; the service flushes everything written so far with one fdatasync and resolves every waiter it
covers (measured here: one fdatasync ~0.3 ms, so 256 writers share each one). A waiter not covered
within syncFlushTimeout gets FLUSH_DISK_TIMEOUT (its message is stored and will be flushed later).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import CommitLog
from broker.store.results import PutResult, PutStatus
from broker.store.waiters import OffsetWaiters

__all__ = ["CommitLogFlushService", "LogicsFlushService"]

log = logging.getLogger(__name__)


class CommitLogFlushService:
    """One task; `sync=True` is group commit, otherwise a flush every flushIntervalCommitLog ms."""

    def __init__(
        self,
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        *,
        sync: bool,
        sync_flush_timeout_ms: int,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
    ) -> None:
        self.commit_log = commit_log
        self.queue = commit_log.queue
        self.checkpoint = checkpoint
        self.sync = sync
        self.timeout_s = sync_flush_timeout_ms / 1000
        self.interval_s = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_interval_s = thorough_interval_ms / 1000
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="store-flush")
        self._waiters = OffsetWaiters(self.timeout_s, PutStatus.FLUSH_DISK_TIMEOUT, "flushed")
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False  # close() flushed everything: later puts are answered at once
        self._flushing: concurrent.futures.Future[int] | None = None  # the group commit in the thread
        self._kick_scheduled = False
        self._loop = asyncio.get_running_loop()
        self.flush_count = 0
        self.failed: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.sync:
            return  # group commit is driven by the writers themselves (wait_flushed); no task
        self._task = asyncio.get_running_loop().create_task(self._run_async(), name="store-flush")
        self._task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            self._failed(exc)
        self._waiters.fail_all(PutStatus.FLUSH_DISK_TIMEOUT)

    def _failed(self, exc: BaseException) -> None:
        self.failed = exc
        log.error("CommitLog flush failed; failing %d waiting writers", len(self._waiters), exc_info=exc)

    async def close(self) -> None:
        """Flush everything, answer every waiter, stop the thread."""
        self._closing = True
        self._event.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if self._flushing is not None:
            await asyncio.gather(asyncio.wrap_future(self._flushing), return_exceptions=True)
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, self.queue.flush_all)
        self._waiters.resolve(self.queue.flushed_where)
        self._waiters.fail_all(PutStatus.FLUSH_DISK_TIMEOUT)
        self.executor.shutdown(wait=True)

    # -- group commit ---------------------------------------------------------------------------------

    def wait_flushed(self, offset: int, result: PutResult) -> asyncio.Future[PutResult]:
        """A future of `result` once everything below `offset` is on disk; on timeout its status becomes
        FLUSH_DISK_TIMEOUT (the message is stored and will be flushed later)."""
        if offset <= self.queue.flushed_where:
            return _done(result)
        if self.failed is not None or self._closed:
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
            return _done(result)
        self.request_flush()
        return self._waiters.wait(offset, result)

    def request_flush(self) -> None:
        """Start a group commit at the end of this loop iteration, unless one is running (its completion
        starts the next). Also used alone by puts that do not wait (WAIT=false)."""
        if not self._kick_scheduled and self._flushing is None and not self._closed:
            self._kick_scheduled = True
            self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        """One fdatasync covering everything appended so far, in the flush thread. Its completion comes
        back with one call_soon_threadsafe: no task, so a put's reply waits for the disk and one hop."""
        self._kick_scheduled = False
        if self._flushing is not None or self._closed or not self.sync:
            return
        target = self.commit_log.max_offset
        if target <= self.queue.flushed_where:
            return
        self._flushing = done = self.executor.submit(self._flush_to, target)
        loop = self._loop
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(self._flushed, f))

    def _flushed(self, done: concurrent.futures.Future[int]) -> None:
        self._flushing = None
        self.flush_count += 1
        exc = done.exception()
        if exc is not None:
            self._failed(exc)
            self._waiters.fail_all(PutStatus.FLUSH_DISK_TIMEOUT)
            return
        self._waiters.resolve(done.result())
        if len(self._waiters) and not self._closed:
            self._kick()  # writers came while the disk was busy: their group goes now

    def _flush_to(self, target: int) -> int:
        """Blocking: fdatasync every file until `target` is covered; records the checkpoint timestamp."""
        queue = self.queue
        for _ in range(len(queue.files) + 1):
            if queue.flushed_where >= target:
                break
            mf = queue.find_mapped_file_by_offset(queue.flushed_where, queue.flushed_where == 0)
            ts = mf.store_timestamp if mf is not None else 0
            queue.flush(0)
            if ts:
                self.checkpoint.physic_msg_timestamp = ts
        return queue.flushed_where

    # -- async flush ----------------------------------------------------------------------------------

    def _flush_periodic(self, least_pages: int) -> None:
        queue = self.queue
        mf = queue.find_mapped_file_by_offset(queue.flushed_where, queue.flushed_where == 0)
        ts = mf.store_timestamp if mf is not None else 0
        before = queue.flushed_where
        queue.flush(least_pages)
        if ts and queue.flushed_where != before:
            self.checkpoint.physic_msg_timestamp = ts

    async def _run_async(self) -> None:
        loop = asyncio.get_running_loop()
        last_thorough = time.monotonic()
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), self.interval_s)
            self._event.clear()
            now = time.monotonic()
            least = self.least_pages
            if now - last_thorough >= self.thorough_interval_s:
                least, last_thorough = 0, now
            # a full file is always flushed whole; then the loop continues with the next one
            for _ in range(4):
                before = self.queue.flushed_where
                # Not in the group commit: its few pages' shootdowns cost the event loop less in the flush
                # thread than one madvise here (SYNC_FLUSH sends measured 5% slower with it).
                self.queue.unmap_written()
                await loop.run_in_executor(self.executor, self._flush_periodic, least)
                self.flush_count += 1
                if self.queue.flushed_where == before or self.queue.flushed_where >= self.commit_log.max_offset:
                    break
            self._waiters.resolve(self.queue.flushed_where)


def _done(result: PutResult) -> asyncio.Future[PutResult]:
    fut: asyncio.Future[PutResult] = asyncio.get_running_loop().create_future()
    fut.set_result(result)
    return fut


class LogicsFlushService:
    """Every flushIntervalConsumeQueue ms: flush ConsumeQueues and the index, then the checkpoint.

    `flush_logics` returns the store time the index covers when it may lag dispatch (the index helper
    process), or None when the index is written in step with it.

    The logics timestamp recorded is the store time of the last dispatched record before the flush,
    so a crash scan that starts at min(physic, logics) timestamps rebuilds anything not yet flushed.
    """

    def __init__(
        self,
        flush_logics: Callable[[], int | None],
        last_dispatched_ts: Callable[[], int],
        checkpoint: StoreCheckpoint,
        executor: ThreadPoolExecutor,
        *,
        interval_ms: int,
        index_enabled: bool,
    ) -> None:
        self.flush_logics = flush_logics
        self.last_dispatched_ts = last_dispatched_ts
        self.checkpoint = checkpoint
        self.executor = executor
        self.interval_s = interval_ms / 1000
        self.index_enabled = index_enabled
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="store-flush-logics")

    async def flush_once(self) -> None:
        ts = self.last_dispatched_ts()
        loop = asyncio.get_running_loop()
        index_ts = await loop.run_in_executor(self.executor, self.flush_logics)
        if ts:
            self.checkpoint.logics_msg_timestamp = ts
        if self.index_enabled:
            # an index written by the helper process covers its own (possibly earlier) time
            index_ts = ts if index_ts is None else min(ts, index_ts)
            if index_ts:
                self.checkpoint.index_msg_timestamp = index_ts
        await loop.run_in_executor(self.executor, self.checkpoint.flush)

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
            try:
                await self.flush_once()
            except OSError:
                log.exception("flushing ConsumeQueues / checkpoint failed")

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
