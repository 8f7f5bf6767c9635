"""A partition's ledger layout, from the admin API's internalStats.

Counts entries and bytes between positions exactly (entry counts per ledger are
exact; bytes use each ledger's own average entry size), and finds the position
k entries after a start. This is what lets planning end every range on an entry
boundary and price it before reading it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..positions import BEFORE_EARLIEST, EntryPosition


@dataclass(frozen=True, slots=True)
class LedgerInfo:
    ledger_id: int
    entries: int
    size: int

    @property
    def avg_entry_size(self) -> float:
        return self.size / self.entries if self.entries else 0.0


@dataclass(frozen=True)
class Backlog:
    """The entries after a start position, in order, as runs of consecutive entries per ledger."""

    runs: tuple[tuple[int, int, int, float], ...]  # (ledger_id, first_entry, count, avg_entry_size)
    _cum_entries: tuple[int, ...] = field(repr=False, default=())
    _cum_bytes: tuple[float, ...] = field(repr=False, default=())

    @classmethod
    def of(cls, runs: list[tuple[int, int, int, float]]) -> Backlog:
        cum_e, cum_b, e, b = [], [], 0, 0.0
        for _, _, count, avg in runs:
            e += count
            b += count * avg
            cum_e.append(e)
            cum_b.append(b)
        return cls(tuple(runs), tuple(cum_e), tuple(cum_b))

    @property
    def entries(self) -> int:
        return self._cum_entries[-1] if self._cum_entries else 0

    @property
    def bytes(self) -> float:
        return self._cum_bytes[-1] if self._cum_bytes else 0.0

    def bytes_for(self, k: int) -> float:
        """Estimated bytes of the first k entries (exact per-ledger averages)."""
        if k <= 0:
            return 0.0
        k = min(k, self.entries)
        i = bisect.bisect_left(self._cum_entries, k)
        before_e = self._cum_entries[i - 1] if i else 0
        before_b = self._cum_bytes[i - 1] if i else 0.0
        return before_b + (k - before_e) * self.runs[i][3]

    def position_after(self, start: EntryPosition, k: int) -> EntryPosition:
        """The position of the k-th entry after start (start itself for k == 0)."""
        if k <= 0 or not self.runs:
            return start
        k = min(k, self.entries)
        i = bisect.bisect_left(self._cum_entries, k)
        before_e = self._cum_entries[i - 1] if i else 0
        ledger, first, _, _ = self.runs[i]
        return EntryPosition(ledger, first + (k - before_e) - 1)

    def index_of(self, position: tuple[int, int]) -> int | None:
        """How many entries precede `position` (ledger, entry) in the backlog; None when it is not in it."""
        ledger, entry = position
        run = self._run_of_ledger.get(ledger)
        if run is None:
            return None
        before, first, count = run
        return before + entry - first if first <= entry < first + count else None

    def entries_between(self, start: int, stop: int) -> list[tuple[int, int, float]]:
        """(ledger, entry, its ledger's average entry size) of the entries at indexes [start, stop):
        one walk over the runs, for planning loops that visit many consecutive entries."""
        out: list[tuple[int, int, float]] = []
        stop = min(stop, self.entries)
        if start >= stop:
            return out
        run = bisect.bisect_right(self._cum_entries, start)
        index = start
        while index < stop:
            ledger, first, _, avg = self.runs[run]
            before = self._cum_entries[run - 1] if run else 0
            last = min(stop, self._cum_entries[run])
            out.extend((ledger, first + i - before, avg) for i in range(index, last))
            index, run = last, run + 1
        return out

    @cached_property
    def _run_of_ledger(self) -> dict[int, tuple[int, int, int]]:
        """ledger id -> (entries before its run, its first entry, its entry count)."""
        return {ledger: (self._cum_entries[i - 1] if i else 0, first, count)
                for i, (ledger, first, count, _) in enumerate(self.runs)}


EMPTY_BACKLOG = Backlog.of([])


def _signature(stats: dict[str, Any], raw: list[dict[str, Any]]) -> tuple[Any, ...]:
    """Everything of internalStats that a layout is built from."""
    cursors = stats.get("cursors") or {}
    return (stats.get("lastConfirmedEntry"), stats.get("entriesAddedCounter"), stats.get("currentLedgerEntries"),
            stats.get("currentLedgerSize"), tuple((item.get("ledgerId"), item.get("entries"), item.get("size")) for item in raw),
            tuple((name, c.get("markDeletePosition")) for name, c in cursors.items() if isinstance(c, dict)))


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """Ledgers of one partition (oldest first) with their entry counts and sizes."""

    partition: str
    ledgers: tuple[LedgerInfo, ...]
    entries_added: int  # entriesAddedCounter: entries ever added (publish-side)
    consumed_up_to: tuple[tuple[str, EntryPosition], ...] = ()  # durable subscriptions' mark-delete positions
    open_ledger: int | None = None  # the ledger the broker writes to now (every older one is closed)
    signature: tuple[Any, ...] = field(default=(), repr=False, compare=False)  # of the stats it was built from
    first: EntryPosition | None = field(init=False, repr=False, compare=False)
    latest: EntryPosition = field(init=False, repr=False, compare=False)

    @classmethod
    def from_internal_stats(cls, partition: str, stats: dict[str, Any], previous: PartitionLayout | None = None) -> PartitionLayout:
        """The layout the stats describe; `previous` itself when they describe the same (most partitions
        at every refresh: only those that moved are built again, at 1,000 partitions a second)."""
        raw = stats.get("ledgers") or []
        signature = _signature(stats, raw)
        if previous is not None and previous.signature == signature and previous.partition == partition:
            return previous
        last_confirmed = EntryPosition.parse(str(stats.get("lastConfirmedEntry", "-1:-1")), f"internalStats of {partition}")
        ledgers: list[LedgerInfo] = []
        for i, item in enumerate(raw):
            ledger_id, entries, size = int(item["ledgerId"]), int(item.get("entries", 0)), int(item.get("size", 0))
            if i == len(raw) - 1 and entries == 0 and ledger_id == last_confirmed.ledger_id:
                # The open ledger reports 0 in the list; its live counts are separate fields.
                entries = int(stats.get("currentLedgerEntries", 0))
                size = int(stats.get("currentLedgerSize", 0))
            if entries > 0:
                ledgers.append(LedgerInfo(ledger_id, entries, size))
        cursors = tuple((str(name), EntryPosition.parse(str(c["markDeletePosition"]), f"cursor {name} of {partition}"))
                        for name, c in sorted((stats.get("cursors") or {}).items())
                        if isinstance(c, dict) and ":" in str(c.get("markDeletePosition", "")))
        open_ledger = int(raw[-1]["ledgerId"]) if raw else None
        return cls(partition, tuple(ledgers), int(stats.get("entriesAddedCounter", 0)), cursors, open_ledger, signature)

    def cursor(self, subscription: str) -> EntryPosition | None:
        """Where a durable subscription has consumed up to (None: no such subscription)."""
        return dict(self.consumed_up_to).get(subscription)

    def __post_init__(self) -> None:
        # Asked per partition on every plan (1,000 of them at scale): computed once. (Not
        # cached_property: on Python 3.11 its lock made these the plan's costliest lines.)
        first = EntryPosition(self.ledgers[0].ledger_id, 0) if self.ledgers else None
        latest = EntryPosition(self.ledgers[-1].ledger_id, self.ledgers[-1].entries - 1) if self.ledgers else BEFORE_EARLIEST
        object.__setattr__(self, "first", first)  # the oldest entry still stored; None when none is
        object.__setattr__(self, "latest", latest)  # the newest entry stored; BEFORE_EARLIEST when none is

    @property
    def total_entries(self) -> int:
        return sum(l.entries for l in self.ledgers)

    def backlog_after(self, start: EntryPosition, until: EntryPosition | None = None) -> Backlog:
        """Entries after `start` up to and including `until` (default: the latest)."""
        if start >= (self.latest if until is None else min(until, self.latest)):
            return EMPTY_BACKLOG  # most partitions, most triggers, at scale: nothing new
        runs: list[tuple[int, int, int, float]] = []
        for ledger in self.ledgers:
            if ledger.ledger_id < start.ledger_id:
                continue
            first = start.entry_id + 1 if ledger.ledger_id == start.ledger_id else 0
            last = ledger.entries - 1
            if until is not None:
                if ledger.ledger_id > until.ledger_id:
                    break
                if ledger.ledger_id == until.ledger_id:
                    last = min(last, until.entry_id)
            if last >= first:
                runs.append((ledger.ledger_id, first, last - first + 1, ledger.avg_entry_size))
        return Backlog.of(runs)

    def past_ledger_end(self, position: EntryPosition) -> EntryPosition:
        """`position` as "before the next ledger" when it is the last entry of a ledger that a
        later ledger holding entries follows (so the first one is closed and `position` ends it).

        The same place in the topic, but an offset that no longer names the ledger: once retention
        deletes that fully read ledger, a restart from here is not mistaken for data loss (nobody
        could tell afterwards whether the deleted ledger held more entries). Never "before" an
        empty ledger: the broker drops a ledger that closes empty (an unload, a restart), and an
        offset naming it would then look like loss."""
        if position.ledger_id == self.open_ledger:
            return position  # the open ledger may still grow
        for ledger, following in zip(self.ledgers, self.ledgers[1:], strict=False):
            if ledger.ledger_id == position.ledger_id:
                return EntryPosition(following.ledger_id, -1) if position.entry_id == ledger.entries - 1 else position
        return position

    def ledger_after_end(self, position: EntryPosition) -> int | None:
        """The ledger that follows `position` when `position` is the last entry of a closed ledger
        (past_ledger_end cannot say "before" it while it is empty). Carried by the offset: once
        retention deletes the fully read ledger, a restart finding that next ledger still stored
        knows nothing unread went with it (DataLossPolicy.check_range)."""
        if position.ledger_id == self.open_ledger:
            return None
        for i, ledger in enumerate(self.ledgers):
            if ledger.ledger_id == position.ledger_id:
                if position.entry_id != ledger.entries - 1:
                    return None
                if i + 1 < len(self.ledgers):
                    return self.ledgers[i + 1].ledger_id
                return self.open_ledger if self.open_ledger is not None and self.open_ledger > ledger.ledger_id else None
        return None

    def holds_ledger(self, ledger_id: int) -> bool:
        """Whether ledger `ledger_id` is still stored (the open ledger included, even empty)."""
        return ledger_id == self.open_ledger or any(l.ledger_id == ledger_id for l in self.ledgers)

    def stores(self, position: EntryPosition) -> bool:
        """Whether the entry at `position` is still stored."""
        return any(l.ledger_id == position.ledger_id and 0 <= position.entry_id < l.entries for l in self.ledgers)

    def lost_range(self, start: EntryPosition) -> tuple[EntryPosition, EntryPosition] | None:
        """(after, before) bounds of entries that followed `start` but are no longer stored.

        None when nothing is known to be missing. A start inside a stored ledger, or the very
        beginning, loses nothing; a start in a ledger older than the oldest stored one may have
        lost the rest of that ledger and any ledgers in between.
        """
        first = self.first
        if start == BEFORE_EARLIEST or first is None or start >= first:
            return None
        if any(l.ledger_id == start.ledger_id for l in self.ledgers):
            return None
        return (start, first)
