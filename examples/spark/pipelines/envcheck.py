"""Fail a Spark job early when its executors run other Python or package versions than its driver.

A PySpark job pickles functions on the driver and runs them in executor Python workers. When the two
sides differ (another Python minor, another pyarrow, an older `rocketcluster` in a stale executor
image), the job fails later and obscurely, or worse, reads rows differently. The example pipelines
call `check_executors()` first; it runs a few short tasks so every executor answers, compares each
answer with the driver's own, and raises `EnvironmentMismatch` naming the executor and the field.

The probe tasks are reads of a tiny Python data source (`envcheck_probe`, defined here), not RDD tasks:
an executor keeps separate pools of Python workers for RDD and SQL tasks (they differ in their
environment), and Python data sources, the `rocketmq` source among them, read in the SQL pool. So the
check answers from the very workers that will read, and, as it imports what a read imports, those
workers start the job's reads warm instead of each paying for a fresh Python process and its imports
(seconds on a busy node) in its first read task. (`mapInArrow` would also run there, but needs pandas
on the driver, which the Spark image does not carry.)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

__all__ = ["EnvironmentMismatch", "ProbeSource", "check_executors", "differences", "fingerprint"]

PACKAGES = ("pyspark", "pyarrow", "rocketcluster")


class EnvironmentMismatch(RuntimeError):
    """An executor's Python or packages differ from the driver's."""


def _source_digest() -> str:
    # Same version number, different code: an image rebuilt from another tree. The source files of
    # the data source itself are what executors run, so hash them.
    import broker.spark

    digest = hashlib.sha256()
    for path in sorted(Path(broker.spark.__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint() -> dict[str, str]:
    """What must be equal on the driver and every executor."""
    out = {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "broker.spark_sources": _source_digest(),
    }
    for package in PACKAGES:
        out[package] = importlib.metadata.version(package)
    return out


def differences(driver: Mapping[str, str], executors: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One line per executor field that differs from the driver's, e.g. `exec-1: pyarrow 26.0.1 != 25.0.0`."""
    lines = []
    for host in sorted(executors):
        theirs = executors[host]
        for key in sorted(set(driver) | set(theirs)):
            mine, other = driver.get(key, "(missing)"), theirs.get(key, "(missing)")
            if mine != other:
                lines.append(f"{host}: {key} {other} on the executor, {mine} on the driver")
    return lines


class ProbeSource(DataSource):
    """`spark.read.format("envcheck_probe").option("tasks", n).option("seconds", s)`: n partitions, each
    read as one row (executor host name, JSON fingerprint) after holding its task slot s seconds."""

    @classmethod
    def name(cls) -> str:
        return "envcheck_probe"

    def schema(self) -> str:
        return "host STRING, fingerprint STRING"

    def reader(self, schema: Any) -> DataSourceReader:
        return ProbeReader(int(self.options.get("tasks", "1")), float(self.options.get("seconds", "0")))


class ProbeReader(DataSourceReader):
    def __init__(self, tasks: int, seconds: float) -> None:
        self.tasks, self.seconds = tasks, seconds

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str]]:
        import broker.spark.reader  # noqa: F401  # what a rocketmq read task imports: loaded once in this worker

        # Holding the task slot a moment keeps one fast executor from taking every task.
        time.sleep(self.seconds)
        yield socket.gethostname(), json.dumps(fingerprint())


def _registered_executors(spark: Any) -> int:
    # The memory status map has one entry per block manager, the driver's included. PySpark has no
    # public call for the executor count.
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1


def check_executors(
    spark: Any, executors: int, *, wait_seconds: float = 300, task_seconds: float = 1.0
) -> dict[str, Any]:
    """Wait until `executors` executors registered, fingerprint every one, and raise
    EnvironmentMismatch on any difference. Returns {"driver": ..., "executors": {host: ...}}."""
    deadline = time.monotonic() + wait_seconds
    while _registered_executors(spark) < executors:
        if time.monotonic() > deadline:
            raise EnvironmentMismatch(f"only {_registered_executors(spark)} of {executors} executors registered")
        time.sleep(1)
    driver = fingerprint()
    spark.dataSource.register(ProbeSource)
    probes = spark.read.format("envcheck_probe").options(tasks=str(4 * executors), seconds=str(task_seconds)).load()
    seen: dict[str, dict[str, str]] = {row.host: json.loads(row.fingerprint) for row in probes.collect()}
    report = {"driver_host": socket.gethostname(), "driver": driver, "executors": seen}
    print("envcheck " + json.dumps(report, sort_keys=True), flush=True)
    problems = differences(driver, seen)
    if len(seen) < executors:
        problems.append(f"only {len(seen)} of {executors} executors ran a probe task: {', '.join(sorted(seen))}")
    if problems:
        raise EnvironmentMismatch("executors differ from the driver: " + "; ".join(problems))
    return report
