"""`RocketMQDataSource`: the `rocketmq` format of the PySpark Python Data Source API.

Applications register it once per session (`spark.dataSource.register(RocketMQDataSource)`) and
then use `spark.read` / `spark.readStream` / `df.write` / `df.writeStream` with
`.format("rocketmq")`. Spark calls these factory methods on the driver; each parses its options
(options.py) so a mistake fails planning with a message naming the option.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from broker.spark.options import OptionError, sink_options, source_options
from broker.spark.reader import RocketMQBatchReader
from broker.spark.rows import SCHEMA_DDL
from broker.spark.stream import RocketMQStreamReader
from broker.spark.writer import RocketMQBatchWriter, RocketMQStreamWriter, check_sink_schema

__all__ = ["RocketMQDataSource"]


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketMQStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("a topic cannot be overwritten; use mode('append')")
        opts = sink_options(self.options)
        check_sink_schema(schema, opts)
        return RocketMQBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = sink_options(self.options)
        check_sink_schema(schema, opts)
        return RocketMQStreamWriter(opts)
