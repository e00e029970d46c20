"""PySpark data source and sink for RocketCluster topics (the `spark` extra): format "rocketmq".

Applications do `spark.dataSource.register(RocketMQDataSource)`; see docs/spark.md. The option,
offset and planning modules are pure and import without pyspark; `RocketMQDataSource` is loaded on
first access so those stay importable where pyspark is not installed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RocketMQDataSource"]


def __getattr__(name: str) -> Any:
    if name == "RocketMQDataSource":
        from broker.spark.source import RocketMQDataSource

        return RocketMQDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
