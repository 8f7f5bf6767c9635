"""maxMessagesPerTrigger (Kafka's maxOffsetsPerTrigger): a cap on the messages of one micro-batch across all
partitions, exact even where an entry holds a producer's batch of many messages.

As Kafka's source does with maxOffsetsPerTrigger, the cap is split over the partitions in proportion to their
backlogs (here in entries, what the layouts count exactly), largest remainders first so the shares add up to the
cap; what a partition cannot use (its backlog holds fewer messages than its share) goes to the others. Each
partition's share is then found in its entries: their messages are looked up (each entry's own metadata, the
lookups the quotas use, metadata/backlog_sizes.py), entry by entry from the partition's start, so the batch ends
on the share's last message, inside an entry where it falls there (the offset then carries the entry's batch
index, offsets.py). The cap is applied before the quotas, as maxEntriesPerTrigger is: they admit whole entries
of what the cap leaves, and a partition they hold back ends on an entry boundary, under its share.

What a planning call cannot look up (lookup_scheduler's per-call budget, deadline) is not guessed: the partition's
batch ends at the last entry whose messages are known, under its share, and the next batch goes on from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ..metadata.layout import Backlog
from ..positions import Position

LOOKUP_CHUNK = 256  # entries asked at once while walking a share (the scheduler's per-call budget)


class MessageCounts(Protocol):
    """The messages a reader is handed for backlog entries (metadata.backlog_sizes.BacklogSizes)."""

    def new_plan(self, partitions: int = 0) -> None: ...
    def message_counts(self, partition: str, backlog: Backlog, positions: list[Position]) -> Mapping[Position, int]: ...


@dataclass(frozen=True)
class Cut:
    """Where a partition's share ends: `entries` of its backlog (counted from its start), the last one only up to
    (not with) batch index `inside` when that is not None; `messages` in all."""

    entries: int
    inside: int | None
    messages: int


def split_messages(cap: int, weights: Mapping[str, int]) -> dict[str, int]:
    """`cap` messages in proportion to `weights`, rounded so the shares add up to `cap` (largest remainders)."""
    whole = sum(weights.values())
    if whole <= 0 or cap <= 0:
        return {p: 0 for p in weights}
    shares = {p: cap * w // whole for p, w in weights.items()}
    left = cap - sum(shares.values())
    for p in sorted(weights, key=lambda p: (cap * weights[p] % whole, weights[p]), reverse=True)[:left]:
        shares[p] += 1
    return shares


class MessageCap:
    """Cuts each partition's backlog at its share of maxMessagesPerTrigger (see the module doc)."""

    def __init__(self, counts: MessageCounts) -> None:
        self._counts = counts

    def cut(self, backlogs: Mapping[str, Backlog], skipped: Mapping[str, int], cap: int) -> dict[str, Cut]:
        """Per partition with backlog, where its share of `cap` ends. `skipped`: the messages of a partition's first
        backlog entry that earlier batches delivered (an offset cut inside it)."""
        live = {p: b for p, b in backlogs.items() if b.entries > 0}
        self._counts.new_plan(len(live))
        cuts: dict[str, Cut] = {}
        left = cap
        while live:
            shares = split_messages(left, {p: b.entries for p, b in live.items()})
            walked = {p: self._walk(p, b, skipped.get(p, 0), shares[p]) for p, b in live.items()}
            short = [p for p, c in walked.items() if c.messages < shares[p]]
            if not short or len(short) == len(walked):
                cuts.update(walked)
                break
            # What a short partition cannot use goes to the others: its cut is final, the rest share what is left.
            for p in short:
                cuts[p] = walked[p]
                left -= walked[p].messages
                del live[p]
        return cuts

    def _walk(self, partition: str, backlog: Backlog, skipped: int, share: int) -> Cut:
        """The partition's entries from its start until `share` messages: where they end."""
        taken = index = 0
        known: dict[Position, int] = {}
        while taken < share and index < backlog.entries:
            position = _position(backlog, index)
            if position not in known:
                # Enough entries for what is left at the messages per entry seen so far, and one more.
                per_entry = max(1.0, sum(known.values()) / len(known)) if known else 1.0
                ahead = min(LOOKUP_CHUNK, int((share - taken) / per_entry) + 1)
                positions = [(ledger, entry) for ledger, entry, _ in backlog.entries_between(index, index + ahead)]
                known.update(self._counts.message_counts(partition, backlog, positions))
                if position not in known:
                    break  # not answered in this call: end before it, never past the share
            first = skipped if index == 0 else 0
            available = max(0, known[position] - first)
            if taken + available > share:
                return Cut(index + 1, first + share - taken, share)
            taken += available
            index += 1
        return Cut(index, None, taken)


def _position(backlog: Backlog, index: int) -> Position:
    ledger, entry, _ = backlog.entries_between(index, index + 1)[0]
    return ledger, entry
