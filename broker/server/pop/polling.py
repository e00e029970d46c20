"""Parked pops: a pop (or NOTIFICATION) that found nothing waits here until its topic gets a message, an order
queue is acked, or its poll time ends.

A waiter is one future registered under every topic it reads (the topic and its pop-retry topic); the store's
arrival listener and the order acks resolve the futures of the topic, and the pop runs again. At most
`popPollingSize` waiters per topic and `maxPopPollingSize` in all; past that a pop gets POLLING_FULL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["PopWaiters"]


class PopWaiters:
    def __init__(self, per_key: int, total: int) -> None:
        self.per_key = per_key
        self.total = total
        # topic -> parked future -> (group, queueId) it asked for
        self._table: dict[str, dict[asyncio.Future[None], tuple[str, int]]] = {}
        self._count = 0
        self.closed = False

    def count(self, topic: str, group: str | None = None, queue_id: int | None = None) -> int:
        """Pops parked on `topic` (for `group` and `queue_id` when given; -1 = every queue)."""
        return sum(
            1
            for g, q in self._table.get(topic, {}).values()
            if (group is None or g == group) and (queue_id is None or q == queue_id)
        )

    def full(self, topics: Iterable[str]) -> bool:
        return self._count >= self.total or any(len(self._table.get(t, ())) >= self.per_key for t in topics)

    async def wait(self, topics: list[str], group: str, queue_id: int, timeout: float) -> bool:
        """Wait until one of `topics` is notified (True) or `timeout` seconds pass (False)."""
        if timeout <= 0 or self.closed:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for t in topics:
            self._table.setdefault(t, {})[fut] = (group, queue_id)
        self._count += 1
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._count -= 1
            for t in topics:
                waiting = self._table.get(t)
                if waiting is not None:
                    waiting.pop(fut, None)
                    if not waiting:
                        del self._table[t]

    def notify(self, topic: str, *_args: object) -> None:
        """Wake every pop waiting on `topic` (the store's arrival listener's signature)."""
        waiting = self._table.get(topic)
        if not waiting:
            return
        for fut in waiting:
            if not fut.done():
                fut.set_result(None)

    def wake_all(self) -> None:
        """At shutdown: every parked pop answers now, and none parks again."""
        self.closed = True
        for waiting in list(self._table.values()):
            for fut in waiting:
                if not fut.done():
                    fut.set_result(None)
