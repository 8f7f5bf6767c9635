"""Publish rates per partition, for quotas relative to the publish rate (PIP-52), and messages per
entry from the broker's publish counters (the query progress report).

- ``PublishRateTracker``: the measured rate, from deltas of the broker's live counters between catalog
  snapshots (the planner updates it with every snapshot it reads). The broker's msgRateIn is refreshed only every
  statsUpdateFrequencyInSecs (60 s by default); the counters follow a producer within about a second.
- ``SmoothedPublishRates``: what the quota engine charges against: that rate, rising at once and falling
  gradually, per (partition, period).
- ``msgs_per_entry``: the average messages per entry the counters tell.

All live in one query's driver process only, like the broker's own averages: a restart starts them
afresh. (Precise mode does not estimate messages per entry from these: it learns them from the entries
it is about to admit, see backlog_values.BacklogValues.)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ..metadata.catalog import CatalogSnapshot, PublishStats
from ..metadata.layout import PartitionLayout
from .demands import PartitionDemand

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


# Moving-average weight of a new sample (Pulsar's avg = 0.9 * avg + 0.1 * new).
SAMPLE_WEIGHT = 0.1


@dataclass
class _SmoothedRate:
    window: int
    msgs: float
    bytes: float


class SmoothedPublishRates:
    """Publish rate (msgs/s, bytes/s) per (partition, period) that rises at once and falls
    gradually, for quotas relative to the publish rate (PIP-52)."""

    def __init__(self) -> None:
        self._rates: dict[tuple[str, int], _SmoothedRate] = {}

    def rate(self, demand: PartitionDemand, period_s: int, now: float) -> tuple[float, float]:
        """A decrease is applied at most once per window, so many polls within one window do
        not collapse it. Calling this twice in one window with the same input is harmless.
        """
        window = math.floor(now / period_s)
        new_msgs = max(0.0, demand.publish_rate_msgs)
        new_bytes = max(0.0, demand.publish_rate_bytes)
        key = (demand.partition, period_s)
        state = self._rates.get(key)
        if state is None:
            state = _SmoothedRate(window, new_msgs, new_bytes)
        else:
            new_window = window > state.window

            def smooth(old: float, new: float) -> float:
                if new >= old:
                    return new
                return (1 - SAMPLE_WEIGHT) * old + SAMPLE_WEIGHT * new if new_window else old

            state = _SmoothedRate(
                max(window, state.window),
                smooth(state.msgs, new_msgs),
                smooth(state.bytes, new_bytes),
            )
        self._rates[key] = state
        return state.msgs, state.bytes

    def total(
        self, demands: Sequence[PartitionDemand], period_s: int, now: float
    ) -> tuple[float, float]:
        """Summed rate of the demands' partitions (a partition listed twice counts once)."""
        by_partition = {demand.partition: self.rate(demand, period_s, now) for demand in demands}
        return (
            sum(rate[0] for rate in by_partition.values()),
            sum(rate[1] for rate in by_partition.values()),
        )
