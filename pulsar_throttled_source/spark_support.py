"""Which PySpark this package runs on, checked once, with an error that says what to do.

The source needs the admission-control API of Python streaming sources (ReadLimit,
SupportsTriggerAvailableNow), first released in PySpark 4.2. On an older runtime (Databricks
17.3 LTS runs Spark 4.0, 18.x LTS Spark 4.1) importing it would otherwise fail deep inside with
"No module named 'pyspark.sql.streaming.datasource'"; worse, that failure inside Spark's
auto-registration lookup would hide every other `pyspark_*` data source too.
"""

from __future__ import annotations

import re

MINIMUM = (4, 2)
SUPPORTED = "PySpark 4.2 or newer 4.x (Spark's admission control for Python streaming sources)"


class UnsupportedSparkError(RuntimeError):
    pass


def parse_version(text: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", text)
    if not match:
        raise UnsupportedSparkError(f"pulsar-throttled cannot read the PySpark version '{text}'; it needs {SUPPORTED}.")
    return int(match.group(1)), int(match.group(2))


def check_spark(version: str | None = None) -> None:
    """Raise UnsupportedSparkError naming the PySpark found and the versions supported."""
    if version is None:
        try:
            import pyspark
        except ImportError:
            raise UnsupportedSparkError(f"pulsar-throttled needs {SUPPORTED}, and no PySpark is installed in this Python.") from None
        version = pyspark.__version__
    major, minor = parse_version(version)
    if (major, minor) < MINIMUM or major > MINIMUM[0]:
        raise UnsupportedSparkError(
            f"pulsar-throttled needs {SUPPORTED}; this Python has PySpark {version}. Keep your runtime's "
            "PySpark (do not let pip replace it) and use a runtime with Spark 4.2 or newer.")


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
