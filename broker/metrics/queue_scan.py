"""What the ConsumeQueues gained since the broker started: messages per topic, by stored size.

rocketmq_messages_in_total, rocketmq_throughput_in_total and rocketmq_message_size of plain sends are
read here instead of being counted by each send: a ConsumeQueue unit already holds the size of its
record, so the send path pays nothing for them (docs/benchmarks.md has the cost). Every scrape, and the
broker every 5 seconds, reads each queue's units from where the last read stopped, as one numpy array (a
few units in a plain loop), and adds them to its topic's SIZE_BUCKETS cell. The puts that are not plain
sends (a delay's delivery, a commit, a retry, a typed send) reach the same queues; BrokerMeters subtracts
what the store reported of them.

The queues a broker had when it started count from their end then, as RocketMQ's counters start at zero;
a queue made later counts from its start. The broker's own stores (delays, transactions, the timer) are
not read: nothing a client sends stays there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from broker.metrics.histogram import MESSAGE_SIZE_BUCKETS, Buckets, Cell
from broker.store.consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, UNIT

if TYPE_CHECKING:
    from broker.store.consume_queue import ConsumeQueue

__all__ = ["SIZE_BUCKETS", "QueueScan", "tally_units"]

SIZE_BUCKETS = Buckets(MESSAGE_SIZE_BUCKETS)
_BOUNDS = SIZE_BUCKETS.bounds
_SIZE_AT = 8  # in a ConsumeQueue unit: commitLogOffset (8 bytes), size (4), tagsCode (8), big-endian
# Up to this many units a plain loop is faster than a numpy call, whose fixed cost is paid per queue: it
# matters on a broker with thousands of queues, each with a few new units a second (bench/metrics_scan.py)
_FEW_UNITS = 64
_READ_UNITS = 1 << 20  # units read at a time (20 MiB): a longer backlog is read in steps

QueueKey = tuple[str, int]


def tally_units(units: memoryview | bytes, cell: Cell) -> None:
    """Add the records of ConsumeQueue `units` to `cell` (SIZE_BUCKETS: one observation of its size each,
    bucketed as Buckets.observe does), skipping blank fillers."""
    count = len(units) // CQ_STORE_UNIT_SIZE
    if count <= _FEW_UNITS:  # a numpy call's fixed cost is more than a short loop's
        for _offset, size, _tags in UNIT.iter_unpack(units[: count * CQ_STORE_UNIT_SIZE]):
            if size != BLANK_UNIT_SIZE:
                SIZE_BUCKETS.observe(cell, size)
        return
    # the size field of every unit, as one strided array; astype copies it, so nothing keeps `units`
    sizes = np.ndarray((count,), ">i4", units, _SIZE_AT, (CQ_STORE_UNIT_SIZE,)).astype(np.int64)
    sizes = sizes[sizes != BLANK_UNIT_SIZE]
    # how many are at most each bound (bisect_left's bucket: a size equal to a bound is in that bound's),
    # a comparison a bound: 3x faster than searchsorted and bincount for six bounds
    previous = 0
    for slot, at_most in enumerate([*(int(np.count_nonzero(sizes <= bound)) for bound in _BOUNDS), len(sizes)]):
        cell[slot] += at_most - previous
        previous = at_most
    cell[-1] += int(sizes.sum())


class QueueScan:
    """Per topic, the records its ConsumeQueues gained since `start`; `scan` reads what is new."""

    __slots__ = ("cells", "read_to", "skip")

    def __init__(self, skip: Callable[[str], bool]) -> None:
        self.skip = skip  # topics not read (the broker's own stores)
        self.cells: dict[str, Cell] = {}  # topic -> SIZE_BUCKETS cell
        self.read_to: dict[QueueKey, int] = {}  # the next logical offset to read, per queue

    def start(self, queues: Mapping[QueueKey, ConsumeQueue]) -> None:
        """Count from now: what the queues hold already is not counted."""
        self.read_to = {key: cq.get_max_offset() for key, cq in queues.items()}

    def scan(self, queues: Mapping[QueueKey, ConsumeQueue]) -> None:
        read_to = self.read_to
        for key in read_to.keys() - queues.keys():  # a deleted topic's queues
            del read_to[key]
        for key, cq in queues.items():
            topic = key[0]
            if self.skip(topic):
                continue
            end = cq.get_max_offset()
            offset = read_to.get(key, 0)
            if offset > end:  # the queue was deleted and made again since the last scan
                offset = 0
            offset = max(offset, cq.get_min_offset())  # retention removed what was never read
            if offset >= end:
                read_to[key] = offset
                continue
            cell = self.cells.get(topic)
            if cell is None:
                cell = self.cells[topic] = SIZE_BUCKETS.cell()
            while offset < end:
                view = cq.read_units(offset, min(end - offset, _READ_UNITS))
                if view is None:  # a file gone under us: the rest is read by the next scan
                    break
                with view:
                    tally_units(view, cell)
                    offset += len(view) // CQ_STORE_UNIT_SIZE
            read_to[key] = offset
