"""A throttled Apache Pulsar streaming source for PySpark Structured Streaming."""

from __future__ import annotations

from typing import Any

__all__ = ["PulsarThrottledDataSource"]
# The one place the version is written: pyproject.toml and native/setup.py read it from here (the native
# distribution is released at the same version, which the `native` extra pins; see CHANGELOG.md).
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m pulsar_throttled_source.local_broker` does not need pyspark.
    if name == "PulsarThrottledDataSource":
        from .datasource import PulsarThrottledDataSource

        return PulsarThrottledDataSource
    raise AttributeError(name)
