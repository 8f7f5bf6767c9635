"""The `pulsar-throttled` data source: name, schema and stream reader. Glue only."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import StructType

from .options import parse_options
from .reading.arrow_rows import SPARK_SCHEMA_DDL
from .stream import PulsarStreamReader


class PulsarThrottledDataSource(DataSource):
    """spark.readStream.format("pulsar-throttled").option("topic", ...).load()"""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Validate at load() time so a bad option fails before the query starts.
        self.parsed = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return "pulsar-throttled"

    def schema(self) -> str:
        return SPARK_SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PulsarStreamReader(self.parsed)
