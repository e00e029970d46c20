"""Splitting queue offset ranges into Spark input partitions. Pure: no Spark, no I/O.

The batch reader (reader.py) and the stream reader (stream.py) resolve start and end offsets per
queue, then call `plan_ranges()`: one range per queue with something to read, cut into pieces of at
most `max_records` offsets (the `maxRecordsPerPartition` option) so one large queue does not become
one long task. `pack_ranges()` then makes the partitions: one per range, or, with `maxPartitions`, at
most that many, each holding several ranges. Spark runs one task per partition: a task has a fixed
cost (scheduling, a Python worker round trip, an output file), which a micro-batch of a few messages
per queue pays once per queue unless its ranges share tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.client.message import MessageQueue

__all__ = ["QueueRange", "pack_ranges", "plan_ranges"]


@dataclass(frozen=True, slots=True, order=True)
class QueueRange:
    """Queue offsets [start, end) of one queue: what one Spark task reads."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(
    start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int], max_records: int | None = None
) -> list[QueueRange]:
    """Ranges for queues in `end` whose end is past their start, in queue order. A queue absent
    from `start` has nothing planned (the caller decides where new queues begin)."""
    if max_records is not None and max_records < 1:
        raise ValueError(f"max_records must be >= 1, got {max_records}")
    ranges: list[QueueRange] = []
    for mq in sorted(end):
        if mq not in start:
            continue
        lo, hi = start[mq], end[mq]
        step = max_records or max(hi - lo, 1)
        for piece in range(lo, hi, step):
            ranges.append(QueueRange(mq.topic, mq.broker_name, mq.queue_id, piece, min(piece + step, hi)))
    return ranges


def pack_ranges(ranges: list[QueueRange], max_partitions: int | None = None) -> list[tuple[QueueRange, ...]]:
    """The ranges as partitions: one each, or at most `max_partitions`, balanced by offsets (each range
    in turn, largest first, to the partition holding the fewest). Deterministic for given ranges; the
    ranges of a partition are in queue order."""
    if max_partitions is not None and max_partitions < 1:
        raise ValueError(f"max_partitions must be >= 1, got {max_partitions}")
    if max_partitions is None or len(ranges) <= max_partitions:
        return [(r,) for r in ranges]
    bins: list[list[QueueRange]] = [[] for _ in range(max_partitions)]
    sizes = [0] * max_partitions
    for r in sorted(ranges, key=lambda r: (-r.size, r)):
        i = min(range(max_partitions), key=lambda i: (sizes[i], i))
        bins[i].append(r)
        sizes[i] += r.size
    return [tuple(sorted(b)) for b in bins]
