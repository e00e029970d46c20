"""Ordered-message selectors hash like Java so mixed-language producers agree on queues."""

from __future__ import annotations

import pytest

from broker.client.message import Message, MessageQueue
from broker.client.selector import select_by_hash, select_by_random, sharding_hash

QUEUES = [MessageQueue("T", "b", i) for i in range(8)]


@pytest.mark.parametrize(
    ("arg", "expected_hash"),
    # Values from Java: "hello".hashCode(), Long.hashCode(2^40 + 5) = 256 ^ 5, Boolean.hashCode(true).
    [("", 0), ("a", 97), ("hello", 99162322), (7, 7), (-7, -7), (2**40 + 5, 261), (True, 1231)],
)
def test_sharding_hash_is_java_hashcode(arg: object, expected_hash: int) -> None:
    assert sharding_hash(arg) == expected_hash


@pytest.mark.parametrize("key", ["order-1", "order-2", "customer-42", "Ω-unicode", 12345, -99])
def test_select_by_hash_is_stable_and_in_range(key: object) -> None:
    msg = Message("T", b"x")
    first = select_by_hash(QUEUES, msg, key)
    assert first in QUEUES
    assert all(select_by_hash(QUEUES, msg, key) == first for _ in range(5))
    assert first.queue_id == abs(sharding_hash(key)) % 8


def test_negative_hash_maps_like_javas_abs_of_remainder() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE in Java.
    assert sharding_hash("polygenelubricants") == -(2**31)
    assert select_by_hash(QUEUES, Message("T", b"x"), "polygenelubricants").queue_id == 0


def test_random_selector_and_errors() -> None:
    assert select_by_random(QUEUES, Message("T", b"x"), None) in QUEUES
    with pytest.raises(ValueError):
        select_by_hash([], Message("T", b"x"), "k")
    with pytest.raises(TypeError):
        sharding_hash(1.5)
