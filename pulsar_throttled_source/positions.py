"""Entry positions and the JSON form of the source's offsets.

An offset maps each partition to the position of the LAST ENTRY INCLUDED so far:
a micro-batch covers the entries after `start` up to and including `end`. Ranges
always end on entry boundaries, so every message of a batched entry lands in
exactly one micro-batch. `BEFORE_EARLIEST` means nothing of the partition was read.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .topics import partition_sort_key


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


def offsets_to_json(offsets: Mapping[str, EntryPosition]) -> dict[str, dict[str, int]]:
    """Spark compares offsets as JSON strings: always emit partitions in one fixed order."""
    return {p: offsets[p].to_json() for p in sorted(offsets, key=partition_sort_key)}


def offsets_from_json(value: Any, where: str = "checkpointed offset") -> dict[str, EntryPosition]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a JSON object mapping partition topics to positions, got {type(value).__name__}")
    return {str(p): EntryPosition.from_json(v, f"{where} for partition {p}") for p, v in value.items()}


CHECKPOINT_HINT = ("The offset log in the query's checkpoint (<checkpointLocation>/offsets) is corrupt or was not written by "
                   "this source; restore it from a backup, or start the query with a new checkpointLocation.")


# Carried by the end offset of a query's first micro-batch only: the positions that batch started from.
# Spark re-runs an unfinished first batch from a fresh initialOffset() call, which would resolve
# "earliest", "latest" or a time again, against a topic that moved on (Kafka's source keeps its
# initial offsets in the checkpoint for the same reason). The re-run must read the same range.
QUERY_START = "queryStart"


def with_query_start(end: dict, start: Mapping[str, EntryPosition]) -> dict:
    return {**end, QUERY_START: offsets_to_json(start)}


def query_start(value: Any, where: str) -> dict[str, EntryPosition] | None:
    """The positions a first batch started from, when `value` (its end offset) carries them."""
    if not isinstance(value, Mapping) or QUERY_START not in value:
        return None
    return checkpointed_offsets(value[QUERY_START], f"{where} ({QUERY_START})")


# Carried by every end offset once a batch was planned: the query's identity, which names its
# source-wide quota bucket. Created with the query's first planned batch and kept in its checkpoint,
# so a restart charges the same bucket and two queries never share one by accident of naming.
QUERY_ID = "queryId"
_QUERY_ID_FORM = re.compile(r"[0-9a-f]{32}")
# Carried by an end offset whose position for a partition is the last entry of a closed ledger
# followed by an empty one (partition -> that next ledger's id): the proof a restart needs, once
# retention deleted the fully read ledger, that nothing unread went with it.
LEDGER_ENDS = "ledgerEnds"
_NOT_PARTITIONS = (QUERY_START, QUERY_ID, LEDGER_ENDS)


def new_query_id() -> str:
    return uuid.uuid4().hex


def with_query_id(end: dict, query_id: str) -> dict:
    return {**end, QUERY_ID: query_id}


def query_id(value: Any, where: str) -> str | None:
    """The identity an offset carries (None for the initial offset, or a checkpoint from before identities)."""
    if not isinstance(value, Mapping) or QUERY_ID not in value:
        return None
    found = value[QUERY_ID]
    if not isinstance(found, str) or not _QUERY_ID_FORM.fullmatch(found):
        raise ValueError(f"{where}: {QUERY_ID} must be 32 lowercase hex digits, got {found!r}. {CHECKPOINT_HINT}")
    return found


def with_ledger_ends(end: dict, next_ledgers: Mapping[str, int]) -> dict:
    return {**end, LEDGER_ENDS: {p: next_ledgers[p] for p in sorted(next_ledgers, key=partition_sort_key)}} if next_ledgers else end


def ledger_ends(value: Any, where: str) -> dict[str, int]:
    """partition -> the ledger after its position, where the offset `value` carries it."""
    if not isinstance(value, Mapping) or LEDGER_ENDS not in value:
        return {}
    found = value[LEDGER_ENDS]
    if not isinstance(found, Mapping) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in found.values()):
        raise ValueError(f"{where}: {LEDGER_ENDS} must map partitions to ledger ids, got {found!r}. {CHECKPOINT_HINT}")
    return {str(p): int(v) for p, v in found.items()}


def checkpointed_offsets(value: Any, where: str) -> dict[str, EntryPosition]:
    """offsets_from_json for offsets Spark hands back from its checkpoint: errors say so and what to do."""
    if isinstance(value, Mapping) and any(key in value for key in _NOT_PARTITIONS):
        value = {p: v for p, v in value.items() if p not in _NOT_PARTITIONS}
    try:
        offsets = offsets_from_json(value, where)
        bad = [p for p in offsets if not p.startswith("persistent://") or p.count("/") != 4]
        if bad:
            raise ValueError(f"{where}: {bad[0]!r} is not a partition name (expected persistent://tenant/namespace/topic-partition-N)")
    except ValueError as e:
        raise ValueError(f"{e}. {CHECKPOINT_HINT}") from None
    return offsets
