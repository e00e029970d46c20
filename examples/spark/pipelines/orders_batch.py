"""Batch example: the messages a topic stored in a time range, to Parquet.

    orders_batch.py --topic orders --from 2026-11-25T10:00:00Z --to 2026-11-25T11:00:00Z \\
                    --output /data/orders-by-hour/2026-11-25T10 [--check-executors 2]

`--from` is inclusive and `--to` exclusive, compared with each message's store time (the source's
`startingTimestamp` / `endingTimestamp`); either takes ISO 8601 or milliseconds since the epoch. The
output is overwritten, so running the same range again is safe. The NameServer address comes from the
NAMESRV_ADDR environment variable (or --name-server). The last line of the driver's log is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from datetime import datetime
from typing import Any

from envcheck import check_executors

log = logging.getLogger("orders_batch")

COLUMNS = (
    "topic",
    "broker",
    "queue_id",
    "queue_offset",
    "msg_id",
    "keys",
    "tags",
    "body",
    "properties",
    "born_timestamp",
    "store_timestamp",
)


def epoch_ms(text: str) -> int:
    """Milliseconds since the epoch, from digits or an ISO 8601 time with a zone (`Z` allowed)."""
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone; add Z or an offset such as +01:00")
    return int(moment.timestamp() * 1000)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--name-server", help="NameServer list (default: the NAMESRV_ADDR environment variable)")
    parser.add_argument("--from", dest="start", type=epoch_ms, help="first store time read (default: earliest)")
    parser.add_argument("--to", dest="end", type=epoch_ms, help="store time where reading stops (default: latest)")
    parser.add_argument("--output", required=True, help="Parquet directory, overwritten")
    parser.add_argument("--max-records-per-partition", type=int, default=0, help="split large queues into tasks")
    parser.add_argument("--check-executors", type=int, default=0, help="compare versions on N executors first")
    args = parser.parse_args(argv)
    if args.start is not None and args.end is not None and args.end < args.start:
        parser.error("--to is before --from")
    return args


def source_options(args: argparse.Namespace) -> dict[str, str]:
    options = {"topic": args.topic}
    if args.name_server:
        options["nameServer"] = args.name_server
    if args.start is not None:
        options["startingTimestamp"] = str(args.start)
    if args.end is not None:
        options["endingTimestamp"] = str(args.end)
    if args.max_records_per_partition:
        options["maxRecordsPerPartition"] = str(args.max_records_per_partition)
    return options


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from pyspark.sql import SparkSession

    from rocketcluster.spark import RocketMQDataSource

    spark = SparkSession.builder.appName("orders-batch").getOrCreate()
    spark.dataSource.register(RocketMQDataSource)
    if args.check_executors:
        check_executors(spark, args.check_executors)
    frame = spark.read.format("rocketmq").options(**source_options(args)).load().select(*COLUMNS)
    started = time.monotonic()
    frame.write.mode("overwrite").parquet(args.output)
    seconds = time.monotonic() - started
    written = spark.read.parquet(args.output).count()
    summary = {"output": args.output, "rows": written, "seconds": round(seconds, 3), **source_options(args)}
    print("orders_batch " + json.dumps(summary, sort_keys=True), flush=True)
    spark.stop()
    return summary


if __name__ == "__main__":
    main()
