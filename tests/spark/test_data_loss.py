"""Retention gaps: offsets a query still has to read are deleted by the broker's retention.

A broker of its own with 64 KiB CommitLog files and fileReservedTime=0 holds one single-queue
topic. A streaming query reads the first 100 messages and checkpoints; 300 more arrive; retention
deletes every CommitLog file but the active one, so the queue's min offset jumps past the
checkpoint. Restarted from (copies of) the checkpoint, the query fails naming the lost offsets with
failOnDataLoss=true and reads exactly the surviving messages with false. Batch reads behave alike.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.client import Message
from tests.local_cluster import SMALL_INDEX
from tests.spark.spark_harness import ThreadedCluster

TOPIC = "SparkLoss"
BODY = b"x" * 1000


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    c = ThreadedCluster(
        tmp_path_factory.mktemp("loss-cluster"),
        broker_name="broker-l",
        mappedFileSizeCommitLog=64 * 1024,
        **SMALL_INDEX,
        fileReservedTime=0,
        deleteWhen=f"{(datetime.datetime.now().hour + 12) % 24:02d}",
    ).start()
    c.hold_retention()
    try:
        yield c
    finally:
        c.stop()


def body(i: int) -> bytes:
    return b"%05d" % i + BODY


def run_stream(spark: Any, cluster: ThreadedCluster, checkpoint: Path, out: Path, fail: bool) -> Any:
    df = (
        spark.readStream.format("rocketmq")
        .options(nameServer=cluster.namesrv_addr, topic=TOPIC, startingOffsets="earliest")
        .option("failOnDataLoss", str(fail).lower())
        .load()
        .select("queue_offset", "body")
    )
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(Exception):  # a failure is inspected through query.exception()
        query.awaitTermination(120)
    return query


def test_retention_gap_fails_or_skips(spark: Any, small_cluster: ThreadedCluster, tmp_path: Path) -> None:
    cluster = small_cluster
    cluster.create_topic(TOPIC, 1)
    cluster.send([Message(TOPIC, body(i)) for i in range(100)], window=1)
    first = run_stream(spark, cluster, tmp_path / "ckpt", tmp_path / "out1", fail=True)
    assert first.exception() is None
    assert spark.read.parquet(str(tmp_path / "out1")).count() == 100

    cluster.send([Message(TOPIC, body(i)) for i in range(100, 400)], window=1)
    assert cluster.expire_commit_log() > 0
    low = cluster.call(_min_offset(cluster))
    assert 100 < low < 400, low  # the gap starts at the checkpoint; some messages survive
    # The failing run goes on a copy: it leaves an offsets-log entry behind in its checkpoint.
    shutil.copytree(tmp_path / "ckpt", tmp_path / "ckpt-copy")
    failed = run_stream(spark, cluster, tmp_path / "ckpt-copy", tmp_path / "out-failed", fail=True)
    error = str(failed.exception())
    assert "data loss" in error
    assert f"{TOPIC}@broker-l:0: offsets 100..{low - 1} ({low - 100} messages)" in error
    assert "failOnDataLoss=false" in error

    skipped = run_stream(spark, cluster, tmp_path / "ckpt", tmp_path / "out1", fail=False)
    assert skipped.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out1")).collect()
    expected = [*range(100), *range(low, 400)]
    assert sorted(r.queue_offset for r in rows) == expected
    assert {bytes(r.body) for r in rows} == {body(i) for i in expected}

    # Batch reads from an explicit offset below the min: the same choice.
    start = json.dumps({TOPIC: {"broker-l/0": 50}})
    reader = spark.read.format("rocketmq").options(nameServer=cluster.namesrv_addr, topic=TOPIC, startingOffsets=start)
    with pytest.raises(Exception, match=rf"offsets 50\.\.{low - 1}"):
        reader.load().collect()
    rows = reader.option("failOnDataLoss", "false").load().collect()
    assert sorted(r.queue_offset for r in rows) == list(range(low, 400))


async def _min_offset(cluster: ThreadedCluster) -> int:
    from broker.client import Admin, MessageQueue

    async with Admin(cluster.namesrv_addr) as admin:
        route = await admin.topic_route(TOPIC)
        addr = route.master_addr("broker-l")
        assert addr is not None
        return await admin.instance.api.get_min_offset(addr, MessageQueue(TOPIC, "broker-l", 0))
