"""ProcessQueue bookkeeping (commit offsets, orderly windows) and the flow-control thresholds."""

from __future__ import annotations

import pytest

from broker.client.process_queue import FlowControlLimits, ProcessQueue, flow_control_reason
from broker.protocol.message import MessageExt


def msgs(*offsets: int, size: int = 10) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x" * size, queue_offset=o) for o in offsets]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_commit_offset_is_the_smallest_unconsumed() -> None:
    pq = ProcessQueue()
    batch = msgs(10, 11, 12, 13)
    pq.put_messages(batch)
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (4, 40, 3)
    # Consumed out of order: 12 and 13 finish first; 10 is still in flight.
    assert pq.remove_messages(batch[2:]) == 10
    assert pq.remove_messages([batch[1]]) == 10
    assert pq.remove_messages([batch[0]]) == 14  # everything done: one past the last pulled
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert pq.remove_messages(batch) == -1  # nothing held


def test_duplicates_are_ignored_and_late_smaller_offsets_stay_sorted() -> None:
    pq = ProcessQueue()
    pq.put_messages(msgs(5, 6))
    pq.put_messages(msgs(6, 3))
    assert pq.msg_count == 3
    assert pq.remove_messages(msgs(5, 6)) == 3


@pytest.mark.parametrize(
    ("count", "size", "span", "orderly", "reason"),
    [
        (1000, 1, 0, False, None),
        (1001, 1, 0, False, "pullThresholdForQueue"),
        (10, 100 * 1024 * 1024 // 10 + 1, 0, False, "pullThresholdSizeForQueue"),
        (2, 1, 2000, False, None),
        (2, 1, 2001, False, "consumeConcurrentlyMaxSpan"),
        (2, 1, 5000, True, None),  # orderly queues are never span-limited
    ],
)
def test_flow_control(count: int, size: int, span: int, orderly: bool, reason: str | None) -> None:
    pq = ProcessQueue()
    offsets = [0, *range(span - count + 2, span + 1)] if span and count >= 2 else list(range(count))
    pq.put_messages(msgs(*offsets, size=size))
    assert pq.msg_count == count
    got = flow_control_reason(pq, FlowControlLimits(1000, 100, 2000), orderly)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


def test_orderly_take_commit_and_rollback() -> None:
    pq = ProcessQueue()
    assert pq.put_messages(msgs(0, 1, 2, 3, 4)) is True  # first batch: start a consume round
    assert pq.put_messages(msgs(5)) is False  # already consuming
    window = pq.take_messages(2)
    assert [m.queue_offset for m in window] == [0, 1]
    pq.rollback()  # SUSPEND_CURRENT_QUEUE_A_MOMENT: the same window comes back first
    assert [m.queue_offset for m in pq.take_messages(3)] == [0, 1, 2]
    assert pq.commit() == 3
    assert pq.msg_count == 3
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4, 5]
    assert pq.commit() == 6
    assert pq.take_messages(1) == [] and pq.consuming is False
    assert pq.commit() == -1


def test_lock_and_pull_expiry_follow_the_clock() -> None:
    clock = Clock()
    pq = ProcessQueue(now=clock)
    assert not pq.is_lock_expired()
    clock.t += 30.1
    assert pq.is_lock_expired()
    clock.t += 100
    assert pq.is_pull_expired()
