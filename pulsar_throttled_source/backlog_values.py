"""What planning knows of the backlog entries a window could admit: per entry, the messages a reader
is handed and the bytes it is stored as, learned from the entries' own metadata (see
metadata.backlog_sizes) and priced piecewise between the entries looked up.

Below both layers that use it: metadata builds these, throttling's allocation only asks totals."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

TAIL_KNOTS = 4  # the last looked-up entries that price what lies past them
CHANGE = 1.5  # neighbouring entries further apart than this ratio: the producer changed its batching


def changed(a: float, b: float) -> bool:
    """Whether two neighbouring entries differ by more than CHANGE (a change of batching)."""
    return max(a, b) > CHANGE * max(1.0, min(a, b))


@dataclass(frozen=True)
class BacklogValues:
    """One value per backlog entry (messages, or stored bytes): exact for the first len(exact)
    entries, and `knots`, the values of single entries looked up further on.

    Between two known entries of equal value, every entry is priced at that value (a producer keeps
    its batching over a stretch); between two that differ, at their mean (the looker-up narrows such
    gaps down to where the batching changed); past the last knot, at the mean of the last knots back
    to the last change."""

    exact: tuple[float, ...] = ()
    knots: tuple[tuple[int, float], ...] = ()  # (entry index >= len(exact), its value), ascending index
    floor: float = 1.0  # the least an average may be (an entry of markers still counts as one message)

    @cached_property
    def _cumulative(self) -> tuple[float, ...]:
        return (0.0, *accumulate(float(v) for v in self.exact))

    @property
    def per_entry(self) -> float | None:
        """Average per known entry, at least `floor` (None when no entry is known)."""
        if self.exact:
            return max(self.floor, self._cumulative[-1] / len(self.exact))
        if self.knots:
            return max(self.floor, sum(v for _, v in self.knots) / len(self.knots))
        return None

    @property
    def tail(self) -> float:
        """The price of an entry past every known one."""
        if not self.knots:
            return self.per_entry or self.floor
        last = self.knots[-1][1]
        stretch = [last]
        for _, value in reversed(self.knots[-TAIL_KNOTS:-1]):
            if changed(value, last):
                break
            stretch.append(value)
        return max(self.floor, sum(stretch) / len(stretch))

    @cached_property
    def _stretches(self) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
        """(first entry, total before it, price per entry) of each stretch past the exact values."""
        stretches: list[tuple[int, float, float]] = []
        index, total = len(self.exact), self._cumulative[-1]
        previous: float | None = self.exact[-1] if self.exact else None
        for at, value in self.knots:
            if at > index:  # the entries between the last known one and this knot
                price = float(value) if previous is None or previous == value else (previous + value) / 2
                stretches.append((index, total, price))
                total += (at - index) * price
            stretches.append((at, total, float(value)))
            total += value
            index, previous = at + 1, value
        stretches.append((index, total, self.tail))
        starts, before, prices = zip(*stretches, strict=True)
        return tuple(starts), tuple(before), tuple(prices)

    def total(self, entries: int) -> float:
        """The value of the first `entries` entries together."""
        if entries <= len(self.exact):
            return self._cumulative[max(0, entries)]
        starts, before, prices = self._stretches
        i = bisect_right(starts, entries - 1) - 1  # the stretch holding the last entry counted
        return before[i] + (entries - starts[i]) * prices[i]


@dataclass(frozen=True)
class LearnedBacklog:
    """What was learned of a partition's backlog entries; None for what could not be (then planning
    falls back: one entry's read in precise mode, each ledger's average entry size for bytes)."""

    msgs: BacklogValues | None = None
    bytes: BacklogValues | None = None
    # Admit at most this many entries (at least one): the next one is still being looked up, and
    # a guess could admit a producer's large batches past the quota. None: no such limit.
    reach: int | None = None


# Called with (messages, bytes) to reach: the entries at the head of the backlog that hold that
# much, and one more, as far as they can be looked up now (before the buckets are locked).
LearnBacklog = Callable[[float, float], LearnedBacklog]
