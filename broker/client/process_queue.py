"""Per-queue consumption state of the push consumer: pulled-but-unconsumed messages and locks.

The pull loop puts each pulled batch here, the consume service takes messages out, and the
offset to commit is always "the smallest offset still in flight" (or one past the last pulled when
nothing is), so a crash never skips an unconsumed message. `flow_control_reason()` decides whether
the next pull must wait (pullThresholdForQueue, pullThresholdSizeForQueue,
consumeConcurrentlyMaxSpan). Orderly consumption adds take/commit/rollback of a consuming window
and the broker lock's timestamps. Pure; all calls come from one event loop.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from broker.protocol.message import MessageExt

__all__ = [
    "PULL_MAX_IDLE_TIME",
    "REBALANCE_LOCK_INTERVAL",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "FlowControlLimits",
    "ProcessQueue",
    "flow_control_reason",
]

log = logging.getLogger(__name__)

# Seconds. A client-side lock is trusted this long after the broker last granted it (broker: 60 s).
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0
REBALANCE_LOCK_INTERVAL = 20.0
PULL_MAX_IDLE_TIME = 120.0


class ProcessQueue:
    __slots__ = (
        "_consuming",
        "_msgs",
        "_now",
        "consuming",
        "dropped",
        "last_consume_timestamp",
        "last_lock_timestamp",
        "last_pull_timestamp",
        "locked",
        "msg_count",
        "msg_size",
        "queue_offset_max",
    )

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        # offset -> message; offsets arrive ascending from sequential pulls, so insertion order is
        # sorted order and the first key is the smallest (O(1) with OrderedDict).
        self._msgs: OrderedDict[int, MessageExt] = OrderedDict()
        # Orderly: the window handed to the listener and not yet committed.
        self._consuming: OrderedDict[int, MessageExt] = OrderedDict()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.locked = False
        self.consuming = False
        self.last_lock_timestamp = now()
        self.last_pull_timestamp = now()
        self.last_consume_timestamp = now()

    # ---------------------------------------------------------------- common

    def put_messages(self, msgs: Sequence[MessageExt]) -> bool:
        """Add pulled messages; True when an orderly consumer must start a consume round."""
        for msg in msgs:
            off = msg.queue_offset
            if off in self._msgs or off in self._consuming:
                continue
            if self._msgs and off < next(reversed(self._msgs)):
                # Out of order (an offset reset): rebuild sorted; rare, so O(n log n) is fine.
                self._msgs[off] = msg
                self._msgs = OrderedDict(sorted(self._msgs.items()))
            else:
                self._msgs[off] = msg
            self.msg_count += 1
            self.msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, off)
        if self._msgs and not self.consuming:
            self.consuming = True
            return True
        return False

    def remove_messages(self, msgs: Sequence[MessageExt]) -> int:
        """Drop consumed messages; the offset safe to commit, or -1 when nothing was held."""
        if not self._msgs:
            return -1
        for msg in msgs:
            if self._msgs.pop(msg.queue_offset, None) is not None:
                self.msg_count -= 1
                self.msg_size -= len(msg.body)
        self.last_consume_timestamp = self._now()
        if self._msgs:
            return next(iter(self._msgs))
        return self.queue_offset_max + 1

    @property
    def max_span(self) -> int:
        if not self._msgs:
            return 0
        return next(reversed(self._msgs)) - next(iter(self._msgs))

    def has_temp_messages(self) -> bool:
        return bool(self._msgs)

    def cached_range(self) -> tuple[int, int]:
        """(smallest, largest) offset held and not handed to an orderly listener; (0, 0) when none."""
        if not self._msgs:
            return 0, 0
        return next(iter(self._msgs)), next(reversed(self._msgs))

    def consuming_range(self) -> tuple[int, int, int]:
        """An orderly consumer's uncommitted window: (smallest, largest offset, count); zeros when empty."""
        if not self._consuming:
            return 0, 0, 0
        return next(iter(self._consuming)), next(reversed(self._consuming)), len(self._consuming)

    def pulled(self) -> None:
        """A pull of this queue was answered (its time is reported as lastPullTimestamp)."""
        self.last_pull_timestamp = self._now()

    def clear(self) -> None:
        self._msgs.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1

    def is_pull_expired(self) -> bool:
        return self._now() - self.last_pull_timestamp > PULL_MAX_IDLE_TIME

    # ---------------------------------------------------------------- orderly

    def is_lock_expired(self) -> bool:
        return self._now() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to `batch_size` of the smallest offsets into the consuming window."""
        taken: list[MessageExt] = []
        while self._msgs and len(taken) < batch_size:
            off, msg = self._msgs.popitem(last=False)
            self._consuming[off] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        self.last_consume_timestamp = self._now()
        return taken

    def commit(self) -> int:
        """The window was consumed: the offset to commit (one past it), -1 if it was empty."""
        if not self._consuming:
            return -1
        last = next(reversed(self._consuming))
        for msg in self._consuming.values():
            self.msg_count -= 1
            self.msg_size -= len(msg.body)
        self._consuming.clear()
        return last + 1

    def rollback(self) -> None:
        """Put the whole window back in front, to be consumed again (SUSPEND_CURRENT_QUEUE_A_MOMENT)."""
        if not self._consuming:
            return
        merged = OrderedDict(self._consuming)
        merged.update(self._msgs)
        self._msgs = OrderedDict(sorted(merged.items()))
        self._consuming.clear()


class FlowControlLimits:
    """The three client-side thresholds, from ConsumerConfig."""

    __slots__ = ("max_count", "max_size_bytes", "max_span")

    def __init__(self, max_count: int = 1000, max_size_mib: int = 100, max_span: int = 2000) -> None:
        self.max_count = max_count
        self.max_size_bytes = max_size_mib * 1024 * 1024
        self.max_span = max_span


def flow_control_reason(pq: ProcessQueue, limits: FlowControlLimits, orderly: bool) -> str | None:
    """Why the next pull of this queue must wait, or None. Span is not checked for orderly queues:
    they consume strictly in order, so a wide span there is never a stuck message."""
    if pq.msg_count > limits.max_count:
        return f"cached message count {pq.msg_count} exceeds pullThresholdForQueue {limits.max_count}"
    if pq.msg_size > limits.max_size_bytes:
        return f"cached message size {pq.msg_size} exceeds pullThresholdSizeForQueue {limits.max_size_bytes}"
    if not orderly and pq.max_span > limits.max_span:
        return f"offset span {pq.max_span} exceeds consumeConcurrentlyMaxSpan {limits.max_span}"
    return None
