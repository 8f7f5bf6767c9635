"""Publish rates per partition, for relative quotas (PIP-52) and the precise-mode estimator.

The broker's msgRateIn is refreshed only every statsUpdateFrequencyInSecs (60 s by default);
deltas of its live counters between catalog snapshots follow a producer within about a second.
"""

from __future__ import annotations

from collections import deque

from ..metadata.catalog import CatalogSnapshot, PublishStats
from ..metadata.layout import PartitionLayout

# A rate is measured over at least this much of the counters' history: over one refresh (300 ms
# at a query's metadataRefreshIntervalMs) the jitter of when the counters were read moved it by a
# third (100 msg/s read as 132), and a rate that rises at once (SmoothedPublishRates) kept that
# for windows (test_relative_to_publish_rate_keeps_up_and_drains_at_the_margin, 172 > 170).
MIN_SPAN_S = 1.0


class PublishRateTracker:
    def __init__(self) -> None:
        # partition -> counter samples (time, msgs, bytes), oldest first: the newest one at least
        # MIN_SPAN_S old, and every one after it
        self._samples: dict[str, deque[tuple[float, int, int]]] = {}
        self.rates: dict[str, tuple[float, float]] = {}  # partition -> (msgs/s, bytes/s)

    def update(self, snap: CatalogSnapshot) -> None:
        at = snap.stats_at  # the stats' own time: a snapshot may carry stats fetched earlier
        for partition, s in snap.stats.items():
            samples = self._samples.setdefault(partition, deque())
            if samples and at <= samples[-1][0]:
                continue  # the same stats again
            if samples and (s.msg_in_counter < samples[-1][1] or s.bytes_in_counter < samples[-1][2]):
                samples.clear()  # counters reset when a topic is reloaded: measure again from here
            samples.append((at, s.msg_in_counter, s.bytes_in_counter))
            while len(samples) > 2 and at - samples[1][0] >= MIN_SPAN_S:
                samples.popleft()
            since, msgs, size = samples[0]
            if at - since >= MIN_SPAN_S:
                dt = at - since
                self.rates[partition] = ((s.msg_in_counter - msgs) / dt, (s.bytes_in_counter - size) / dt)
            elif partition not in self.rates:  # until a span is measured: the broker's own average
                self.rates[partition] = (s.msg_rate_in, s.throughput_in)


def msgs_per_entry(stats: PublishStats | None, layout: PartitionLayout) -> float | None:
    """Average messages per entry from the publish-side counters; None while unknown."""
    if stats is None or layout.entries_added <= 0 or stats.msg_in_counter <= 0:
        return None
    return stats.msg_in_counter / layout.entries_added
