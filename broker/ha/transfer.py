"""GroupTransfer: SYNC_MASTER puts wait here until a slave acknowledged their end offset.

The master service (broker.ha.master) calls `wait(end_offset, timeout)` from the store's replica
waiter after the flush, and `acked_to(offset)` whenever a slave's report raises the highest acknowledged
offset (push2SlaveMaxOffset). A waiter resolves to PUT_OK, or to FLUSH_SLAVE_TIMEOUT when the time
runs out (Java's GroupTransferService, with a heap instead of a polled list).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging

from broker.store.results import PutStatus

__all__ = ["GroupTransfer"]

log = logging.getLogger(__name__)


class GroupTransfer:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[PutStatus]]] = []
        self._seq = itertools.count()
        self.acked = 0

    @property
    def waiting(self) -> int:
        return len(self._heap)

    async def wait(self, end_offset: int, timeout: float) -> PutStatus:
        if self.acked >= end_offset:
            return PutStatus.PUT_OK
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[PutStatus] = loop.create_future()
        heapq.heappush(self._heap, (end_offset, next(self._seq), fut))
        timer = loop.call_later(timeout, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()

    def acked_to(self, offset: int) -> None:
        """A slave acknowledged `offset`: wake every put ending at or before it."""
        if offset <= self.acked:
            return
        self.acked = offset
        heap = self._heap
        while heap and heap[0][0] <= offset:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(PutStatus.PUT_OK)
        # expired waiters stay in the heap until their offset is acked; drop them when the heap grows
        if len(heap) > 4096:
            self._heap = [e for e in heap if not e[2].done()]
            heapq.heapify(self._heap)

    def fail_all(self, status: PutStatus) -> None:
        """Shutdown: answer every waiting put now."""
        for _end, _seq, fut in self._heap:
            if not fut.done():
                fut.set_result(status)
        self._heap.clear()


def _expire(fut: asyncio.Future[PutStatus]) -> None:
    if not fut.done():
        fut.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)
