"""GroupTransfer: SYNC_MASTER puts wait here until a slave acknowledged their end offset.

The master service (broker.ha.master) hands the store's `wait_acked` to `wait(end_offset, result)`, and
calls `acked_to(offset)` whenever a slave's report raises the highest acknowledged offset
(push2SlaveMaxOffset). A put's future resolves to its result, with FLUSH_SLAVE_TIMEOUT when
haSyncTimeout ran out first (Java's GroupTransferService, without its polling).
"""

from __future__ import annotations

import asyncio

from broker.store.results import PutResult, PutStatus
from broker.store.waiters import OffsetWaiters

__all__ = ["GroupTransfer"]


class GroupTransfer:
    def __init__(self, timeout_s: float) -> None:
        self._waiters = OffsetWaiters(timeout_s, PutStatus.FLUSH_SLAVE_TIMEOUT, "acknowledged by a slave")
        self.acked = 0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def wait(self, end_offset: int, result: PutResult) -> PutResult | asyncio.Future[PutResult]:
        if self.acked >= end_offset:
            return result
        return self._waiters.wait(end_offset, result)

    def acked_to(self, offset: int) -> None:
        """A slave acknowledged `offset`: answer every put ending at or before it."""
        if offset > self.acked:
            self.acked = offset
            self._waiters.resolve(offset)

    def fail_all(self, status: PutStatus) -> None:
        """Shutdown: answer every waiting put now."""
        self._waiters.fail_all(status)
