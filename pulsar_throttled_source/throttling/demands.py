"""The value types the engine and planning share: a partition's demand (PartitionDemand: its backlog and what its
entries cost), what it is admitted (Admission), the level names.
(The quota configuration itself, Rate and QuotaConfig, is in ..quota_settings: options and broker
policies build it without the throttling package.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..backlog_values import LearnBacklog, LearnedBacklog
from ..quota_settings import Rate

# Levels, in the order they are reported; a bucket belongs to exactly one.
SOURCE_LEVEL = "source-wide"
TOPIC_LEVEL = "topic"
SUBSCRIPTION_LEVEL = "subscription"


@dataclass(frozen=True, slots=True)
class PartitionDemand:
    partition: str  # full partition topic name, e.g. persistent://public/default/t-partition-0
    subscription: str
    backlog_entries: int  # entries available beyond the current start (>= 0)
    bytes_for: Callable[[int], float]  # bytes of the first k backlog entries by ledger averages (0 -> 0)
    learn_backlog: LearnBacklog | None  # the messages and bytes of the entries a window could admit
    publish_rate_msgs: float = 0.0  # msgs/s published (for relative rates)
    publish_rate_bytes: float = 0.0  # bytes/s published
    topic_rates: tuple[tuple[str, Rate], ...] = ()  # (origin, rate) pairs, all ANDed
    subscription_rates: tuple[tuple[str, Rate], ...] = ()  # same for the subscription level
    # What the partition's entries are thought to hold without looking any up (None: nothing known);
    # large plans price partitions far below their quotas by it (see headroom).
    estimate_backlog: Callable[[], LearnedBacklog | None] | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    partition: str
    entries: int  # entries admitted for this planning call (0..backlog_entries)
    msgs: float  # messages admitted and charged (exact in batch mode, estimate in precise mode)
    bytes: float  # bytes admitted and charged
    held_back: str | None  # why entries < backlog_entries; None when all admitted or no backlog
    unthrottled: str | None  # why throttling did not apply, e.g. "no quota"
