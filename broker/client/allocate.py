"""Queue allocation strategies for clustering consumers (rebalance.py calls one per topic).

Each consumer of a group runs the same function on the same sorted inputs and takes its share,
so the group agrees on a partition of the queues without talking to each other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeAlias

from broker.client.message import MessageQueue

__all__ = ["AllocateStrategy", "allocate_averagely", "allocate_averagely_by_circle"]

log = logging.getLogger(__name__)

AllocateStrategy: TypeAlias = Callable[[str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _check(current: str, mqs: Sequence[MessageQueue], cids: Sequence[str]) -> int:
    if not current:
        raise ValueError("current client id is empty")
    return cids.index(current) if current in cids else -1


def allocate_averagely(current: str, mqs: Sequence[MessageQueue], cids: Sequence[str]) -> list[MessageQueue]:
    """Contiguous blocks; the first `len(mqs) % len(cids)` consumers get one extra queue.

    8 queues, 3 consumers -> [0,1,2], [3,4,5], [6,7]. With more consumers than queues the extra
    consumers get nothing. A client not in the list (not yet seen by the broker) gets nothing.
    """
    index = _check(current, mqs, cids)
    if index < 0 or not mqs:
        return []
    n, c = len(mqs), len(cids)
    mod = n % c
    if n <= c:
        size = 1
    elif mod > 0 and index < mod:
        size = n // c + 1
    else:
        size = n // c
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, n - start)
    return [mqs[(start + i) % n] for i in range(max(count, 0))]


def allocate_averagely_by_circle(current: str, mqs: Sequence[MessageQueue], cids: Sequence[str]) -> list[MessageQueue]:
    """Dealt like cards: consumer i gets queues i, i+c, i+2c..."""
    index = _check(current, mqs, cids)
    if index < 0:
        return []
    return [mq for i, mq in enumerate(mqs) if i % len(cids) == index]
