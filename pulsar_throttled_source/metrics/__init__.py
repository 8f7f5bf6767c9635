"""Query progress as metrics: PulsarThrottleMetrics, a StreamingQueryListener exporting each progress
report of this package's sources (planning/progress.py) to Prometheus or OpenTelemetry.

    from pulsar_throttled_source.metrics import PulsarThrottleMetrics
    spark.streams.addListener(PulsarThrottleMetrics(port=9464))   # http://<this host>:9464/metrics

samples.py: the metric table and a progress event's samples (no exporter library); latest_samples.py: the latest
samples per query, shared between Spark's listener thread and the exporters; prometheus.py and
otel.py: the two exporters (their libraries imported only when used: extras [metrics] and
[opentelemetry]); listener.py: the listener itself (imports PySpark)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .listener import PulsarThrottleMetrics

__all__ = ["PulsarThrottleMetrics"]


def __getattr__(name: str) -> Any:
    # Lazy: the pure parts (samples, state) import without PySpark.
    if name == "PulsarThrottleMetrics":
        from .listener import PulsarThrottleMetrics

        return PulsarThrottleMetrics
    raise AttributeError(name)
