"""A throttled Apache Pulsar streaming source for PySpark Structured Streaming.

Data flows one way through the folders: ``options`` -> ``metadata`` -> ``throttling`` -> ``planning`` -> ``reading``
(``schemas`` gives the columns; each folder's ``__init__`` says what its modules do); ``writing``, the sink
(df.write / df.writeStream), sits on top of them all. At the top:
- Spark-facing: ``datasource`` (the "pulsar-throttled" DataSource), ``stream`` (the stream reader, with
  ``stream_spark42`` and ``stream_spark40`` per Spark line), ``batch`` (a batch query's reader); ``planner_wiring``
  builds a stream's planner once, where Spark plans; ``spark_support`` says which PySpark lines are supported.
- Around a query: ``catch_up`` (read a backlog under the quotas and stop), ``adaptive_throttle`` (adaptiveThrottling
  wired into the planner), ``console_log`` (the planner's log lines), ``query_progress`` (the source's report in a
  query's progress), ``plots`` (a query's progress drawn), ``metrics`` (the metrics listener), ``status`` with
  ``checkpoint_log`` and ``status_quota`` (a query's lag from its checkpoint, without Spark).
- Base modules under every folder: ``topics``, ``positions``, ``offsets``, ``read_task``, ``quota_settings``,
  ``admin_endpoint``, ``data_loss_error``, ``backlog_values``, ``protobuf_wire``, ``retry``, ``credentials``.
- ``local_broker``: a development tool (a standalone broker), never used by a query.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PulsarThrottledDataSource"]
# The one place the version is written: pyproject.toml and native/setup.py read it from here (the native
# distribution is released at the same version, which the `native` extra pins; see CHANGELOG.md).
__version__ = "0.2.0.dev0"


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m pulsar_throttled_source.local_broker` does not need pyspark.
    if name == "PulsarThrottledDataSource":
        from .datasource import PulsarThrottledDataSource

        return PulsarThrottledDataSource
    raise AttributeError(name)
