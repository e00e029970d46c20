"""A streaming query run as its own driver process, so tests can kill -9 it and restart it.

Used by test_exactly_once.py, from the repo root: `python -m tests.spark.stream_job --namesrv ... --topic ...
--checkpoint ... --out ... [--available-now]`. It reads the topic from earliest with maxOffsetsPerTrigger and
appends (topic, broker, queue_id, queue_offset, body) to parquet files: Spark's file sink commits
each batch's files in its `_spark_metadata` log, which with the checkpoint makes the output
exactly-once. With --available-now it drains what exists and exits; otherwise it runs until killed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tests.spark.spark_harness import spark_conf


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--max-offsets", default="40")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from broker.spark import RocketMQDataSource

    builder = SparkSession.builder.appName("rocketmq-stream-job")
    for key, value in spark_conf(Path(args.tmp)).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)

    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", args.namesrv)
        .option("topic", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets)
        .load()
        .select("topic", "broker", "queue_id", "queue_offset", "body")
    )
    writer = df.writeStream.format("parquet").option("path", args.out).option("checkpointLocation", args.checkpoint)
    writer = (
        writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="500 milliseconds")
    )
    query = writer.start()
    print("query started", flush=True)
    query.awaitTermination()
    print("query finished", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
