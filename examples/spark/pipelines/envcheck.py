"""Fail a Spark job early when its executors run other Python or package versions than its driver.

A PySpark job pickles functions on the driver and runs them in executor Python workers. When the two
sides differ (another Python minor, another pyarrow, an older `rocketcluster` in a stale executor
image), the job fails later and obscurely, or worse, reads rows differently. The example pipelines
call `check_executors()` first; it runs a few short tasks so every executor answers, compares each
answer with the driver's own, and raises `EnvironmentMismatch` naming the executor and the field.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import socket
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["EnvironmentMismatch", "check_executors", "differences", "fingerprint"]

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


def _probe(seconds: float) -> Any:
    def probe(_rows: Iterable[int]) -> Iterator[tuple[str, dict[str, str]]]:
        # Holding the task slot a moment keeps one fast executor from taking every task.
        time.sleep(seconds)
        yield socket.gethostname(), fingerprint()

    return probe


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
    tasks = 4 * executors
    answers = spark.sparkContext.parallelize(range(tasks), tasks).mapPartitions(_probe(task_seconds)).collect()
    seen: dict[str, dict[str, str]] = dict(answers)
    report = {"driver_host": socket.gethostname(), "driver": driver, "executors": seen}
    print("envcheck " + json.dumps(report, sort_keys=True), flush=True)
    problems = differences(driver, seen)
    if len(seen) < executors:
        problems.append(f"only {len(seen)} of {executors} executors ran a probe task: {', '.join(sorted(seen))}")
    if problems:
        raise EnvironmentMismatch("executors differ from the driver: " + "; ".join(problems))
    return report
