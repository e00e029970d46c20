"""Write each micro-batch's rows to a topic exactly once, across driver restarts (for `foreachBatch`).

The `rocketmq` sink is at-least-once: when a driver dies after sending part or all of micro-batch N but
before Spark committed N, the restarted query runs N again and its rows are sent again. Spark replays
exactly the same rows for N (same offsets, same state), so the replay only has to skip the rows that
already reached the topic. That needs two things:

- every row has a deterministic, unique key (the `keys` column), such as `<query>/<window>/<tag>`;
- a mark, written before the first send of N, that says when N started. On a replay the mark exists,
  so the topic is read back from a little before that time with the `rocketmq` source, and rows whose
  key is already there are dropped before sending.

The mark lives on durable storage next to the checkpoint. Only a replay reads the topic, and only the
minutes since N started. Spark replays only the last uncommitted batch, so older marks are deleted.

Not covered: a task retried within one run of a batch (an executor lost while it sent) re-sends that
task's rows. Consumers that must never see a duplicate de-duplicate on the key.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["MARGIN_MS", "write_once"]

#: How far before the mark's time a replay starts reading the topic: the mark uses the driver's clock,
#: store timestamps the broker's; this covers clock skew between them and slow first sends.
MARGIN_MS = 5 * 60 * 1000


def _mark_path(marks: Path, batch_id: int) -> Path:
    return marks / f"batch-{batch_id}.json"


def _write_mark(marks: Path, batch_id: int, now_ms: int) -> None:
    marks.mkdir(parents=True, exist_ok=True)
    path = _mark_path(marks, batch_id)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"batch_id": batch_id, "started_ms": now_ms}))
    os.replace(tmp, path)  # a crash leaves the old state or the whole mark, never half of it


def _drop_old_marks(marks: Path, batch_id: int) -> None:
    for path in marks.glob("batch-*.json"):
        try:
            number = int(path.stem.removeprefix("batch-"))
        except ValueError:
            continue
        if number < batch_id:
            path.unlink(missing_ok=True)


def write_once(df: Any, batch_id: int, *, topic: str, marks: Path, options: dict[str, str] | None = None) -> int:
    """Send the rows of `df` (columns body, keys and optionally tags, properties) to `topic`, except
    those whose key a previous run of this batch already sent. Returns the number of rows sent."""
    from pyspark.sql import functions as F

    options = options or {}
    mark = _mark_path(marks, batch_id)
    if mark.exists():
        started = int(json.loads(mark.read_text())["started_ms"])
        sent = (
            df.sparkSession.read.format("rocketmq")
            .options(**options)
            .option("topic", topic)
            .option("startingTimestamp", str(max(0, started - MARGIN_MS)))
            .load()
            .select(F.col("keys"))
            .distinct()
        )
        df = df.join(sent, on="keys", how="left_anti")
    else:
        _write_mark(marks, batch_id, int(time.time() * 1000))
    pending = df.persist()
    try:
        count = int(pending.count())
        if count:
            pending.write.format("rocketmq").options(**options).option("topic", topic).mode("append").save()
    finally:
        pending.unpersist()
    _drop_old_marks(marks, batch_id)
    return count
