"""The value types shared by the options, the broker policies, planning and the engine.

Kept apart from the engine so that parsing options or policies needs nothing else of the
throttling package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .entry_values import LearnedEntries, LearnEntries

ThrottlingMode = Literal["precise", "batch"]

# Levels, in the order they are reported; a bucket belongs to exactly one.
SOURCE_LEVEL = "source-wide"
TOPIC_LEVEL = "topic"
SUBSCRIPTION_LEVEL = "subscription"


@dataclass(frozen=True)
class Rate:
    """One level's limit per period. -1 means unlimited for that unit.

    As in the Pulsar broker, any value <= 0 disables the limit for that unit (the broker
    config uses 0 for "disabled"); options parsing rejects an explicit 0 before we get here.
    """

    msgs: int = -1
    bytes: int = -1
    period_s: int = 1
    relative_to_publish_rate: bool = False

    def __post_init__(self) -> None:
        if self.period_s < 1:
            raise ValueError(f"period_s must be >= 1 second, got {self.period_s}")

    def is_unlimited(self) -> bool:
        return self.msgs <= 0 and self.bytes <= 0


@dataclass(frozen=True)
class QuotaConfig:
    source: Rate  # source-wide level (one bucket per query)
    mode: ThrottlingMode = "precise"
    throttle_non_backlog: bool = True  # dispatchThrottlingOnNonBacklogConsumerEnabled
    non_backlog_threshold_entries: int = 0
    query_id: str = "query"  # names the source-wide bucket: the planner sets it to the query's identity

    def __post_init__(self) -> None:
        if self.mode not in ("precise", "batch"):
            raise ValueError(f"throttling mode must be 'precise' or 'batch', got {self.mode!r}")
        if self.non_backlog_threshold_entries < 0:
            raise ValueError(
                "non_backlog_threshold_entries must be >= 0, "
                f"got {self.non_backlog_threshold_entries}"
            )


@dataclass(frozen=True, slots=True)
class PartitionDemand:
    partition: str  # full partition topic name, e.g. persistent://public/default/t-partition-0
    subscription: str
    backlog_entries: int  # entries available beyond the current start (>= 0)
    bytes_for: Callable[[int], float]  # bytes of the first k backlog entries by ledger averages (0 -> 0)
    learn_entries: LearnEntries | None  # the messages and bytes of the entries a window could admit
    publish_rate_msgs: float = 0.0  # msgs/s published (for relative rates)
    publish_rate_bytes: float = 0.0  # bytes/s published
    topic_rates: tuple[tuple[str, Rate], ...] = ()  # (origin, rate) pairs, all ANDed
    subscription_rates: tuple[tuple[str, Rate], ...] = ()  # same for the subscription level
    # What the partition's entries are thought to hold without looking any up (None: nothing known);
    # large plans price partitions far below their quotas by it (see headroom).
    estimate_entries: Callable[[], LearnedEntries | None] | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    partition: str
    entries: int  # entries admitted for this planning call (0..backlog_entries)
    msgs: float  # messages admitted and charged (exact in batch mode, estimate in precise mode)
    bytes: float  # bytes admitted and charged
    held_back: str | None  # why entries < backlog_entries; None when all admitted or no backlog
    unthrottled: str | None  # why throttling did not apply, e.g. "no quota"
