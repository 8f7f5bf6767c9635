"""Publish rates per partition, for relative quotas (PIP-52) and the precise-mode estimator.

The broker's msgRateIn is refreshed only every statsUpdateFrequencyInSecs (60 s by default);
deltas of its live counters between catalog snapshots follow a producer within one refresh.
"""

from __future__ import annotations

from ..metadata.catalog import CatalogSnapshot, PublishStats
from ..metadata.layout import PartitionLayout


class PublishRateTracker:
    def __init__(self) -> None:
        self._prev: dict[str, tuple[float, int, int]] = {}
        self.rates: dict[str, tuple[float, float]] = {}  # partition -> (msgs/s, bytes/s)

    def update(self, snap: CatalogSnapshot) -> None:
        at = snap.stats_at  # the stats' own time: a snapshot may carry stats fetched earlier
        for partition, s in snap.stats.items():
            prev = self._prev.get(partition)
            if prev is not None and at > prev[0]:
                dt = at - prev[0]
                dm, db = s.msg_in_counter - prev[1], s.bytes_in_counter - prev[2]
                if dm >= 0 and db >= 0:  # counters reset when a topic is reloaded: skip that sample
                    self.rates[partition] = (dm / dt, db / dt)
            elif partition not in self.rates:
                self.rates[partition] = (s.msg_rate_in, s.throughput_in)
            if prev is None or at > prev[0]:
                self._prev[partition] = (at, s.msg_in_counter, s.bytes_in_counter)


def msgs_per_entry(stats: PublishStats | None, layout: PartitionLayout) -> float | None:
    """Average messages per entry from the publish-side counters; None while unknown."""
    if stats is None or layout.entries_added <= 0 or stats.msg_in_counter <= 0:
        return None
    return stats.msg_in_counter / layout.entries_added
