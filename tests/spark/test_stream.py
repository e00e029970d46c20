"""Streaming reads: maxOffsetsPerTrigger bounds every micro-batch, the true latest offset shows in
query progress, offsets are checkpointed in the sorted layout, and the optional consumer-group
progress report makes `consumerProgress` show the query's position (one batch behind)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.client import Message
from tests.spark.spark_harness import ThreadedCluster

TOPIC = "SparkStreamCap"
GROUP = "spark-progress-group"


def test_max_offsets_per_trigger_bounds_each_batch(spark: Any, cluster: ThreadedCluster, tmp_path: Path) -> None:
    cluster.create_topic(TOPIC, 4)
    results = cluster.send([Message(TOPIC, f"cap-{i}".encode(), tags="T") for i in range(50)])
    highs: dict[str, int] = {}
    for r in results:
        key = f"{r.message_queue.broker_name}/{r.message_queue.queue_id}"
        highs[key] = max(highs.get(key, 0), r.queue_offset + 1)
    latest = {TOPIC: {k: highs[k] for k in sorted(highs)}}
    # Before the query the group has nothing committed.
    assert all(c == -1 for _, c in cluster.queue_offsets(TOPIC, GROUP).values())

    checkpoint = tmp_path / "checkpoint"
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_addr)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "12")
        .option("progressGroup", GROUP)
        .load()
    )
    query = (
        df.writeStream.format("memory")
        .queryName("cap_sink")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in progress] == [12, 12, 12, 12, 2]
    # reportLatestOffset: every batch shows the queues' true end, not the capped batch end.
    for p in progress:
        assert json.loads(p["sources"][0]["latestOffset"]) == latest
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == latest
    assert json.loads(progress[0]["sources"][0]["endOffset"]) != latest

    rows = spark.sql("select queue_id, queue_offset, body from cap_sink").collect()
    assert len(rows) == 50
    assert {bytes(r.body) for r in rows} == {f"cap-{i}".encode() for i in range(50)}

    # The checkpointed offsets are the sorted JSON layout.
    last = max((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    assert last.read_text().splitlines()[-1] == json.dumps(latest)

    # Progress goes to the group as Spark reports finished batches to the source, which it does
    # when it plans the next batch: after an availableNow run the group stands at the end of the
    # second-to-last batch, and consumerProgress shows the last batch's 2 messages as lag.
    committed = {f"{b}/{qid}": c for (qid, b), (_, c) in cluster.queue_offsets(TOPIC, GROUP).items()}
    assert committed == json.loads(progress[-2]["sources"][0]["endOffset"])[TOPIC]
    assert sum(latest[TOPIC].values()) - sum(committed.values()) == 2
