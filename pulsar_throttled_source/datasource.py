"""The `pulsar-throttled` data source: name, schema and stream reader. Glue only."""

from __future__ import annotations

from .spark_support import check_spark, has_admission_control

check_spark()  # before anything that needs Python data sources: one clear error instead of an ImportError

from pyspark.sql.datasource import DataSource, DataSourceStreamReader  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from .options import parse_options  # noqa: E402
from .reading.arrow_rows import SPARK_SCHEMA_DDL  # noqa: E402


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
        if has_admission_control():
            from .stream_spark42 import AdmissionControlStreamReader

            return AdmissionControlStreamReader(self.parsed)
        from .stream_spark40 import LatestOffsetStreamReader

        return LatestOffsetStreamReader(self.parsed)
