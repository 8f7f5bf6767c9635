"""Estimates the engine keeps between plan() calls: publish rates, for quotas relative to them.

They live in the engine's memory only (one query's driver process), like the broker's own
averages: a restart starts them afresh. (Messages per entry are not estimated: precise mode
learns them from the entries it is about to admit, see entry_values.EntryValues.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .model import PartitionDemand

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
