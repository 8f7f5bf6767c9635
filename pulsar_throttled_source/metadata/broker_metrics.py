"""The broker's publish latency from its Prometheus metrics (adaptiveThrottlingMetricsUrl, issue 40): the
``pulsar_storage_write_latency_le_*`` buckets of every topic on the broker, summed. They count the writes of the
broker's last stats period (``statsUpdateFrequencyInSecs``, 60 s by default), not since start: a new period replaces
them, so the same figures read twice mean no new evidence. Parsed with prometheus_client's text parser (the
``adaptive`` extra); the decision on them is throttling/signals.py's PublishLatencySignal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WRITE_LATENCY = "pulsar_storage_write_latency_le_"
# Bucket suffix -> its upper bound in milliseconds (Pulsar's StatsBuckets for storage write latency).
BOUNDS_MS = {"0_5": 0.5, "1": 1.0, "5": 5.0, "10": 10.0, "20": 20.0, "50": 50.0, "100": 100.0, "200": 200.0,
             "1000": 1000.0, "overflow": math.inf}


@dataclass(frozen=True, slots=True)
class WriteLatency:
    """Writes per latency bucket (upper bound in ms, ascending), summed over the broker's topics."""

    buckets: tuple[tuple[float, float], ...]

    @property
    def writes(self) -> float:
        return sum(count for _, count in self.buckets)

    def quantile_bound(self, q: float) -> float:
        """The upper bound (ms) of the bucket the q-quantile write falls in."""
        target, seen = q * self.writes, 0.0
        for bound, count in self.buckets:
            seen += count
            if seen >= target:
                return bound
        return math.inf


def write_latency(text: str) -> WriteLatency | None:
    """The write latency buckets in a Prometheus text page; None when it has none (no topic written, or not a broker)."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(WRITE_LATENCY):
                bound = BOUNDS_MS.get(sample.name[len(WRITE_LATENCY):])
                if bound is not None and not math.isnan(sample.value):
                    counts[bound] = counts.get(bound, 0.0) + sample.value
    if not counts:
        return None
    return WriteLatency(tuple(sorted(counts.items())))
