"""The value types shared by the options, the broker policies, planning and the engine.

Kept apart from the engine so that parsing options or policies needs nothing else of the
throttling package.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Literal

ThrottlingMode = Literal["precise", "batch"]
TAIL_KNOTS = 4  # the last looked-up entries that price what lies past them

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


@dataclass(frozen=True)
class EntryMessages:
    """What is known of the messages held by a partition's backlog entries: exact counts for the
    first len(counts) entries, and `knots`, the counts of single entries looked up further on.

    Between two known entries of equal count, every entry is priced at that count (a producer keeps
    its batching over a stretch); between two that differ, at their mean (the looker-up narrows such
    gaps down to where the batching changed); past the last knot, at the mean of the last knots."""

    counts: tuple[int, ...] = ()
    knots: tuple[tuple[int, float], ...] = ()  # (entry index >= len(counts), its count), ascending index

    @cached_property
    def _cumulative(self) -> tuple[int, ...]:
        return (0, *accumulate(self.counts))

    @property
    def per_entry(self) -> float | None:
        """Average messages per known entry, at least one (None when no entry is known)."""
        if self.counts:
            return max(1.0, self._cumulative[-1] / len(self.counts))
        if self.knots:
            return max(1.0, sum(c for _, c in self.knots) / len(self.knots))
        return None

    @property
    def tail(self) -> float:
        """The price of an entry past every known one: the mean of the last knots, back to where
        the batching changed (a knot more than 1.5x off the last one)."""
        if not self.knots:
            return self.per_entry or 1.0
        last = self.knots[-1][1]
        stretch = [last]
        for _, count in reversed(self.knots[-TAIL_KNOTS:-1]):
            if max(count, last) > 1.5 * max(1, min(count, last)):
                break
            stretch.append(count)
        return max(1.0, sum(stretch) / len(stretch))

    @cached_property
    def _segments(self) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
        """(first entry, messages before it, price per entry) of each stretch past the exact counts."""
        stretches: list[tuple[int, float, float]] = []
        index, total = len(self.counts), float(self._cumulative[-1])
        previous: float | None = self.counts[-1] if self.counts else None
        for at, count in self.knots:
            if at > index:  # the entries between the last known one and this knot
                price = float(count) if previous is None or previous == count else (previous + count) / 2
                stretches.append((index, total, price))
                total += (at - index) * price
            stretches.append((at, total, float(count)))
            total += count
            index, previous = at + 1, count
        stretches.append((index, total, self.tail))
        starts, before, prices = zip(*stretches, strict=True)
        return tuple(starts), tuple(before), tuple(prices)

    def msgs(self, entries: int) -> float:
        if entries <= len(self.counts):
            return float(self._cumulative[max(0, entries)])
        starts, before, prices = self._segments
        i = bisect_right(starts, entries - 1) - 1  # the stretch holding the last entry counted
        return before[i] + (entries - starts[i]) * prices[i] if i >= 0 else float(self._cumulative[-1])


# Called with a message count: the entries that hold that many messages at the head of the backlog,
# and one more, as far as they can be looked up now (precise mode; before the buckets are locked).
LearnEntryMessages = Callable[[float], EntryMessages]


@dataclass(frozen=True)
class PartitionDemand:
    partition: str  # full partition topic name, e.g. persistent://public/default/t-partition-0
    subscription: str
    backlog_entries: int  # entries available beyond the current start (>= 0)
    bytes_for: Callable[[int], float]  # bytes of the first k backlog entries (monotonic, 0 -> 0)
    entry_msgs: LearnEntryMessages | None  # precise mode: messages per backlog entry; None if unknown
    publish_rate_msgs: float = 0.0  # msgs/s published (for relative rates)
    publish_rate_bytes: float = 0.0  # bytes/s published
    topic_rates: tuple[tuple[str, Rate], ...] = ()  # (origin, rate) pairs, all ANDed
    subscription_rates: tuple[tuple[str, Rate], ...] = ()  # same for the subscription level


@dataclass(frozen=True)
class Admission:
    partition: str
    entries: int  # entries admitted for this planning call (0..backlog_entries)
    msgs: float  # messages admitted and charged (exact in batch mode, estimate in precise mode)
    bytes: float  # bytes admitted and charged
    held_back: str | None  # why entries < backlog_entries; None when all admitted or no backlog
    unthrottled: str | None  # why throttling did not apply, e.g. "no quota"
