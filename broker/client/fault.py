"""Latency-based fault avoidance for producers (the behaviour of Java's MQFaultStrategy).

After every send the producer reports the broker's latency (or a failure); a slow or failing broker
is then avoided for a while, from the latencyMax -> notAvailableDuration table: a send slower than
550 ms sidelines the broker for 30 s, slower than 1 s for 60 s, and so on; a failure counts as 30 s
of isolation. `FaultStrategy.select()` picks the queue for the next attempt. Pure and clocked by an
injectable `now()` so tests drive time by hand.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.client.message import MessageQueue
from broker.client.route import TopicPublishInfo

__all__ = [
    "LATENCY_MAX",
    "NOT_AVAILABLE_DURATION",
    "FaultItem",
    "FaultStrategy",
    "LatencyFaultTolerance",
    "not_available_duration",
]

log = logging.getLogger(__name__)

# Milliseconds, index-aligned: latency >= LATENCY_MAX[i] -> unavailable for NOT_AVAILABLE_DURATION[i].
LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
# A failed send is treated as this latency (Java's "isolation").
ISOLATION_LATENCY_MS = 30000


def not_available_duration(latency_ms: float) -> int:
    """How long (ms) a broker is avoided after a send that took `latency_ms`."""
    for bound, duration in zip(reversed(LATENCY_MAX), reversed(NOT_AVAILABLE_DURATION), strict=True):
        if latency_ms >= bound:
            return duration
    return 0


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: float
    start_timestamp: float  # ms: the broker is available again from here on

    def is_available(self, now_ms: float) -> bool:
        return now_ms >= self.start_timestamp


class LatencyFaultTolerance:
    """broker name -> FaultItem; brokers never reported are available."""

    def __init__(self, now: Callable[[], float] | None = None) -> None:
        self._now = now or (lambda: time.monotonic() * 1000.0)
        self._items: dict[str, FaultItem] = {}
        self._worst = itertools.count()

    def update(self, name: str, latency_ms: float, not_available_ms: float) -> None:
        now = self._now()
        item = self._items.get(name)
        if item is None:
            self._items[name] = FaultItem(name, latency_ms, now + not_available_ms)
        else:
            item.current_latency = latency_ms
            item.start_timestamp = now + not_available_ms

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or item.is_available(self._now())

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """When every broker is sidelined: one of the better half, rotating among them."""
        if not self._items:
            return None
        now = self._now()
        ranked = sorted(
            self._items.values(),
            key=lambda it: (not it.is_available(now), it.current_latency, it.start_timestamp),
        )
        half = len(ranked) // 2
        if half <= 0:
            return ranked[0].name
        return ranked[next(self._worst) % half].name


class FaultStrategy:
    """Chooses the queue for each send attempt and records outcomes."""

    def __init__(self, enabled: bool = True, now: Callable[[], float] | None = None) -> None:
        self.enabled = enabled
        self.tolerance = LatencyFaultTolerance(now)

    def update(self, broker_name: str, latency_ms: float, isolation: bool) -> None:
        if not self.enabled:
            return
        duration = not_available_duration(ISOLATION_LATENCY_MS if isolation else latency_ms)
        self.tolerance.update(broker_name, latency_ms, duration)

    def has_alternative(self, info: TopicPublishInfo, failed_broker: str) -> bool:
        """Whether a retry can go at once to another broker that is not sidelined."""
        return any(
            mq.broker_name != failed_broker and (not self.enabled or self.tolerance.is_available(mq.broker_name))
            for mq in info.queues
        )

    def select(self, info: TopicPublishInfo, last_broker_name: str | None = None) -> MessageQueue:
        if not self.enabled:
            return info.select_one(last_broker_name)
        n = len(info.queues)
        if n == 0:
            raise IndexError(f"topic {info.topic} has no writable queue")
        # Best: an available broker other than the one that just failed; next: any available one.
        fallback: MessageQueue | None = None
        for _ in range(n):
            mq = info.queues[info.next_index() % n]
            if self.tolerance.is_available(mq.broker_name):
                if mq.broker_name != last_broker_name:
                    return mq
                fallback = fallback or mq
        if fallback is not None:
            return fallback
        # Everyone is sidelined: take the least bad broker rather than failing the send.
        name = self.tolerance.pick_one_at_least()
        if name is not None:
            nums = info.write_queue_nums(name)
            if nums > 0:
                return MessageQueue(info.topic, name, info.next_index() % nums)
            self.tolerance.remove(name)
        return info.select_one(last_broker_name)
