"""Which PySpark this package runs on, checked once, with an error that says what to do.

The source needs Python streaming data sources (PySpark 4.0+). PySpark 4.2 added admission control
(ReadLimit, SupportsTriggerAvailableNow), used where present; on 4.0 and 4.1 (Databricks 17.3 LTS
and 18.x LTS) processing-time triggers are throttled without it (stream_spark40). Whether this PySpark
has it is detected by feature, not from its version number: a vendor runtime may backport it. On an older
PySpark importing the source would otherwise fail deep inside; worse, that failure inside Spark's
auto-registration lookup would hide every other `pyspark_*` data source too.
"""

from __future__ import annotations

import importlib
import inspect
import re
from functools import cache

MINIMUM = (4, 0)
SUPPORTED = "PySpark 4.x (4.0 or newer: Python streaming data sources)"


class UnsupportedSparkError(RuntimeError):
    pass


def parse_version(text: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", text)
    if not match:
        raise UnsupportedSparkError(f"pulsar-throttled cannot read the PySpark version '{text}'; it needs {SUPPORTED}.")
    return int(match.group(1)), int(match.group(2))


def installed_version() -> str:
    try:
        import pyspark
    except ImportError:
        raise UnsupportedSparkError(f"pulsar-throttled needs {SUPPORTED}, and no PySpark is installed in this Python.") from None
    return pyspark.__version__


@cache
def has_admission_control() -> bool:
    """True where PySpark gives Python streaming sources admission control (Apache Spark 4.2+, or a
    runtime that backports it): a read limit passed to latestOffset, and Trigger.AvailableNow.

    Detected by what Spark's Python streaming runner relies on: the module of the read limits and the
    AvailableNow mixin (`pyspark.sql.streaming.datasource`), and the reader base's latestOffset taking
    (start, limit), which is how the runner tells an admission-controlled reader from an old one."""
    try:
        datasource = importlib.import_module("pyspark.sql.datasource")
        streaming = importlib.import_module("pyspark.sql.streaming.datasource")
    except ImportError:
        return False
    if not all(hasattr(streaming, name) for name in ("ReadLimit", "ReadMaxRows", "SupportsTriggerAvailableNow")):
        return False
    try:
        parameters = inspect.signature(datasource.DataSourceStreamReader.latestOffset).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return len(parameters) > 1  # more than self, as the runner checks (4.0/4.1: latestOffset(self))


def check_spark(version: str | None = None) -> None:
    """Raise UnsupportedSparkError naming the PySpark found and the versions supported."""
    if version is None:
        version = installed_version()
    major, minor = parse_version(version)
    if (major, minor) < MINIMUM or major > MINIMUM[0]:
        raise UnsupportedSparkError(
            f"pulsar-throttled needs {SUPPORTED}; this Python has PySpark {version}. Keep your runtime's "
            "PySpark (do not let pip replace it) and use a runtime with Spark 4.0 or newer 4.x.")


def unavailable_source(reason: BaseException) -> type | None:
    """A stand-in `pulsar-throttled` data source that fails with `reason` when used, so that a
    failed import never breaks the registration of other data sources; None when this PySpark has
    no Python data sources at all."""
    try:
        from pyspark.sql.datasource import DataSource
    except ImportError:
        return None
    message = str(reason)

    class UnavailablePulsarThrottledSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pulsar-throttled"

        def __init__(self, options: dict[str, str]) -> None:
            raise UnsupportedSparkError(message)

    return UnavailablePulsarThrottledSource
