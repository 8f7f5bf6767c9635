"""A throttled Apache Pulsar streaming source for PySpark Structured Streaming."""

from __future__ import annotations

from typing import Any

__all__ = ["PulsarThrottledDataSource"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m pulsar_throttled_source.local_broker` does not need pyspark.
    if name == "PulsarThrottledDataSource":
        from .datasource import PulsarThrottledDataSource

        return PulsarThrottledDataSource
    raise AttributeError(name)
