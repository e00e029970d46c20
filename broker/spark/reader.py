"""Batch reads (`spark.read.format("rocketmq")`) and the executor-side range read both readers share.

`RocketMQDataSource.reader()` builds `RocketMQBatchReader`. Its `partitions()` runs on the driver:
it resolves start and end offsets per queue (timestamp search, earliest/latest or JSON), checks them
against the brokers' min/max offsets and plans a `RangePartition` per queue range, or per group of
ranges with `maxPartitions` (planning.py). `read()` runs in executors and turns pulled messages into
Arrow record batches, with several pulls in flight across the partition's ranges (client.pull_ranges).
stream.py reuses `RangePartition`, `partitions_of()`, `read_partition()` and `check_gaps()`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from broker.client.message import MessageQueue
from broker.client.subscription import parse_subscription
from broker.spark.client import DataLossError, PullSpec, client_for
from broker.spark.offsets import EARLIEST, LATEST, find_gaps, resolve_spec
from broker.spark.options import SourceOptions
from broker.spark.planning import QueueRange, pack_ranges, plan_ranges
from broker.spark.rows import record_batch

__all__ = ["RangePartition", "RocketMQBatchReader", "check_gaps", "partitions_of", "pull_spec", "read_partition"]

log = logging.getLogger(__name__)


@dataclass
class RangePartition(InputPartition):
    """Everything one task needs: its queue ranges and how to pull them (pickled to executors)."""

    ranges: tuple[QueueRange, ...]
    spec: PullSpec


def pull_spec(opts: SourceOptions) -> PullSpec:
    return PullSpec(
        namesrv=opts.namesrv,
        group=opts.group,
        sub_expression=opts.sub_expression,
        fail_on_data_loss=opts.fail_on_data_loss,
        batch_size=opts.pull_batch_size,
        timeout=opts.pull_timeout,
        tls=opts.tls,
    )


def partitions_of(ranges: list[QueueRange], opts: SourceOptions) -> list[InputPartition]:
    spec = pull_spec(opts)
    return [RangePartition(group, spec) for group in pack_ranges(ranges, opts.max_partitions)]


def read_partition(partition: RangePartition) -> Iterator[pa.RecordBatch]:
    ranges, spec = partition.ranges, partition.spec
    tags = parse_subscription("", spec.sub_expression).tags_set  # the same for every topic
    client = client_for(spec.namesrv, spec.tls)
    for index, body in client.pull_ranges(spec, [(r.mq, r.start, r.end) for r in ranges]):
        r = ranges[index]
        batch = record_batch(r.broker, body, r.end, tags)
        if batch.num_rows:
            yield batch


def check_gaps(
    start: Mapping[MessageQueue, int], lows: Mapping[MessageQueue, int], fail: bool
) -> dict[MessageQueue, int]:
    """`start` with offsets below each queue's min moved up to it; DataLossError instead when `fail`."""
    gaps = find_gaps(start, lows)
    if gaps and fail:
        raise DataLossError(
            "data loss: offsets were removed by retention before they were read: "
            + "; ".join(g.describe() for g in gaps)
            + ". Set failOnDataLoss=false to skip them."
        )
    moved = dict(start)
    for gap in gaps:
        log.warning("skipping lost offsets (failOnDataLoss=false): %s", gap.describe())
        moved[gap.mq] = gap.low
    return moved


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def plan(self) -> list[QueueRange]:
        opts = self.opts
        client = client_for(opts.namesrv, opts.tls)
        mqs = client.queues(opts.topics)
        lows, highs = client.bounds(mqs)
        # A timestamp search runs after `highs` were read, so a message stored meanwhile could put its
        # answer past them: clamp, so the plan stays within the ends it checks against.
        if opts.starting_timestamp is not None:
            found = client.offsets_for_time(mqs, opts.starting_timestamp)  # takes precedence, as in Kafka
            start = {mq: min(found[mq], highs[mq]) for mq in mqs}
        else:
            start = resolve_spec(opts.starting, lows, highs, unlisted=EARLIEST, name="startingOffsets")
        if opts.ending_timestamp is not None:
            found = client.offsets_for_time(mqs, opts.ending_timestamp)  # overrides endingOffsets, as in Kafka
            end = {mq: min(found[mq], highs[mq]) for mq in mqs}
        else:
            end = resolve_spec(opts.ending, lows, highs, unlisted=LATEST, name="endingOffsets")
        beyond = [f"{mq} ends at {highs[mq]}, asked {end[mq]}" for mq in sorted(end) if end[mq] > highs[mq]]
        if beyond:
            raise ValueError("endingOffsets past the end of a queue: " + "; ".join(beyond))
        backwards = [f"{mq}: {start[mq]} > {end[mq]}" for mq in sorted(end) if start[mq] > end[mq]]
        if backwards:
            raise ValueError("startingOffsets after endingOffsets: " + "; ".join(backwards))
        start = check_gaps(start, lows, opts.fail_on_data_loss)
        return plan_ranges(start, end, opts.max_records_per_partition)

    def partitions(self) -> list[InputPartition]:
        return partitions_of(self.plan(), self.opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, RangePartition):
            yield from read_partition(partition)
        # Otherwise nothing to read: when partitions() is empty Spark still runs one task with a
        # placeholder partition.
