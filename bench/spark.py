"""Spark data source benchmark: `python -m bench.spark [--messages N] [--markdown FILE]`.

Starts a NameServer and a broker in a child process (so the Spark side does not share its event
loop), fills a 4-queue topic with the Python producer (pipelined), then, on the same data in the same
run, measures:

- raw pull throughput of the Python client: PullConsumer (assign + poll) and the source's own
  range pull loop without Spark (broker.spark.client), decoding every message;
- the batch source: `spark.read.format("rocketmq")` materialised with the noop sink;
- the streaming source: Trigger.AvailableNow with maxOffsetsPerTrigger=100000, noop sink, per-batch
  durations from query progress;
- the sink: a DataFrame of N rows written with `format("rocketmq")` against the producer's rate.

Spark runs local[2] with 1 GiB driver memory; timings exclude JVM start and include a warm-up read.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cluster import start_cluster
from broker.client import ClientConfig, ConsumeFromWhere, Message, MessageQueue, Producer, PullConsumer
from broker.client.blocking import LoopThread

__all__ = ["main"]

TOPIC = "SparkBenchTopic"
SINK_TOPIC = "SparkBenchSink"
WARM_TOPIC = "SparkBenchWarm"
QUEUES = 4

# The child process: NameServer + broker on one uvloop, ports printed for the parent.


async def _create_topics(namesrv: str, topics: list[str]) -> None:
    from broker.client import Admin

    async with Admin(namesrv) as admin:
        for topic in topics:
            await admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        for _ in range(200):
            if set(topics) <= set(await admin.topic_list()):
                return
            await asyncio.sleep(0.05)
    raise RuntimeError("topics never reached the NameServer")


async def _produce(namesrv: str, topic: str, n: int, size: int, window: int) -> float:
    """Pipelined sends (`window` in flight); returns messages/s."""
    producer = Producer("bench-spark-producer", client_config=ClientConfig(namesrv_addr=namesrv, instance_name="bp"))
    await producer.start()
    body = b"x" * size
    slots = asyncio.Semaphore(window)

    async def one(i: int) -> None:
        async with slots:
            await producer.send(Message(topic, body, tags="bench", keys=[f"k{i}"]))

    try:
        await producer.send(Message(topic, body))  # route and connection are warm before timing
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n - 1)))
        return (n - 1) / (time.perf_counter() - started)
    finally:
        await producer.shutdown()


async def _pull_consumer(namesrv: str, n: int) -> float:
    consumer = PullConsumer(
        "bench-spark-pull",
        client_config=ClientConfig(namesrv_addr=namesrv, instance_name="bpc"),
        auto_commit=False,
        pull_batch_size=1024,
        pull_threshold_for_queue=4096,  # room for a few full pulls per queue, so flow control does not stall
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    mqs = [MessageQueue(TOPIC, "broker-bench", q) for q in range(QUEUES)]
    consumer.assign(mqs)
    await consumer.start()
    try:
        for mq in mqs:
            await consumer.seek(mq, 0)
        got = 0
        started = time.perf_counter()
        while got < n:
            msgs = await consumer.poll(5.0)
            if not msgs:
                raise RuntimeError(f"PullConsumer stalled after {got} of {n}")
            got += len(msgs)
        return got / (time.perf_counter() - started)
    finally:
        await consumer.shutdown()


def _range_pull(namesrv: str, highs: dict[MessageQueue, int]) -> float:
    """The source's executor path without Spark: pull loop + decode to Arrow, queues one after another."""
    from broker.spark.client import PullSpec, client_for
    from broker.spark.rows import record_batch

    client = client_for(namesrv)
    spec = PullSpec(namesrv=namesrv, group="bench-spark-range")
    got = 0
    started = time.perf_counter()
    for mq, high in sorted(highs.items()):
        for body in client.pull_range(spec, mq, 0, high):
            got += record_batch(mq.broker_name, body, high).num_rows
    return got / (time.perf_counter() - started)


def _spark(tmp: Path) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from broker.spark import RocketMQDataSource

    spark = (
        SparkSession.builder.appName("bench-spark")
        .master("local[2]")
        .config("spark.driver.host", "127.0.0.1")  # loopback only, not the host's first interface
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(tmp))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)
    return spark


def _timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=256, help="body bytes")
    parser.add_argument("--window", type=int, default=256, help="sends in flight (producer and sink)")
    parser.add_argument("--markdown", type=Path, help="write a results block for docs/benchmarks.md here")
    args = parser.parse_args(argv)
    n = args.messages
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    proc, namesrv = start_cluster(root, "broker-bench")
    lt = LoopThread("bench-spark")
    results: dict[str, float] = {}
    batches: list[tuple[int, float]] = []
    try:
        lt.run(_create_topics(namesrv, [TOPIC, SINK_TOPIC, WARM_TOPIC]))
        print(f"producing {n} messages of {args.size} B ...", flush=True)
        results["producer"] = lt.run(_produce(namesrv, TOPIC, n, args.size, args.window))
        lt.run(_produce(namesrv, WARM_TOPIC, 2000, args.size, args.window))
        results["pull_consumer"] = lt.run(_pull_consumer(namesrv, n))
        from broker.spark.client import client_for

        meta = client_for(namesrv)
        highs = meta.max_offsets(meta.queues([TOPIC]))
        assert sum(highs.values()) == n, highs
        results["range_pull"] = _range_pull(namesrv, highs)
        print(f"raw pulls: {results['pull_consumer']:,.0f} / {results['range_pull']:,.0f} msg/s", flush=True)

        spark = _spark(root / "spark")
        opts = {"nameServer": namesrv}

        def read_batch(topic: str) -> None:
            spark.read.format("rocketmq").options(topic=topic, **opts).load().write.format("noop").mode(
                "overwrite"
            ).save()

        read_batch(WARM_TOPIC)  # Python workers and the JIT warm
        results["spark_batch"] = n / _timed(lambda: read_batch(TOPIC))

        stream = spark.readStream.format("rocketmq").options(
            topic=TOPIC, startingOffsets="earliest", maxOffsetsPerTrigger="100000", **opts
        )
        query = (
            stream.load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(root / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        elapsed = _timed(lambda: query.awaitTermination())
        batches = [
            (int(p["numInputRows"]), p["durationMs"]["triggerExecution"] / 1000)
            for p in query.recentProgress
            if p["numInputRows"]
        ]
        results["spark_stream"] = n / elapsed

        sink_df = spark.range(n).selectExpr(
            f"CAST(rpad(CAST(id AS STRING), {args.size}, 'x') AS BINARY) AS body", "'bench' AS tags"
        )
        sink_df.cache().count()  # generate the rows before timing the write
        results["sink"] = n / _timed(
            lambda: (
                sink_df.write.format("rocketmq")
                .options(topic=SINK_TOPIC, maxInFlight=str(args.window), **opts)
                .mode("append")
                .save()
            )
        )
        written = meta.max_offsets(meta.queues([SINK_TOPIC]))
        assert sum(written.values()) == n, written
        spark.stop()
    finally:
        lt.stop()
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    ratio_batch = results["spark_batch"] / results["pull_consumer"]
    ratio_stream = results["spark_stream"] / results["pull_consumer"]
    ratio_sink = results["sink"] / results["producer"]
    lines = [
        f"### bench/spark.py ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `.venv/bin/python -m bench.spark --messages {n}`. Machine: nproc={os.cpu_count()}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, pyspark "
        f"{__import__('pyspark').__version__}, Spark local[2], driver memory 1g; uptime: {uptime_before}. "
        f"Load after: {uptime_after}.",
        f"{n} messages of {args.size} B in {QUEUES} queues on one broker (own process); same data for every reader.",
        "",
        "| path | msgs/s | vs baseline |",
        "|---|---|---|",
        f"| Python producer, {args.window} in flight (baseline for the sink) | {results['producer']:,.0f} | 1.00 |",
        f"| PullConsumer assign+poll, pullBatchSize 1024 (baseline for reads) | {results['pull_consumer']:,.0f} "
        "| 1.00 |",
        f"| source pull + decode to Arrow, no Spark (1 process) | {results['range_pull']:,.0f} | "
        f"{results['range_pull'] / results['pull_consumer']:.2f} |",
        f"| Spark batch read, noop sink | {results['spark_batch']:,.0f} | {ratio_batch:.2f} |",
        f"| Spark streaming, availableNow, maxOffsetsPerTrigger 100000 | {results['spark_stream']:,.0f} | "
        f"{ratio_stream:.2f} |",
        f"| Spark sink (batch write), maxInFlight {args.window} | {results['sink']:,.0f} | {ratio_sink:.2f} |",
        "",
        "Streaming micro-batches (rows, seconds): " + ", ".join(f"{r:,} in {s:.2f} s" for r, s in batches) + ".",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")


if __name__ == "__main__":
    main()
