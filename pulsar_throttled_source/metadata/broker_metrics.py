"""The broker's publish latency from its Prometheus metrics (adaptiveThrottlingMetricsUrl, issue 40). Two views of
one measurement, the time from the broker handing a producer's entry to its managed ledger to the bookies'
acknowledgement (PersistentTopic.recordAddLatency), both over the broker's last stats period, not since start:

- ``pulsar_broker_publish_latency{quantile="0.99"}``: a summary over every topic of the broker, rolled over every
  ``statsUpdateFrequencyInSecs`` (60 s by default); fine grained (a p99 of 18.8 ms reads 18.8);
- ``pulsar_storage_write_latency_le_*``: per-topic buckets, summed here, refreshed every
  ``managedLedgerStatsPeriodSeconds`` (60 s by default); coarse (bucket bounds 5, 10, 20, 50 ... ms). Read where the
  summary is absent (a broker that does not expose it) or empty.

With ``metricsBufferResponse=true`` the broker also serves the page from a cache as old as
``managedLedgerStatsPeriodSeconds`` (1 s otherwise). A new period replaces the figures, so the same figures read twice mean no new evidence.
Parsed with prometheus_client's text parser (the ``adaptive`` extra); the decision on them is
throttling/signals.py's PublishLatencySignal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WRITE_LATENCY = "pulsar_storage_write_latency_le_"
PUBLISH_LATENCY = "pulsar_broker_publish_latency"
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


@dataclass(frozen=True, slots=True)
class PublishLatency:
    """The broker's publish latency summary over its last stats period: each quantile's value in ms (NaN dropped:
    a period without writes has none)."""

    quantiles: tuple[tuple[float, float], ...]

    def at(self, q: float) -> float | None:
        return next((value for quantile, value in self.quantiles if quantile == q), None)


def write_latency(text: str) -> WriteLatency | None:
    """The write latency buckets in a Prometheus text page; None when it has none (no topic written, or not a broker)."""
    return broker_latency(text)[1]


def broker_latency(text: str) -> tuple[PublishLatency | None, WriteLatency | None]:
    """Both views of the page, each None when the page has none (no write in the period, or not a broker)."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[float, float] = {}
    quantiles: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(WRITE_LATENCY):
                bound = BOUNDS_MS.get(sample.name[len(WRITE_LATENCY):])
                if bound is not None and not math.isnan(sample.value):
                    counts[bound] = counts.get(bound, 0.0) + sample.value
            elif sample.name == PUBLISH_LATENCY and "quantile" in sample.labels and math.isfinite(sample.value):
                q = float(sample.labels["quantile"])
                quantiles[q] = max(quantiles.get(q, 0.0), sample.value)  # one series per broker; the worst if more
    publish = PublishLatency(tuple(sorted(quantiles.items()))) if quantiles else None
    return publish, (WriteLatency(tuple(sorted(counts.items()))) if counts else None)
