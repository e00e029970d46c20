"""Histograms kept as plain lists on the event loop and published as prometheus-client families on scrape.

A cell is one labelled series: a count per bucket (not cumulative: an observation touches one slot), the
overflow slot, then the sum. The hot paths index a cell themselves (a call costs more than the count on
this kind of machine); `Buckets.publish` turns a cell into the cumulative (le, count) pairs and the sum
HistogramMetricFamily takes. The count of a histogram is the sum of its slots, so a counter that counts
the same events (rocketmq_messages_in_total) is published from the same cell instead of counted twice.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client.utils import floatToGoString

__all__ = ["MESSAGE_SIZE_BUCKETS", "RPC_LATENCY_BUCKETS_MS", "Buckets", "Cell"]

Cell = list[int]

# RocketMQ 5's bucket bounds (BrokerMetricsManager's message size view, RemotingMetricsManager's rpc view)
MESSAGE_SIZE_BUCKETS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)


class Buckets:
    """Bounds in the unit observations are counted in (bytes; nanoseconds for latencies), published in
    the metric's unit: `scale` observation units make one published unit (1e6 ns = 1 ms)."""

    __slots__ = ("bounds", "les", "scale", "size")

    def __init__(self, published_bounds: tuple[int, ...], scale: int = 1) -> None:
        self.bounds = tuple(b * scale for b in published_bounds)
        self.scale = scale
        # le values as prometheus-client writes its own histograms (1024.0, 1.048576e+06)
        self.les = [floatToGoString(b) for b in published_bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        self.size = len(published_bounds) + 2  # the buckets, the overflow, the sum

    def cell(self) -> Cell:
        return [0] * self.size

    def observe(self, cell: Cell, value: int, times: int = 1) -> None:
        # bisect_left: the first bound >= value, i.e. the bucket whose le the value does not exceed
        cell[bisect_left(self.bounds, value)] += times
        cell[-1] += value * times

    def count(self, cell: Cell) -> int:
        return sum(cell[:-1])

    def publish(self, cell: Cell) -> tuple[list[tuple[str, float]], float]:
        """Cumulative (le, count) pairs, +Inf last, and the sum in the published unit."""
        running = 0
        pairs = []
        for le, count in zip(self.les, cell, strict=False):  # the sum slot has no le
            running += count
            pairs.append((le, float(running)))
        return pairs, cell[-1] / self.scale
