"""Precise mode's cheap pricing: stretches of entries a producer batched alike, priced from a few of
them instead of every one.

Looking up every entry a window admits costs the broker a bookie read per entry (it serves a lookup
by reading the entry), as much again as the read it throttles (bench/bookie_reads.py). A backfill's
producer usually batched the same way for long stretches (full batches of `batchingMaxMessages`), so
a partition's backlog is checked at a grid of entries (each ledger's entries whose id is a multiple
of GRID), and a stretch between checked entries that hold the same number of messages, each the size
of its ledger's average entry (so the ledger around them is not a mix of batch sizes), is priced at
that value. Anything else (a change of batching, variable batches, sizes not known) is left to the
exact lookups. A steady drain so asks about one entry per GRID entries it admits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..positions import Position
from .layout import Backlog
from .lookup_scheduler import position_at

GRID = 64  # entries of a ledger checked: those whose id is a multiple of this (and each ledger's first)
LIKE_LEDGER = 0.05  # an entry within 5 % of its ledger's average entry size
MAX_CHECKS = 16  # entries checked per call: a window of more than MAX_CHECKS * GRID entries is spread

# (messages, stored bytes or None) of the entries at the given backlog indexes; None where unknown.
LookUp = Callable[[list[int]], list[tuple[float, float | None] | None]]


@dataclass
class _Stretch:
    msgs: float
    bytes: float
    until: Position  # the last entry checked alike


class AlikeStretches:
    """Per partition, the stretch of alike entries checked so far from the backlog's start."""

    def __init__(self) -> None:
        self._stretches: dict[str, _Stretch] = {}

    def knots(self, partition: str, backlog: Backlog, look_up: LookUp, msgs: float,
              size: float) -> dict[int, tuple[float, float]] | None:
        """{backlog index: (messages, bytes)} that price the window the quotas could admit and the
        entry after it as alike entries; None when they are not (the stretch is forgotten)."""
        stretch = self._stretches.get(partition)
        until = None if stretch is None else backlog.index_of(stretch.until)
        if stretch is None or until is None:  # nothing checked yet, or the query moved past it
            first = look_up([0])[0] if backlog.entries else None
            if first is None or not _like_its_ledger(backlog, 0, first):
                self.forget(partition)
                return None
            assert first[1] is not None
            stretch = self._stretches[partition] = _Stretch(first[0], first[1], position_at(backlog, 0))
            until = 0
        checks = _checks(backlog, until, _window_end(backlog.entries, stretch, msgs, size))
        value = (stretch.msgs, stretch.bytes)
        for index, entry in zip(checks, look_up(checks) if checks else [], strict=True):
            if entry is None or entry[0] != stretch.msgs or not _like_its_ledger(backlog, index, entry):
                last = self._last_entry_unlike(backlog, look_up, stretch, index, entry)
                if last is None:
                    self.forget(partition)
                    return None
                stretch.until = position_at(backlog, index - 1)
                return {0: value, index - 1: value, index: last}
            until = index
        stretch.until = position_at(backlog, until)
        return {0: value, until: value}

    @staticmethod
    def _last_entry_unlike(backlog: Backlog, look_up: LookUp, stretch: _Stretch, index: int,
                           entry: tuple[float, float | None] | None) -> tuple[float, float] | None:
        """A live topic's newest entry is often a batch its producer sent part-full: when the entry
        unlike the stretch is the backlog's last and the one before it is like the stretch, the
        stretch holds up to it and the last entry is priced as itself (None otherwise)."""
        if entry is None or entry[1] is None or index != backlog.entries - 1 or index < 1:
            return None
        before = look_up([index - 1])[0]
        if before is None or before[0] != stretch.msgs or not _like_its_ledger(backlog, index - 1, before):
            return None
        return (entry[0], entry[1])

    def prefetch(self, partition: str, backlog: Backlog, admitted: int, msgs: float, size: float) -> list[int] | None:
        """The backlog indexes the next window (from `admitted`) will check; None when the partition
        is not priced as alike entries."""
        stretch = self._stretches.get(partition)
        until = None if stretch is None else backlog.index_of(stretch.until)
        if stretch is None or until is None:
            return None
        end = admitted + _window_end(backlog.entries - admitted, stretch, msgs, size)
        return _checks(backlog, until, end)

    def forget(self, partition: str) -> None:
        self._stretches.pop(partition, None)


def _window_end(entries: int, stretch: _Stretch, msgs: float, size: float) -> int:
    """The index of the entry after what the quotas could admit of alike entries (the last one at most)."""
    reach = max(math.ceil(msgs / max(1.0, stretch.msgs)), math.ceil(size / max(1.0, stretch.bytes)), 1)
    return min(entries - 1, reach)


def _checks(backlog: Backlog, until: int, end: int) -> list[int]:
    """Indexes after `until` to check so that the stretch reaches `end`: grid entries up to the first
    one at or past `end` (or the backlog's last entry); spread evenly when that is too many."""
    if end <= until:
        return []
    last = backlog.entries - 1
    if end - until > MAX_CHECKS * GRID:
        step = (end - until) / MAX_CHECKS
        return sorted({until + math.ceil(step * (i + 1)) for i in range(MAX_CHECKS)} | {end})
    checks: list[int] = []
    for offset, (_, entry_id, _) in enumerate(backlog.entries_between(until + 1, min(last, end + GRID) + 1)):
        index = until + 1 + offset
        if entry_id % GRID == 0:
            checks.append(index)
            if index >= end:
                return checks
    return [*checks, last] if not checks or checks[-1] != last else checks


def _like_its_ledger(backlog: Backlog, index: int, entry: tuple[float, float | None]) -> bool:
    stored = entry[1]
    if stored is None:
        return False
    average = backlog.entries_between(index, index + 1)[0][2]
    return average > 0 and abs(stored - average) <= LIKE_LEDGER * average
