"""Fixtures of the Spark data source tests: one live cluster and one SparkSession per test session.

Spark takes 10-30 s to start on this machine, so the session is shared; every test uses its own
topics. Tests that need pyspark skip cleanly where the `spark` extra is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.spark_harness import ThreadedCluster, spark_session


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    c = ThreadedCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # `make test` installs the spark extra; only a bare `pytest` in a venv without it gets here
    why = "the spark extra (pyspark, pyarrow) is not installed: pip install -e '.[spark]'"
    pytest.importorskip("pyspark", reason=why)
    pytest.importorskip("pyarrow", reason=why)
    session = spark_session(tmp_path_factory.mktemp("spark-local"))
    try:
        yield session
    finally:
        session.stop()
