"""OffsetWaiters: puts waiting until an offset is covered (flushed to disk, or acknowledged by a slave).

Used by the group commit (broker.store.flush, SYNC_FLUSH) and by SYNC_MASTER replication
(broker.ha.transfer). Puts arrive in CommitLog order and share one timeout, so a deque is sorted both by
offset and by deadline: `resolve(upto)` pops from the left, and one timer for the oldest deadline
replaces a timer per put. A plain future per put (no task) keeps this cheap on the send path.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from broker.store.results import PutResult, PutStatus

__all__ = ["OffsetWaiters"]

log = logging.getLogger(__name__)


class OffsetWaiters:
    def __init__(self, timeout_s: float, timeout_status: PutStatus, what: str) -> None:
        self.timeout_s = timeout_s
        self.timeout_status = timeout_status
        self.what = what  # for the timeout log line, e.g. "flushed" or "acknowledged by a slave"
        self._waiters: collections.deque[tuple[int, float, asyncio.Future[PutResult], PutResult]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._waiters)

    def wait(self, offset: int, result: PutResult) -> asyncio.Future[PutResult]:
        """A future of `result` once `offset` is covered; on timeout its status becomes `timeout_status`."""
        loop = self._loop or self._bind_loop()
        fut: asyncio.Future[PutResult] = loop.create_future()
        deadline = loop.time() + self.timeout_s
        self._waiters.append((offset, deadline, fut, result))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        return fut

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        self._loop = asyncio.get_running_loop()
        return self._loop

    def resolve(self, covered: int) -> None:
        """Everything up to `covered` is done: answer those waiters with their result as it is."""
        waiters = self._waiters
        while waiters and waiters[0][0] <= covered:
            _, _, fut, result = waiters.popleft()
            if not fut.done():
                fut.set_result(result)
        if not waiters and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def fail_all(self, status: PutStatus) -> None:
        """Answer every waiter now with `status` (shutdown, or the service behind them died)."""
        while self._waiters:
            _, _, fut, result = self._waiters.popleft()
            if not fut.done():
                result.status = status
                fut.set_result(result)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        """Answer the timeout status to waiters past their deadline (oldest first), re-arm for the next."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        waiters = self._waiters
        expired = 0
        while waiters and waiters[0][1] <= now:
            _, _, fut, result = waiters.popleft()
            if not fut.done():
                result.status = self.timeout_status
                fut.set_result(result)
            expired += 1
        if expired:
            log.warning(
                "%d puts were not %s within %.1f s: %s", expired, self.what, self.timeout_s, self.timeout_status.name
            )
        if waiters:
            self._timer = loop.call_at(waiters[0][1], self._expire)
