"""Batch example: the messages a topic stored in a time range, to Parquet.

    orders_batch.py --topic orders --from 2026-11-25T10:00:00Z --to 2026-11-25T11:00:00Z \\
                    --output /data/orders-by-hour/2026-11-25T10 [--check-executors 2] [--measure-read]

`--from` is inclusive and `--to` exclusive, compared with each message's store time (the source's
`startingTimestamp` / `endingTimestamp`); either takes ISO 8601 or milliseconds since the epoch. The
output is overwritten, so running the same range again is safe. The NameServer address comes from the
NAMESRV_ADDR environment variable (or --name-server). The last line of the driver's log is a JSON summary:
`rows` written, `seconds` of the whole write (planning, the read-and-write stage, the output commit),
and, when the Spark UI is on, `write_stage`: the stage that read the topic and wrote the Parquet files
(in the same tasks) as Spark's own status reports it, from its REST API.

`--measure-read` first reads the range once more without writing it: a job with Spark's `noop` sink,
which consumes every row and stores nothing (Spark has it for benchmarks). The summary then also has
`read_seconds` (that whole job) and `read_stage` (its stage): the source's read throughput, without
the Parquet writer's share. It runs before the write, so it pays the JVMs' cold start, not the write.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

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
    parser.add_argument("--max-partitions", type=int, default=0, help="pack the queues into at most N tasks")
    parser.add_argument("--check-executors", type=int, default=0, help="compare versions on N executors first")
    parser.add_argument(
        "--measure-read", action="store_true", help="read the range with the noop sink first, and time that read"
    )
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
    if args.max_partitions:
        options["maxPartitions"] = str(args.max_partitions)
    return options


JOB_GROUP = "orders-batch-write"
READ_GROUP = "orders-batch-read"

# Parquet dictionary encoding only where values repeat (topic, broker, queue_id, tags, property names): on
# unique values (ids, keys, bodies, offsets, times) a dictionary is built per page and then given up,
# which cost about a quarter of the write's CPU for the same file size.
PARQUET_OPTIONS = {
    f"parquet.enable.dictionary#{column}": "false"
    for column in (
        "msg_id",
        "keys",
        "body",
        "queue_offset",
        "born_timestamp",
        "store_timestamp",
        "properties.key_value.value",
    )
}


def _ui_time(text: str) -> float:
    """Seconds since the epoch of a time in Spark's REST API (`2026-11-25T21:27:51.063GMT`)."""
    return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def read_stage(fetch: Callable[[str], Any], group: str = JOB_GROUP) -> dict[str, Any] | None:
    """The stage of the job group `group` that read the source, from Spark's REST API (`fetch(path)`
    returns the JSON of `/api/v1/applications/<app>` + path): its rows, its tasks and how long it ran,
    from its submission to its completion; each successful task's duration (start-up included) and, in
    the same order, the CPU time of its JVM thread (the Python worker's CPU is not in it)."""
    stage_ids = [s for job in fetch("/jobs") if job.get("jobGroup") == group for s in job["stageIds"]]
    for stage_id in sorted(stage_ids):
        for attempt in fetch(f"/stages/{stage_id}"):
            if attempt.get("status") != "COMPLETE" or not attempt.get("inputRecords"):
                continue
            tasks = fetch(f"/stages/{stage_id}/{attempt['attemptId']}/taskList?length=100000")
            done = sorted((t for t in tasks if t.get("status") == "SUCCESS"), key=lambda t: t["duration"])
            return {
                "stage": stage_id,
                "rows": attempt["inputRecords"],
                "tasks": attempt["numCompleteTasks"],
                "seconds": round(_ui_time(attempt["completionTime"]) - _ui_time(attempt["submissionTime"]), 3),
                "task_seconds": [round(t["duration"] / 1000, 3) for t in done],
                "task_jvm_cpu_seconds": [
                    round(t.get("taskMetrics", {}).get("executorCpuTime", 0) / 1e9, 3) for t in done
                ],
            }
    return None


def ui_fetch(spark: Any) -> Callable[[str], Any] | None:
    """A reader of this driver's REST API, on the loopback address (the UI listens on every address)."""
    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    base = f"http://127.0.0.1:{urlsplit(url).port}/api/v1/applications/{spark.sparkContext.applicationId}"

    def fetch(path: str) -> Any:
        with urllib.request.urlopen(base + path, timeout=30) as resp:
            return json.load(resp)

    return fetch


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
    summary: dict[str, Any] = {"output": args.output}
    if args.measure_read:
        spark.sparkContext.setJobGroup(READ_GROUP, f"read {args.topic}")
        started = time.monotonic()
        frame.write.format("noop").mode("overwrite").save()
        summary["read_seconds"] = round(time.monotonic() - started, 3)
    spark.sparkContext.setJobGroup(JOB_GROUP, f"{args.topic} to {args.output}")
    started = time.monotonic()
    frame.write.mode("overwrite").options(**PARQUET_OPTIONS).parquet(args.output)
    seconds = time.monotonic() - started
    spark.sparkContext.setJobGroup("orders-batch-check", "count the output")
    written = spark.read.parquet(args.output).count()
    summary.update(rows=written, seconds=round(seconds, 3), **source_options(args))
    fetch = ui_fetch(spark)
    if fetch is not None:
        try:
            summary["write_stage"] = read_stage(fetch, JOB_GROUP)
            if args.measure_read:
                summary["read_stage"] = read_stage(fetch, READ_GROUP)
        except OSError as exc:  # the figures are informational: the job's output is what counts
            log.warning("Spark's REST API did not answer: %s", exc)
    print("orders_batch " + json.dumps(summary, sort_keys=True), flush=True)
    spark.stop()
    return summary


if __name__ == "__main__":
    main()
