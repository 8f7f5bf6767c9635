"""Entry positions: where an entry of a partition is, and what an offset holds per partition.

An offset (offsets.SourceOffset) maps each partition to the position of the LAST ENTRY INCLUDED so far:
a micro-batch covers the entries after `start` up to and including `end`. Ranges
end on entry boundaries, except where maxMessagesPerTrigger cuts a batched entry: the
offset then also holds the batch index it was cut at (offsets.py), and each message
still lands in exactly one micro-batch. `BEFORE_EARLIEST` means nothing of the partition was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class EntryPosition:
    """A BookKeeper entry address; ordering is Pulsar's (ledger, then entry)."""

    ledger_id: int
    entry_id: int

    def to_json(self) -> dict[str, int]:
        return {"ledgerId": self.ledger_id, "entryId": self.entry_id}

    @classmethod
    def from_json(cls, value: Any, where: str) -> EntryPosition:
        if not isinstance(value, Mapping) or set(value) != {"ledgerId", "entryId"}:
            raise ValueError(f"{where}: expected an object {{\"ledgerId\": <int>, \"entryId\": <int>}}, got {value!r}")
        ledger, entry = value["ledgerId"], value["entryId"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (ledger, entry)) or ledger < -1 or entry < -1:
            raise ValueError(f"{where}: ledgerId and entryId must be integers >= -1, got {value!r}")
        return cls(ledger, entry)

    @classmethod
    def parse(cls, text: str, where: str) -> EntryPosition:
        """Parse the broker's "ledger:entry" form (internalStats lastConfirmedEntry)."""
        try:
            ledger, entry = text.split(":")
            return cls(int(ledger), int(entry))
        except ValueError:
            raise ValueError(f"{where}: expected 'ledgerId:entryId', got {text!r}") from None

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


BEFORE_EARLIEST = EntryPosition(-1, -1)


@dataclass(frozen=True, order=True)
class MessagePosition:
    """A message inside an entry: batch index `batch_index` of entry ledger:entry (a message that is not
    batched has index 0). What a batch query's startingOffsets/endingOffsets name with a "batchIndex"."""

    ledger_id: int
    entry_id: int
    batch_index: int

    @property
    def entry(self) -> EntryPosition:
        return EntryPosition(self.ledger_id, self.entry_id)

    def bound(self) -> MessageBound:
        return self.ledger_id, self.entry_id, self.batch_index

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.batch_index}"


# (ledger id, entry id) as a plain tuple, where a dataclass costs too much: what read tasks compare per message,
# and what the planner's entry lookups are keyed by.
Position = tuple[int, int]
# (ledger id, entry id, batch index): a read task's bound inside an entry (read_task.PartitionRange).
MessageBound = tuple[int, int, int]
EntryRuns = tuple[tuple[int, int, int], ...]  # a range's entries: (ledger id, first entry, count), in order
