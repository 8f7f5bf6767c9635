"""Precise mode's pricer: what the entries one window's quotas could admit hold, from the entries
looked up (lookup_scheduler), and whether that is all there is to learn now.

Stretches a producer batched alike are priced from a grid of them (uniform_batching). Anything
else: the first EXACT_AHEAD entries exactly (HEAD_CHUNK at a time, only as far as the quotas
reach), then SAMPLES spread over the rest of what the quotas could reach (pushed further while they
hold less than thought), then bisection wherever neighbouring known entries differ by more than
backlog_values.CHANGE (a producer changed its batching there), so a window that crosses such a change
is priced on both sides of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..backlog_values import BacklogValues, LearnedBacklog, changed
from .layout import Backlog
from .lookup_scheduler import CONCURRENT_LOOKUPS, LookedUpEntry, LookupScheduler, position_at
from .uniform_batching import AlikeStretches

EXACT_AHEAD = 64  # entries counted exactly ahead of a partition's start (a window of ~10-message entries)
HEAD_CHUNK = 16  # looked up together, as many chunks as the quota reaches
SAMPLES = 8  # entries sampled across each further stretch of what one window could admit
EXTENSIONS = 4  # times the sampled reach is pushed further when it holds less than thought
REFINE_LOOKUPS = 32  # bisection lookups per partition and call, to find where the batching changed


@dataclass
class KnownBacklog:
    """Values of entries at indexes of one backlog: the exact head, and knots further on."""

    msgs: list[float]
    bytes: list[float]
    msg_knots: dict[int, float]
    byte_knots: dict[int, float]
    _learned: LearnedBacklog | None = None  # built once per change (its totals are cached inside)

    def learned(self) -> LearnedBacklog:
        if self._learned is None:
            self._learned = LearnedBacklog(
                BacklogValues(tuple(self.msgs), tuple(sorted(self.msg_knots.items()))),
                BacklogValues(tuple(self.bytes), tuple(sorted(self.byte_knots.items())), floor=0.0))
        return self._learned

    def add_knot(self, index: int, msgs: float, size: float) -> None:
        self.msg_knots[index], self.byte_knots[index] = msgs, size
        self._learned = None


@dataclass(frozen=True)
class PricedWindow:
    values: KnownBacklog
    complete: bool  # every entry looked at was known: asking again now would learn nothing more
    reach: int | None = None  # the head's entries known before one still being looked up (admit no further)


def price_window(lookups: LookupScheduler, alike: AlikeStretches, partition: str, backlog: Backlog,
                 msgs: float, size: float) -> PricedWindow:
    """The entries from the backlog's start holding `msgs` messages and `size` bytes, and one more,
    as far as the call's budget and deadline let them be looked up."""
    return _Pricing(lookups, partition, backlog).price(alike, msgs, size)


class _Pricing:
    """One pricing of one partition's window; `complete` turns False when an entry it needs is unknown."""

    def __init__(self, lookups: LookupScheduler, partition: str, backlog: Backlog) -> None:
        self.lookups, self.partition, self.backlog = lookups, partition, backlog
        self.complete = True

    def price(self, alike: AlikeStretches, msgs: float, size: float) -> PricedWindow:
        values = KnownBacklog([], [], {}, {})
        knots = alike.knots(self.partition, self.backlog, self._entries_at, msgs, size)
        if knots is not None:  # a producer's alike batches (uniform_batching)
            for index, (entry_msgs, entry_bytes) in knots.items():
                values.add_knot(index, entry_msgs, entry_bytes)
            return PricedWindow(values, self.complete)
        held_msgs = held_bytes = 0.0  # what the entries counted so far hold
        head = self.backlog.entries_between(0, EXACT_AHEAD)
        known = self.lookups.known(self.partition)
        for chunk in range(0, len(head), HEAD_CHUNK):  # only as far as the quotas reach
            self.lookups.look_up(self.partition, [(ledger, entry) for ledger, entry, _ in head[chunk:chunk + HEAD_CHUNK]],
                                 wait=True)
            for ledger, entry_id, ledger_average in head[chunk:chunk + HEAD_CHUNK]:
                entry = known.get((ledger, entry_id))
                if entry is None:  # not stored any more, out of budget, or not answered in time
                    late = self.lookups.is_pending(self.partition, (ledger, entry_id))
                    return PricedWindow(values, False, reach=len(values.msgs) if late else None)
                reached = held_msgs >= msgs and held_bytes >= size
                values.msgs.append(entry.msgs)
                values.bytes.append(entry.bytes if entry.bytes is not None else ledger_average)
                held_msgs, held_bytes = held_msgs + values.msgs[-1], held_bytes + values.bytes[-1]
                if reached:
                    return PricedWindow(values, self.complete)
        self._beyond(values, msgs, size)
        self._narrow_changes(values)
        return PricedWindow(values, self.complete)

    def _entries_at(self, indexes: list[int]) -> list[tuple[float, float | None] | None]:
        """(messages, stored bytes) of the backlog's entries at `indexes`, looked up (waiting as a
        planning call may); None for one not known. What uniform_batching asks through."""
        positions = [position_at(self.backlog, i) for i in indexes]
        self.lookups.look_up(self.partition, positions, wait=True)
        known = self.lookups.known(self.partition)
        entries = [known.get(position) for position in positions]
        self.complete = self.complete and all(entry is not None for entry in entries)
        return [None if entry is None else (entry.msgs, entry.bytes) for entry in entries]

    def _beyond(self, values: KnownBacklog, msgs: float, size: float) -> None:
        """Past the exact head: sample the entries the quotas could still reach, reaching further
        while the samples hold less than thought."""
        reach, backlog = len(values.msgs), self.backlog
        for _ in range(EXTENSIONS):
            estimate = values.learned()
            assert estimate.msgs is not None and estimate.bytes is not None
            short_msgs = msgs - estimate.msgs.total(reach)
            short_bytes = size - estimate.bytes.total(reach)
            if (short_msgs <= 0 and short_bytes <= 0) or reach >= backlog.entries or self.lookups.budget <= 0:
                break
            more = max(math.ceil(short_msgs / estimate.msgs.tail) if short_msgs > 0 else 0,
                       math.ceil(short_bytes / max(1.0, estimate.bytes.tail)) if short_bytes > 0 else 0)
            further = min(backlog.entries, reach + more + 1)
            indexes = self._already_asked(reach, further)
            if len(indexes) < SAMPLES:  # too few prefetched there: sample the stretch
                indexes = sorted(set(indexes) | set(spread(reach, further)))
            self._learn_knots(indexes, values)
            reach = further

    def _narrow_changes(self, values: KnownBacklog) -> None:
        """Bisect between neighbouring known entries that differ by more than CHANGE (in messages or
        bytes), widest and most different first, until each change of batching is found or
        REFINE_LOOKUPS are spent."""
        spent = 0
        head = len(values.msgs)
        while spent < REFINE_LOOKUPS and self.lookups.budget > 0:
            points = ([(head - 1, values.msgs[-1], values.bytes[-1])] if head else []) + [
                (i, values.msg_knots[i], values.byte_knots[i]) for i in sorted(values.msg_knots)]
            gaps = sorted(((b - a) * max(_ratio(ma, mb), _ratio(sa, sb)), (a + b) // 2)
                          for (a, ma, sa), (b, mb, sb) in zip(points, points[1:], strict=False)
                          if b - a > 1 and (changed(ma, mb) or changed(sa, sb)))
            middles = [middle for _, middle in gaps[::-1][:min(CONCURRENT_LOOKUPS, REFINE_LOOKUPS - spent)]]
            if not middles:
                return
            spent += len(middles)
            if not self._learn_knots(middles, values):
                return  # an entry is not stored any more, or the budget ran out

    def _learn_knots(self, indexes: list[int], values: KnownBacklog) -> bool:
        """Look up the entries at `indexes` and record them as knots; False if one is left unknown."""
        positions = [position_at(self.backlog, i) for i in indexes]
        self.lookups.look_up(self.partition, positions, wait=True)
        known = self.lookups.known(self.partition)
        for index, position in zip(indexes, positions, strict=True):
            entry = known.get(position)
            if entry is not None:
                values.add_knot(index, entry.msgs, _size(entry, self.backlog, index))
        complete = all(position in known for position in positions)
        self.complete = self.complete and complete
        return complete

    def _already_asked(self, start: int, end: int) -> list[int]:
        """Indexes in [start, end) of entries known or under way (a prefetch asked for them)."""
        indexes = (self.backlog.index_of(position) for position in self.lookups.asked(self.partition))
        return sorted(i for i in indexes if i is not None and start <= i < end)


def spread(start: int, end: int) -> list[int]:
    """SAMPLES indexes spread evenly over [start, end) (fewer when the stretch is shorter)."""
    if end <= start:
        return []
    step = (end - start) / SAMPLES
    return sorted({start + int(step * (i + 0.5)) for i in range(SAMPLES)})


def _size(entry: LookedUpEntry, backlog: Backlog, index: int) -> float:
    """An entry's stored bytes, or its ledger's average when its headers do not tell."""
    if entry.bytes is not None:
        return entry.bytes
    return backlog.entries_between(index, index + 1)[0][2]


def _ratio(a: float, b: float) -> float:
    return max(a, b) / max(1.0, min(a, b))
