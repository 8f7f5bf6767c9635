"""Auto-registration hook: PySpark registers every top-level `pyspark_*` module's
`DefaultSource`, so `spark.readStream.format("pulsar-throttled")` works with no
`spark.dataSource.register(...)` call."""

from pulsar_throttled_source.datasource import PulsarThrottledDataSource as DefaultSource

__all__ = ["DefaultSource"]
