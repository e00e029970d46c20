"""The PySpark data source of RocketCluster topics (`format("rocketmq")`), under the SDK's import name.

    from rocketcluster.spark import RocketMQDataSource
    spark.dataSource.register(RocketMQDataSource)

Importing this module imports pyspark (the `spark` extra); `import rocketcluster` does not. The source
itself lives in `broker.spark` (docs/design/packages.md); docs/spark.md has its options.
"""

from __future__ import annotations

from broker.spark.options import OptionError
from broker.spark.source import RocketMQDataSource

__all__ = ["OptionError", "RocketMQDataSource"]
