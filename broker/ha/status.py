"""Replication status: acknowledged offsets, lag in bytes and milliseconds, for runtime info and logs.

The master service (broker.ha.master) records every put's end offset with `record_put()` and every
slave report with `record_ack()`; GET_BROKER_RUNTIME_INFO (through broker.ha.controller) and the
master's periodic status log read `snapshot()`. Lag in ms is measured per put: from the moment the
master stored a message to the moment a slave reported an offset covering it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LagSnapshot", "ReplicationStatus"]

# Puts waiting for an ack are kept up to this many; beyond it the oldest are dropped (a slave that has
# been gone for long has its lag reported from the oldest put still remembered).
MAX_PENDING_SAMPLES = 200_000
LAG_WINDOW = 20_000  # recent per-put lags kept for the percentiles


@dataclass(frozen=True, slots=True)
class LagSnapshot:
    master_max_offset: int
    acked_offset: int
    lag_bytes: int
    lag_ms: float  # age of the oldest put not yet acknowledged (0 when caught up)
    p50_ms: float
    p99_ms: float
    samples: int


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[idx]


class ReplicationStatus:
    """Put/ack bookkeeping on the master's event loop (not thread-safe, by design)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending: deque[tuple[int, float]] = deque()  # (end offset, put time), ascending offsets
        self._lags: deque[float] = deque(maxlen=LAG_WINDOW)
        self.acked_offset = 0
        self.master_max_offset = 0

    def record_put(self, end_offset: int) -> None:
        self.master_max_offset = max(self.master_max_offset, end_offset)
        pending = self._pending
        if pending and pending[-1][0] >= end_offset:
            return  # an earlier put ending later is already waiting; its time is the older one
        if len(pending) >= MAX_PENDING_SAMPLES:
            pending.popleft()
        pending.append((end_offset, self._clock()))

    def record_ack(self, offset: int) -> None:
        if offset <= self.acked_offset:
            return
        self.acked_offset = offset
        pending = self._pending
        if not pending or pending[0][0] > offset:
            return
        now = self._clock()
        lags = self._lags
        while pending and pending[0][0] <= offset:
            _end, t = pending.popleft()
            lags.append((now - t) * 1000.0)

    def reset_lags(self) -> None:
        """Start a fresh measurement window (benchmarks)."""
        self._lags.clear()

    def snapshot(self, master_max_offset: int | None = None) -> LagSnapshot:
        top = self.master_max_offset if master_max_offset is None else master_max_offset
        pending = self._pending
        lag_ms = (self._clock() - pending[0][1]) * 1000.0 if pending else 0.0
        values = sorted(self._lags)
        return LagSnapshot(
            master_max_offset=top,
            acked_offset=self.acked_offset,
            lag_bytes=max(0, top - self.acked_offset),
            lag_ms=lag_ms,
            p50_ms=_percentile(values, 0.50),
            p99_ms=_percentile(values, 0.99),
            samples=len(values),
        )
