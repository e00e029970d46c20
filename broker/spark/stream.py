"""Micro-batch reads (`spark.readStream.format("rocketmq")`): offsets, admission control, progress.

`RocketMQDataSource.streamReader()` builds `RocketMQStreamReader`. Spark keeps it in one long-lived
Python worker on the driver and calls, per micro-batch: `latestOffset(start, limit)` (the batch's end,
written to the checkpoint's offset log before anything is read), `partitions(start, end)`, then, after
the sink committed, `commit(end)`. Executors run `read()` on a pickled copy, so everything a batch
needs travels in the partitions. Per micro-batch the driver asks the NameServer for the route once (a
new group's queues show up within a trigger) and every queue's min and max offsets in one round;
`partitions()` of that batch checks for lost offsets against those min offsets. Offsets use the
layout of offsets.py and are always built in sorted order, so an unchanged position serialises to the
same JSON and Spark runs no empty batches.

Exactly-once into Spark: a batch's range comes from the checkpoint on replay, and reading a fixed
queue range is deterministic, so a restarted query re-reads precisely the unfinished batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from broker.client.message import MessageQueue
from broker.spark.client import DataLossError, QueueClient, client_for
from broker.spark.offsets import EARLIEST, Offsets, cap_offsets, offsets_of, queues_of, resolve_spec
from broker.spark.options import SourceOptions
from broker.spark.planning import plan_ranges
from broker.spark.reader import RangePartition, check_gaps, partitions_of, read_partition

__all__ = ["RocketMQStreamReader"]

log = logging.getLogger(__name__)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._latest: Offsets | None = None  # true latest seen by the last latestOffset()
        self._snapshot: dict[MessageQueue, int] | None = None  # Trigger.AvailableNow's end
        # The queues' min offsets read by the last latestOffset(), and the end it returned: partitions()
        # of that batch, called next, checks the gaps against them instead of asking the brokers again.
        self._lows: tuple[Offsets, dict[MessageQueue, int]] | None = None

    # ------------------------------------------------------------------ offsets

    def initialOffset(self) -> dict:  # type: ignore[type-arg]
        """Where a new query starts (a restart uses its checkpoint instead)."""
        opts = self.opts
        client = client_for(opts.namesrv, opts.tls)
        mqs = client.queues(opts.topics)
        lows, highs = client.bounds(mqs)
        if opts.starting_timestamp is not None:
            start = client.offsets_for_time(mqs, opts.starting_timestamp)
        else:
            start = resolve_spec(opts.starting, lows, highs, unlisted=EARLIEST, name="startingOffsets")
        return offsets_of(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # Read up to what exists now, then let the query finish even if producers keep going.
        client = client_for(self.opts.namesrv, self.opts.tls)
        self._snapshot = client.max_offsets(client.queues(self.opts.topics))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[type-arg]
        client = client_for(self.opts.namesrv, self.opts.tls)
        begin = queues_of(start)
        mqs = client.queues(self.opts.topics)
        lows, highs = client.bounds(mqs)
        self._latest = offsets_of(highs)
        # Queues added to the topic while the query runs start at their earliest offset.
        begin.update({mq: lows[mq] for mq in mqs if mq not in begin})
        target: dict[MessageQueue, int] = {}
        for mq, high in highs.items():
            if high < begin[mq]:
                self._went_backwards(mq, begin[mq], high)
                high = begin[mq]
            elif self._snapshot is not None:
                high = max(begin[mq], min(high, self._snapshot.get(mq, begin[mq])))
            target[mq] = high
        # A queue missing from the route (its broker restarting) keeps its position: dropping it
        # would make it start over from earliest when the broker returns.
        for mq, offset in begin.items():
            target.setdefault(mq, offset)
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets(offsets_of(begin), offsets_of(target), limit.max_rows)
        else:  # ReadAllAvailable, and limits this source does not implement (min rows/bytes/files)
            end = offsets_of(target)
        self._lows = (end, lows)
        return end

    def _went_backwards(self, mq: MessageQueue, position: int, high: int) -> None:
        message = (
            f"{mq} now ends at offset {high}, before the query's position {position}: the queue was "
            "recreated or its broker's store was replaced"
        )
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + ". Set failOnDataLoss=false to wait until it passes the position.")
        log.warning("%s; waiting until it passes the position (failOnDataLoss=false)", message)

    def reportLatestOffset(self) -> dict | None:  # type: ignore[type-arg]
        """The queues' true ends, ignoring maxOffsetsPerTrigger: query progress shows it, so lag is visible."""
        return self._latest

    # ------------------------------------------------------------------ planning and reading

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:  # type: ignore[type-arg]
        if start == end:
            return []
        client = client_for(self.opts.namesrv, self.opts.tls)
        begin, stop = queues_of(start), queues_of(end)
        known: dict[MessageQueue, int] = {}
        if self._lows is not None and self._lows[0] == end:  # the batch latestOffset() just planned
            known = self._lows[1]
        new = [mq for mq in stop if mq not in begin]
        if new:
            begin.update(_lows(client, new, known))
        moving = sorted(mq for mq in stop if begin[mq] < stop[mq])
        if moving:
            lows = _lows(client, moving, known)
            begin.update(check_gaps({mq: begin[mq] for mq in moving}, lows, self.opts.fail_on_data_loss))
        return partitions_of(plan_ranges(begin, stop, self.opts.max_records_per_partition), self.opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, RangePartition):
            yield from read_partition(partition)
        # Otherwise nothing to read: when partitions() is empty Spark still runs one task with a
        # placeholder partition.

    def commit(self, end: dict) -> None:  # type: ignore[type-arg]
        group = self.opts.progress_group
        if group is None:
            return
        try:
            client_for(self.opts.namesrv, self.opts.tls).commit_group(group, queues_of(end))
        except Exception as exc:  # informational only: Spark's checkpoint is the truth
            log.warning("reporting progress to consumer group %s failed: %s", group, exc)

    def stop(self) -> None:
        self._snapshot = None
        self._lows = None


def _lows(client: QueueClient, mqs: list[MessageQueue], known: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
    """Min offsets of `mqs`: from `known`, else asked (a replayed batch after a restart)."""
    if all(mq in known for mq in mqs):
        return {mq: known[mq] for mq in mqs}
    return client.min_offsets(mqs)
