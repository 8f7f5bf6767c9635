"""Auto-registration hook: PySpark registers every top-level `pyspark_*` module's
`DefaultSource`, so `spark.readStream.format("pulsar-throttled")` works with no
`spark.dataSource.register(...)` call.

This module must never fail to import: Spark's lookup imports every `pyspark_*` module in one
go, and one failure makes it skip all of them. On a PySpark the source cannot run on, the
registered source raises the reason (versions found and supported) when a query uses it."""

from pulsar_throttled_source.spark_support import unavailable_source

try:
    from pulsar_throttled_source.datasource import PulsarThrottledDataSource as DefaultSource
except Exception as error:  # an unsupported or broken PySpark: see spark_support
    _standin = unavailable_source(error)
    if _standin is not None:
        DefaultSource = _standin  # type: ignore[misc,assignment]

__all__ = ["DefaultSource"]
