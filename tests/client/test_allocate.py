"""Allocation strategies: every queue owned by exactly one consumer, in Java's layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client.allocate import allocate_averagely, allocate_averagely_by_circle
from broker.client.message import MessageQueue


def mqs(n: int) -> list[MessageQueue]:
    return [MessageQueue("T", "b", i) for i in range(n)]


@pytest.mark.parametrize(
    ("n_queues", "n_cids", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (8, 2, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (4, 4, [[0], [1], [2], [3]]),
        (3, 5, [[0], [1], [2], [], []]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (0, 2, [[], []]),
    ],
)
def test_averagely_layout(n_queues: int, n_cids: int, expected: list[list[int]]) -> None:
    cids = [f"c{i}" for i in range(n_cids)]
    got = [[q.queue_id for q in allocate_averagely(c, mqs(n_queues), cids)] for c in cids]
    assert got == expected


@pytest.mark.parametrize(
    ("n_queues", "n_cids", "expected"),
    [(8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]), (2, 3, [[0], [1], []])],
)
def test_by_circle_layout(n_queues: int, n_cids: int, expected: list[list[int]]) -> None:
    cids = [f"c{i}" for i in range(n_cids)]
    assert [[q.queue_id for q in allocate_averagely_by_circle(c, mqs(n_queues), cids)] for c in cids] == expected


def test_unknown_client_gets_nothing() -> None:
    assert allocate_averagely("stranger", mqs(4), ["c0", "c1"]) == []
    with pytest.raises(ValueError):
        allocate_averagely("", mqs(4), ["c0"])


@given(st.integers(0, 64), st.integers(1, 12))
def test_every_queue_has_exactly_one_owner(n_queues: int, n_cids: int) -> None:
    cids = [f"c{i}" for i in range(n_cids)]
    for strategy in (allocate_averagely, allocate_averagely_by_circle):
        owned = [q for c in cids for q in strategy(c, mqs(n_queues), cids)]
        assert sorted(owned) == mqs(n_queues)
        sizes = [len(strategy(c, mqs(n_queues), cids)) for c in cids]
        assert max(sizes) - min(sizes) <= 1
