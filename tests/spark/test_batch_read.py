"""Batch reads through Spark against a live broker: every offset form returns exactly the expected rows.

200 messages go to a 4-queue topic in two halves with a timestamp between them; each test reads
with one option form and compares the (queue, offset, body) set with what the producer's send
results say is there.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest

from broker.client import Message, SendResult
from tests.spark.spark_harness import ThreadedCluster

TOPIC = "SparkBatch"
OTHER = "SparkBatchOther"
TAGS = ("TagA", "TagB", "TagC")


@dataclass
class Sent:
    results: list[SendResult]
    msgs: list[Message]
    mid_ms: int  # between the two halves

    def rows(self, keep: Any = lambda r, m: True) -> set[tuple[str, int, int, bytes]]:
        return {
            (r.message_queue.topic, r.message_queue.queue_id, r.queue_offset, m.body)
            for r, m in zip(self.results, self.msgs, strict=True)
            if keep(r, m)
        }

    def max_offsets(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for r in self.results:
            if r.message_queue.topic == TOPIC:
                out[r.message_queue.queue_id] = max(out.get(r.message_queue.queue_id, 0), r.queue_offset + 1)
        return out


def make(topic: str, i: int) -> Message:
    return Message(
        topic,
        f"{topic}-{i}".encode(),
        tags=TAGS[i % 3],
        keys=[f"k{i}", f"alt{i}"],
        properties={"idx": str(i), "ünï": "çødé"},
    )


@pytest.fixture(scope="module")
def sent(cluster: ThreadedCluster) -> Sent:
    cluster.create_topic(TOPIC, 4)
    cluster.create_topic(OTHER, 2)
    first = [make(TOPIC, i) for i in range(100)]
    results = cluster.send(first)
    time.sleep(0.05)
    mid_ms = int(time.time() * 1000)
    time.sleep(0.05)
    second = [make(TOPIC, i) for i in range(100, 200)] + [make(OTHER, i) for i in range(20)]
    results += cluster.send(second)
    return Sent(results, first + second, mid_ms)


def read(spark: Any, cluster: ThreadedCluster, **options: str) -> list[Any]:
    reader = spark.read.format("rocketmq").option("nameServer", cluster.namesrv_addr)
    options.setdefault("topic", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().collect()


def keyset(rows: list[Any]) -> set[tuple[str, int, int, bytes]]:
    return {(r.topic, r.queue_id, r.queue_offset, bytes(r.body)) for r in rows}


def test_default_reads_everything_with_every_column(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    rows = read(spark, cluster)
    assert len(rows) == 200
    assert keyset(rows) == sent.rows(lambda r, m: m.topic == TOPIC)
    by_id = {r.msg_id: r for r in rows}
    for result, msg in zip(sent.results, sent.msgs, strict=True):
        if msg.topic != TOPIC:
            continue
        row = by_id[result.msg_id]  # msg_id is the producer's UNIQ_KEY
        i = int(msg.properties["idx"])
        assert (row.broker, row.queue_id, row.queue_offset) == (
            "broker-s",
            result.message_queue.queue_id,
            result.queue_offset,
        )
        assert row.tags == TAGS[i % 3]
        assert row.keys == f"k{i} alt{i}"
        assert row.properties["idx"] == str(i) and row.properties["ünï"] == "çødé"
        assert row.properties["UNIQ_KEY"] == result.msg_id
        assert row.born_timestamp is not None and row.store_timestamp >= row.born_timestamp


def test_latest_start_reads_nothing(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    assert read(spark, cluster, startingOffsets="latest") == []


def test_json_offsets_per_queue(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    highs = sent.max_offsets()
    assert all(h >= 20 for h in highs.values()), highs
    starting = {TOPIC: {"broker-s/0": 3, "broker-s/1": -2, "broker-s/3": 7}}  # queue 2 unlisted: earliest
    ending = {TOPIC: {"broker-s/0": 10, "broker-s/2": 5, "broker-s/3": -1}}  # queue 1 unlisted: latest
    bounds = {0: (3, 10), 1: (0, highs[1]), 2: (0, 5), 3: (7, highs[3])}
    rows = read(spark, cluster, startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    expected = sent.rows(
        lambda r, m: (
            m.topic == TOPIC
            and bounds[r.message_queue.queue_id][0] <= r.queue_offset < bounds[r.message_queue.queue_id][1]
        )
    )
    assert keyset(rows) == expected
    assert len(rows) == len(expected) == 7 + highs[1] + 5 + highs[3] - 7


def test_starting_timestamp_reads_the_second_half(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    rows = read(spark, cluster, startingTimestamp=str(sent.mid_ms))
    assert keyset(rows) == sent.rows(lambda r, m: m.topic == TOPIC and int(m.properties["idx"]) >= 100)


def test_ending_timestamp_reads_the_first_half(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    rows = read(spark, cluster, endingTimestamp=str(sent.mid_ms))
    assert keyset(rows) == sent.rows(lambda r, m: m.topic == TOPIC and int(m.properties["idx"]) < 100)


def test_time_range_ending_in_the_future_stops_at_the_queues_ends(
    spark: Any, cluster: ThreadedCluster, sent: Sent
) -> None:
    later = int(time.time() * 1000) + 3_600_000
    rows = read(spark, cluster, startingTimestamp=str(sent.mid_ms), endingTimestamp=str(later))
    assert keyset(rows) == sent.rows(lambda r, m: m.topic == TOPIC and int(m.properties["idx"]) >= 100)


def test_tag_filter_is_exact(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    rows = read(spark, cluster, subExpression="TagA || TagC")
    assert keyset(rows) == sent.rows(lambda r, m: m.topic == TOPIC and m.tags in ("TagA", "TagC"))
    assert {r.tags for r in rows} == {"TagA", "TagC"}


def test_max_records_per_partition_splits_ranges(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    df = (
        spark.read.format("rocketmq")
        .options(nameServer=cluster.namesrv_addr, topic=TOPIC, maxRecordsPerPartition="7")
        .load()
    )
    highs = sent.max_offsets()
    assert df.rdd.getNumPartitions() == sum(-(-h // 7) for h in highs.values())
    assert keyset(df.collect()) == sent.rows(lambda r, m: m.topic == TOPIC)


def test_max_partitions_packs_queue_ranges_into_fewer_tasks(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    df = (
        spark.read.format("rocketmq")
        .options(nameServer=cluster.namesrv_addr, topic=f"{TOPIC},{OTHER}", maxPartitions="2")
        .load()
    )
    assert df.rdd.getNumPartitions() == 2  # 6 queue ranges
    rows = df.collect()
    assert keyset(rows) == sent.rows() and len(rows) == 220
    split = df.sparkSession.read.format("rocketmq").options(
        nameServer=cluster.namesrv_addr, topic=TOPIC, maxPartitions="3", maxRecordsPerPartition="10"
    )
    assert split.load().rdd.getNumPartitions() == 3
    assert keyset(split.load().collect()) == sent.rows(lambda r, m: m.topic == TOPIC)


def test_topic_list(spark: Any, cluster: ThreadedCluster, sent: Sent) -> None:
    rows = read(spark, cluster, topic=f"{TOPIC}, {OTHER}")
    assert keyset(rows) == sent.rows()
    assert len(rows) == 220


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endingOffsets": json.dumps({TOPIC: {"broker-s/0": 10_000}})}, "endingOffsets past the end of a queue"),
        ({"startingOffsets": json.dumps({TOPIC: {"broker-s/9": 0}})}, "names queues that do not exist"),
        ({"topic": "NoSuchTopic"}, "topic NoSuchTopic does not exist"),
        ({"startingOfsets": "earliest"}, "unknown source option(s) startingofsets"),
    ],
)
def test_bad_reads_fail_at_planning_with_a_clear_message(
    spark: Any, cluster: ThreadedCluster, sent: Sent, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception) as err:
        read(spark, cluster, **options)
    assert message in str(err.value)
