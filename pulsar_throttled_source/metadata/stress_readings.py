"""What the broker shows of congestion, as the metadata layer reads it (adaptiveThrottling, issue 40); the decisions
on these readings are throttling/signals.py's.

- ``LatencySamples``: how long the source's own requests for cold entries took (precise mode's entry lookups, HEAD
  .../ledger/L/entry/E: the broker reads the entry from its bookies when it is not cached), recorded by the lookup
  threads and drained once per controller window by the planner's thread.
- ``BrokerStress``: per partition, counters the catalog already fetches: ``pendingAddEntriesCount`` of the internal
  stats (entries the broker has sent to its bookies and not yet had acknowledged: producers' writes waiting) and the
  sum of the other subscriptions' ``dispatchThrottled*Events*`` counters of the topic stats (Pulsar 4.0+,
  apache/pulsar#22812: times the broker throttled their dispatch for a subscription, topic or broker rate limit).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The six counters a Pulsar 4.0+ broker keeps per subscription (SubscriptionStatsImpl); each counts throttling events.
THROTTLED_COUNTERS = tuple(f"dispatchThrottled{unit}EventsBy{limit}Limit"
                           for unit in ("Msg", "Bytes") for limit in ("Subscription", "Topic", "Broker"))


class LatencySamples:
    """Durations (seconds) of requests and the count of failed ones since the last drain. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._durations: list[float] = []
        self._failures = 0

    def record(self, seconds: float) -> None:
        with self._lock:
            self._durations.append(seconds)

    def failed(self) -> None:
        with self._lock:
            self._failures += 1

    def drain(self) -> tuple[list[float], int]:
        """What was recorded since the last drain: (durations, failures); starts afresh."""
        with self._lock:
            durations, failures = self._durations, self._failures
            self._durations, self._failures = [], 0
        return durations, failures


@dataclass(frozen=True, slots=True)
class BrokerStress:
    """One partition's congestion counters, as of one catalog refresh."""

    pending_adds: int  # internal stats' pendingAddEntriesCount: a gauge (0 on a broker keeping up)
    throttled_events: int | None = None  # other subscriptions' dispatchThrottled* sum; None: not reported (< 4.0)


def pending_adds(internal: Mapping[str, Any]) -> int:
    return int(internal.get("pendingAddEntriesCount") or 0)


def throttled_events(stats: Mapping[str, Any], own_subscription: str | None) -> int | None:
    """The sum of the throttling counters of the partition's durable subscriptions other than the query's own (its
    readers are non-durable: the source's own dispatch is the quotas' business, not a sign of others' pain). None when
    the broker reports none of the counters (before Pulsar 4.0), or the stats list no durable subscription."""
    total, reported = 0, False
    for name, sub in (stats.get("subscriptions") or {}).items():
        if not isinstance(sub, Mapping) or sub.get("durable") is False or name == own_subscription:
            continue
        for counter in THROTTLED_COUNTERS:
            value = sub.get(counter)
            if value is not None:
                total, reported = total + int(value), True
    return total if reported else None
