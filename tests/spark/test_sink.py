"""The rocketmq sink: batch and streaming writes, read back by a push consumer with every field."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from broker.client import Message
from tests.spark.spark_harness import ThreadedCluster


def test_batch_write_is_readable_by_a_push_consumer(spark: Any, cluster: ThreadedCluster) -> None:
    topic = "SparkSinkBatch"
    cluster.create_topic(topic, 4)
    rows = [
        (f"row-{i}".encode(), f"k{i} other{i}" if i % 2 else None, f"Tag{i % 3}", {"idx": str(i)}) for i in range(100)
    ]
    df = spark.createDataFrame(rows, "body BINARY, keys STRING, tags STRING, properties MAP<STRING, STRING>")
    df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic).mode("append").save()

    got = cluster.push_consume(topic, "sink-batch-check", 100)
    assert Counter(m.body for m in got) == Counter(r[0] for r in rows)  # each exactly once
    for m in got:
        i = int(m.properties["idx"])
        assert m.body == f"row-{i}".encode()
        assert m.tags == f"Tag{i % 3}"
        assert m.keys == ([f"k{i}", f"other{i}"] if i % 2 else [])


def test_streaming_sink_copies_a_topic(spark: Any, cluster: ThreadedCluster, tmp_path: Path) -> None:
    source, target = "SparkSinkSrc", "SparkSinkOut"
    cluster.create_topic(source, 2)
    cluster.create_topic(target, 4)
    cluster.send([Message(source, f"copy-{i}".encode(), tags="C", keys=[f"ck{i}"]) for i in range(60)])
    stream = (
        spark.readStream.format("rocketmq")
        .options(nameServer=cluster.namesrv_addr, topic=source, startingOffsets="earliest", maxOffsetsPerTrigger="25")
        .load()
        .selectExpr(
            "body", "keys", "tags", "map('copied_from', concat(broker, '/', queue_id, '@', queue_offset)) AS properties"
        )
    )
    query = (
        stream.writeStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_addr)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [25, 25, 10]

    got = cluster.push_consume(target, "sink-stream-check", 60)
    assert Counter(m.body for m in got) == Counter(f"copy-{i}".encode() for i in range(60))
    assert len({m.properties["copied_from"] for m in got}) == 60
    assert all(m.tags == "C" and m.keys == [f"ck{m.body.decode().split('-')[1]}"] for m in got)


@pytest.mark.parametrize(
    ("columns", "mode", "message"),
    [
        (["CAST('x' AS BINARY) AS payload"], "append", "needs a body column"),
        (["CAST('x' AS BINARY) AS body", "5 AS tags"], "append", "column tags has type int"),
        (["CAST('x' AS BINARY) AS body"], "overwrite", "use mode('append')"),
    ],
)
def test_unwritable_frames_fail_before_sending(
    spark: Any, cluster: ThreadedCluster, columns: list[str], mode: str, message: str
) -> None:
    df = spark.range(1).selectExpr(*columns)
    with pytest.raises(Exception) as err:
        df.write.format("rocketmq").options(nameServer=cluster.namesrv_addr, topic="Unused").mode(mode).save()
    assert message in str(err.value)
