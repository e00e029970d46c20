"""The example pipelines of examples/spark/pipelines, in local mode against a live broker.

- envcheck: the differences it reports, by table, the fingerprint of this interpreter, and its probe tasks;
- orders_batch: time arguments, by table, the read stage taken from Spark's REST API, and a store-time
  range read into Parquet by its main();
- topic_once: a replayed micro-batch reaches the topic once, also after a run that sent part of it;
- orders_stream: one micro-batch of totals written twice (a replay) leaves one Parquet copy and one
  message per total in the sink topic.

The Kubernetes side of the same pipelines is e2e/test_spark_k8s.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from broker.client import Message
from tests.spark.spark_harness import ThreadedCluster

PIPELINES = Path(__file__).resolve().parents[2] / "examples" / "spark" / "pipelines"
sys.path.insert(0, str(PIPELINES))

import envcheck  # noqa: E402
import orders_batch  # noqa: E402
import orders_stream  # noqa: E402
import topic_once  # noqa: E402


@pytest.mark.parametrize(
    ("driver", "executors", "expected"),
    [
        ({"python": "3.11.2"}, {"exec-1": {"python": "3.11.2"}}, []),
        (
            {"python": "3.11.2", "pyarrow": "26.0.1"},
            {"exec-1": {"python": "3.11.2", "pyarrow": "25.0.0"}, "exec-2": {"python": "3.11.2", "pyarrow": "26.0.1"}},
            ["exec-1: pyarrow 25.0.0 on the executor, 26.0.1 on the driver"],
        ),
        (
            {"python": "3.11.2", "rocketcluster": "0.1.0"},
            {"exec-2": {"python": "3.12.1"}},
            [
                "exec-2: python 3.12.1 on the executor, 3.11.2 on the driver",
                "exec-2: rocketcluster (missing) on the executor, 0.1.0 on the driver",
            ],
        ),
    ],
)
def test_envcheck_names_every_difference(
    driver: dict[str, str], executors: dict[str, dict[str, str]], expected: list[str]
) -> None:
    assert envcheck.differences(driver, executors) == expected


def test_envcheck_fingerprint_is_this_interpreter() -> None:
    fp = envcheck.fingerprint()
    assert fp["python"] == ".".join(map(str, sys.version_info[:3]))
    assert fp["python_executable"] == sys.executable
    assert set(fp) >= {"pyspark", "pyarrow", "rocketcluster", "broker.spark_sources"}
    assert fp == envcheck.fingerprint()


def test_envcheck_probes_are_data_source_reads(
    spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """local mode: the driver is the one executor. The probes run (as reads of a Python data source, in
    the pool of Python workers the source's reads use) and report this interpreter's fingerprint."""
    spark.sparkContext.addPyFile(str(PIPELINES / "envcheck.py"))  # as /opt/pipelines is on executors' path
    monkeypatch.setattr(envcheck, "_registered_executors", lambda _spark: 1)
    report = envcheck.check_executors(spark, 1, task_seconds=0.0)
    assert list(report["executors"].values()) == [report["driver"]]
    assert capsys.readouterr().out.startswith("envcheck {")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
        ("2023-11-14T22:13:20.250Z", 1_700_000_000_250),
    ],
)
def test_batch_time_arguments(text: str, expected: int) -> None:
    assert orders_batch.epoch_ms(text) == expected


def test_batch_time_without_a_zone_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="no time zone"):
        orders_batch.epoch_ms("2023-11-14T22:13:20")


def test_batch_options_follow_the_arguments() -> None:
    args = orders_batch.parse_args(["--topic", "T", "--from", "5", "--to", "9", "--output", "/o"])
    assert orders_batch.source_options(args) == {"topic": "T", "startingTimestamp": "5", "endingTimestamp": "9"}
    with pytest.raises(SystemExit):
        orders_batch.parse_args(["--from", "9", "--to", "5", "--output", "/o"])


def test_batch_read_stage_from_sparks_rest_api() -> None:
    """The stage the summary reports: the job group's stage with input rows, timed by Spark."""
    api = {
        "/jobs": [
            {"jobId": 3, "jobGroup": "orders-batch-check", "stageIds": [5]},
            {"jobId": 1, "jobGroup": orders_batch.JOB_GROUP, "stageIds": [1]},
            {"jobId": 2, "jobGroup": orders_batch.JOB_GROUP, "stageIds": [2]},
        ],
        "/stages/1": [
            {
                "status": "COMPLETE",
                "attemptId": 0,
                "inputRecords": 100,
                "numCompleteTasks": 2,
                "submissionTime": "2026-11-25T21:27:51.063GMT",
                "completionTime": "2026-11-25T21:28:01.021GMT",
            },
        ],
        "/stages/1/0/taskList?length=100000": [
            {"status": "SUCCESS", "duration": 9000, "taskMetrics": {"executorCpuTime": 7_250_000_000}},
            {"status": "SUCCESS", "duration": 4500, "taskMetrics": {"executorCpuTime": 3_000_000_000}},
            {"status": "FAILED", "duration": 100},
        ],
        "/stages/2": [{"status": "COMPLETE", "attemptId": 0, "inputRecords": 0}],  # the commit's stage
        "/stages/5": [{"status": "COMPLETE", "attemptId": 0, "inputRecords": 100}],
    }
    stage = orders_batch.read_stage(api.__getitem__)
    assert stage == {
        "stage": 1,
        "rows": 100,
        "tasks": 2,
        "seconds": 9.958,
        "task_seconds": [4.5, 9.0],
        "task_jvm_cpu_seconds": [3.0, 7.25],
    }
    assert orders_batch.read_stage({"/jobs": []}.__getitem__) is None


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_batch_job_reads_a_store_time_range_into_parquet(
    spark: Any, cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = "ExampleBatchRange"
    cluster.create_topic(topic, 2)
    cluster.send([Message(topic, f"before-{i}".encode()) for i in range(30)])
    time.sleep(0.02)
    start = _now_ms()
    time.sleep(0.02)
    cluster.send([Message(topic, f"inside-{i}".encode(), tags="t") for i in range(70)])
    time.sleep(0.02)
    end = _now_ms()
    time.sleep(0.02)
    cluster.send([Message(topic, f"after-{i}".encode()) for i in range(30)])
    # main() stops the session it gets; the shared session must survive it.
    monkeypatch.setattr(spark, "stop", lambda: None)
    out = tmp_path / "range"
    args = ["--topic", topic, "--name-server", cluster.namesrv_addr, "--from", str(start), "--to", str(end)]
    summary = orders_batch.main([*args, "--output", str(out), "--max-partitions", "1"])
    assert summary["rows"] == 70 and summary["maxPartitions"] == "1"
    assert "read_stage" not in summary  # the tests' session runs without the UI
    bodies = sorted(bytes(r.body) for r in spark.read.parquet(str(out)).collect())
    assert bodies == sorted(f"inside-{i}".encode() for i in range(70))


def _sink_frame(spark: Any, keys: list[str]) -> Any:
    return spark.createDataFrame([(k.encode(), k, "total") for k in keys], "body BINARY, keys STRING, tags STRING")


def _topic_keys(cluster: ThreadedCluster, topic: str) -> Counter[str]:
    """Keys of every message in the topic, pulled with the source's range reader outside Spark."""
    from broker.spark.client import PullSpec, QueueClient
    from broker.spark.rows import record_batch

    client = QueueClient(cluster.namesrv_addr)
    try:
        mqs = client.queues([topic])
        highs = client.max_offsets(mqs)
        spec = PullSpec(namesrv=cluster.namesrv_addr, group="example-tests")
        keys: Counter[str] = Counter()
        for mq in mqs:
            for body in client.pull_range(spec, mq, 0, highs[mq]):
                keys.update(record_batch(mq.broker_name, body, highs[mq]).column("keys").to_pylist())
        return keys
    finally:
        client.close()


def test_a_replayed_batch_reaches_the_topic_once(spark: Any, cluster: ThreadedCluster, tmp_path: Path) -> None:
    topic = "ExampleTopicOnce"
    cluster.create_topic(topic, 2)
    options = {"nameServer": cluster.namesrv_addr}
    keys = [f"q/2026-11-25T10:0{i}Z/books" for i in range(6)]
    marks = tmp_path / "marks"

    sent = topic_once.write_once(_sink_frame(spark, keys), 3, topic=topic, marks=marks, options=options)
    assert sent == 6
    # Spark replays batch 3 after a driver crash: nothing more reaches the topic.
    assert topic_once.write_once(_sink_frame(spark, keys), 3, topic=topic, marks=marks, options=options) == 0
    assert _topic_keys(cluster, topic) == Counter({k: 1 for k in keys})
    # The next batch removes the older mark (Spark never replays a committed batch).
    assert topic_once.write_once(_sink_frame(spark, []), 4, topic=topic, marks=marks, options=options) == 0
    assert sorted(p.name for p in marks.iterdir()) == ["batch-4.json"]


def test_a_batch_half_sent_before_a_crash_is_completed_once(
    spark: Any, cluster: ThreadedCluster, tmp_path: Path
) -> None:
    topic = "ExampleTopicHalf"
    cluster.create_topic(topic, 2)
    options = {"nameServer": cluster.namesrv_addr}
    keys = [f"q/2026-11-25T11:0{i}Z/games" for i in range(8)]
    marks = tmp_path / "marks"
    # The crashed run: its mark was written, then 3 of 8 rows were sent.
    topic_once._write_mark(marks, 9, _now_ms())
    cluster.send([Message(topic, k.encode(), tags="total", keys=[k]) for k in keys[:3]])
    assert topic_once.write_once(_sink_frame(spark, keys), 9, topic=topic, marks=marks, options=options) == 5
    assert _topic_keys(cluster, topic) == Counter({k: 1 for k in keys})


def test_a_totals_batch_written_twice_is_stored_once(spark: Any, cluster: ThreadedCluster, tmp_path: Path) -> None:
    topic = "ExampleTotals"
    cluster.create_topic(topic, 2)
    minute = datetime(2026, 11, 25, 10, 1, tzinfo=UTC)
    totals = spark.createDataFrame(
        [(minute, "books", 3, 300, 12345), (minute, "", 1, 5, 99)],
        "minute TIMESTAMP, tag STRING, orders BIGINT, amount_cents BIGINT, body_crc_sum BIGINT",
    )
    write = orders_stream.totals_writer(tmp_path, topic, "orders-per-minute", {"nameServer": cluster.namesrv_addr})
    write(totals, 0)
    write(totals, 0)  # the replay of batch 0 after a restart
    stored = spark.read.parquet(str(tmp_path / "per_minute")).collect()
    assert sorted((r.tag, r.orders, r.batch_id) for r in stored) == [("", 1, 0), ("books", 3, 0)]
    keys = _topic_keys(cluster, topic)
    assert keys == Counter({"orders-per-minute/2026-11-25T10:01Z/books": 1, "orders-per-minute/2026-11-25T10:01Z/": 1})


def test_stream_totals_per_minute_and_tag(spark: Any) -> None:
    rows = [
        ("books", datetime(2026, 11, 25, 10, 1, 5, tzinfo=UTC), 100, b"a"),
        ("books", datetime(2026, 11, 25, 10, 1, 59, tzinfo=UTC), 250, b"b"),
        ("games", datetime(2026, 11, 25, 10, 1, 30, tzinfo=UTC), 7, b"c"),
        ("books", datetime(2026, 11, 25, 10, 2, 0, tzinfo=UTC), 1, b"d"),
    ]
    frame = spark.createDataFrame(rows, "tag STRING, event_time TIMESTAMP, amount_cents BIGINT, body BINARY")
    # PySpark hands timestamps back as naive local times; .timestamp() reads them the same way.
    got = {
        (int(r.minute.timestamp()), r.tag): (r.orders, r.amount_cents, r.body_crc_sum)
        for r in orders_stream.per_minute(frame, "30 seconds").collect()
    }
    crc = {b: zlib.crc32(b) for b in (b"a", b"b", b"c", b"d")}
    ten_one, ten_two = (int(datetime(2026, 11, 25, 10, m, tzinfo=UTC).timestamp()) for m in (1, 2))
    assert got == {
        (ten_one, "books"): (2, 350, crc[b"a"] + crc[b"b"]),
        (ten_one, "games"): (1, 7, crc[b"c"]),
        (ten_two, "books"): (1, 1, crc[b"d"]),
    }
    messages = orders_stream.as_messages(orders_stream.per_minute(frame, "30 seconds"), "q").collect()
    assert sorted(m.keys for m in messages) == [
        "q/2026-11-25T10:01Z/books",
        "q/2026-11-25T10:01Z/games",
        "q/2026-11-25T10:02Z/books",
    ]
    assert json.loads(messages[0].body)["orders"] >= 1
