"""Streaming example: orders from a topic, to Parquet, and per-minute totals per tag, to Parquet and a topic.

Input: the `orders` topic. Each message is one order: a JSON body
`{"order_id": "...", "ts": <event time, ms since the epoch>, "amount_cents": <int>}`, the product
category as its tag, and the order id as its key.

Two streaming queries share the source and the driver:
- `orders`: every order, parsed, appended to `<data>/orders` with Spark's Parquet file sink. With its
  checkpoint this is exactly-once: the sink commits each micro-batch's files in `_spark_metadata`.
- `orders-per-minute`: orders per (minute of event time, tag) with a watermark; a window is emitted once
  the watermark passes its end. Each micro-batch goes to `<data>/per_minute/batch_id=<n>` (overwritten
  when a restarted query replays that batch) and to the sink topic through the `rocketmq` sink, without
  duplicates across restarts (topic_once.py).

Checkpoints are under `<data>/checkpoints`: keep `<data>` on a volume that outlives the driver pod. The
NameServer address comes from the NAMESRV_ADDR environment variable (docs/spark.md: Kubernetes), or
from --name-server.

Latency: each query runs in its own pool of Spark's FAIR scheduler, so a micro-batch of `orders` does
not queue behind the tasks of a totals batch (and the other way round), and the source packs a
micro-batch's queue ranges into at most --max-partitions tasks (default: the executors' cores), so a
batch of a few messages per queue is not one task, one Python round trip and one Parquet file per queue.

    orders_stream.py --data /data/orders-pipeline [--topic orders] [--sink-topic orders-per-minute]
                     [--trigger "1 second"] [--watermark "30 seconds"] [--max-offsets-per-trigger 20000]
                     [--max-partitions N] [--state-partitions 4] [--check-executors 2]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from envcheck import check_executors
from topic_once import write_once

log = logging.getLogger("orders_stream")

ORDER_SCHEMA = "order_id STRING, ts BIGINT, amount_cents BIGINT"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="directory for output and checkpoints (a volume)")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--name-server", help="NameServer list (default: the NAMESRV_ADDR environment variable)")
    parser.add_argument("--sink-topic", default="orders-per-minute")
    parser.add_argument("--trigger", default="1 second", help="processing-time trigger interval")
    parser.add_argument("--watermark", default="30 seconds", help="how late an order may arrive")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=20_000)
    parser.add_argument(
        "--max-partitions",
        type=int,
        default=0,
        help="tasks per micro-batch at most (the source's maxPartitions; default: executor instances x cores)",
    )
    parser.add_argument(
        "--state-partitions",
        type=int,
        default=4,
        help="partitions of the aggregation's state; fixed by the checkpoint once the query has run",
    )
    parser.add_argument("--check-executors", type=int, default=0, help="compare versions on N executors first")
    return parser.parse_args(argv)


def executor_cores(spark: Any) -> int:
    """Task slots the job asked for: spark.executor.instances x spark.executor.cores (local mode: its threads)."""
    conf = spark.sparkContext.getConf()
    if conf.get("spark.executor.instances") is None:
        return int(spark.sparkContext.defaultParallelism)
    return int(conf.get("spark.executor.instances")) * int(conf.get("spark.executor.cores", "1"))


def orders(spark: Any, topic: str, max_offsets: int, options: dict[str, str]) -> Any:
    """The topic as a stream of parsed orders, with the source columns a lake keeps."""
    from pyspark.sql import functions as F

    raw = (
        spark.readStream.format("rocketmq")
        .options(**options)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
        .load()
    )
    order = F.from_json(F.col("body").cast("string"), ORDER_SCHEMA)
    return raw.select(
        "broker",
        "queue_id",
        "queue_offset",
        "msg_id",
        "keys",
        F.coalesce(F.col("tags"), F.lit("")).alias("tag"),
        "body",
        "born_timestamp",
        "store_timestamp",
        order.order_id.alias("order_id"),
        F.timestamp_millis(order.ts).alias("event_time"),
        order.amount_cents.alias("amount_cents"),
    )


def per_minute(parsed: Any, watermark: str) -> Any:
    """Orders, amount and a checksum of the bodies per (minute, tag); emitted when the window closes."""
    from pyspark.sql import functions as F

    return (
        parsed.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute"), "tag")
        .agg(
            F.count(F.lit(1)).alias("orders"),
            F.sum("amount_cents").alias("amount_cents"),
            # A sum of per-body CRCs: a duplicate or a missing order changes it.
            F.sum(F.crc32("body")).alias("body_crc_sum"),
        )
        .select(F.col("window.start").alias("minute"), "tag", "orders", "amount_cents", "body_crc_sum")
    )


def as_messages(totals: Any, query: str) -> Any:
    """Rows for the rocketmq sink: JSON body, the tag, and a key unique per (query, minute, tag)."""
    from pyspark.sql import functions as F

    minute = F.date_format("minute", "yyyy-MM-dd'T'HH:mm'Z'")
    return totals.select(
        F.to_json(F.struct("minute", "tag", "orders", "amount_cents", "body_crc_sum")).alias("body"),
        F.concat_ws("/", F.lit(query), minute, F.col("tag")).alias("keys"),
        F.when(F.col("tag") != "", F.col("tag")).alias("tags"),
    )


def totals_writer(data: Path, sink_topic: str, query: str, options: dict[str, str] | None = None) -> Any:
    """The foreachBatch function of the totals query. `options` go to the rocketmq source and sink."""

    def write(batch: Any, batch_id: int) -> None:
        totals = batch.persist()
        try:
            if totals.isEmpty():
                return
            # Overwriting the batch's own directory makes a replay of the batch idempotent.
            totals.write.mode("overwrite").parquet(str(data / "per_minute" / f"batch_id={batch_id}"))
            messages = as_messages(totals, query)
            sent = write_once(messages, batch_id, topic=sink_topic, marks=data / "topic_marks", options=options)
            log.info("batch %d: %d totals, %d sent to %s", batch_id, totals.count(), sent, sink_topic)
        finally:
            totals.unpersist()

    return write


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from pyspark.sql import SparkSession

    from rocketcluster.spark import RocketMQDataSource

    # FAIR: the two queries' jobs share the executors instead of queueing behind each other (pools below)
    spark = SparkSession.builder.appName("orders-stream").config("spark.scheduler.mode", "FAIR").getOrCreate()
    spark.dataSource.register(RocketMQDataSource)
    if args.check_executors:
        check_executors(spark, args.check_executors)
    # Spark's default of 200 shuffle partitions means 200 state-store tasks per micro-batch, whatever the
    # data size; a restarted query keeps the number its checkpoint was created with.
    spark.conf.set("spark.sql.shuffle.partitions", str(args.state_partitions))
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # minutes in keys and Parquet are UTC
    data = Path(args.data)
    options = {"nameServer": args.name_server} if args.name_server else {}
    max_partitions = str(args.max_partitions or executor_cores(spark))
    parsed = orders(spark, args.topic, args.max_offsets_per_trigger, {**options, "maxPartitions": max_partitions})
    # A query's jobs run in the scheduler pool set on the thread that starts it.
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", "orders")
    lake = (
        parsed.writeStream.queryName("orders")
        .format("parquet")
        .option("path", str(data / "orders"))
        .option("checkpointLocation", str(data / "checkpoints" / "orders"))
        .trigger(processingTime=args.trigger)
        .start()
    )
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", "orders-per-minute")
    totals = (
        per_minute(parsed, args.watermark)
        .writeStream.queryName("orders-per-minute")
        .outputMode("append")
        .foreachBatch(totals_writer(data, args.sink_topic, "orders-per-minute", options))
        .option("checkpointLocation", str(data / "checkpoints" / "per_minute"))
        .trigger(processingTime=args.trigger)
        .start()
    )
    log.info("queries started: %s (%s), %s (%s)", lake.name, lake.id, totals.name, totals.id)
    spark.streams.awaitAnyTermination()  # raises the failed query's error, so the driver pod fails


if __name__ == "__main__":
    main()
