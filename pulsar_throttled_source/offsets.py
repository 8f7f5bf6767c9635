"""The source's offset (`SourceOffset`): what Spark checkpoints for each micro-batch, as Spark's Kafka
source has its KafkaSourceOffset. The planner, the stream readers and the batch reader pass this one
typed value around; JSON is made and read only here, at Spark's boundary.

Its JSON is what checkpoints already hold, and must stay byte for byte (Spark compares offsets as JSON
strings, and a restarted query reads the offsets an older version wrote):

    {"<partition>": {"ledgerId": L, "entryId": E}, ...,   partitions in partition_sort_key order
     (or {"ledgerId": L, "entryId": E, "batchIndex": K}:   a micro-batch that ended inside entry L:E)
     "queryId": "<32 hex digits>",                         every planned end offset
     "ledgerEnds": {"<partition>": <ledger id>, ...},      only when some position ends a closed ledger
     "queryStart": {"<partition>": {...}, ...},            only the end offset of a query's first batch
     "progress": {...}}                                    PySpark 4.0/4.1 only: the query progress report

Each position is the LAST ENTRY INCLUDED so far (see positions.py). A batch cut by maxMessagesPerTrigger may end
inside a batched entry: its partition is then written with the "batchIndex" of the first message NOT included, and
"ledgerId"/"entryId" name the entry cut, whose messages before that index are included, as is everything before
it. In memory that is the position of the entry before it (the last one wholly included; (L, -1) before the first
entry of ledger L) and the index, in `cuts`. An offset without batchIndex means what it always meant, so
checkpoints written before it load unchanged.

"progress" is not part of where the query stands: it is how far behind the query was when the batch
was planned (planning/progress.py), carried on the Spark lines that show a Python source nothing else
(4.0 and 4.1 show the end offset in the query progress; 4.2+ show reportLatestOffset instead). It is
kept as read, so an offset read back from a checkpoint is written out byte for byte the same, and it
plays no part in equality or in where a batch starts.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .positions import EntryPosition, MessagePosition
from .topics import partition_sort_key

CHECKPOINT_HINT = ("The offset log in the query's checkpoint (<checkpointLocation>/offsets) is corrupt or was not written by "
                   "this source; restore it from a backup, or start the query with a new checkpointLocation.")

# The keys of an offset that are not partition names.
QUERY_ID = "queryId"
LEDGER_ENDS = "ledgerEnds"
QUERY_START = "queryStart"
PROGRESS = "progress"
_NOT_PARTITIONS = (QUERY_ID, LEDGER_ENDS, QUERY_START, PROGRESS)
BATCH_INDEX = "batchIndex"  # a position's key: the entry's first message not included
_QUERY_ID_FORM = re.compile(r"[0-9a-f]{32}")


def new_query_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class SourceOffset:
    """Where a query stands. Treat the maps as read-only: the offset is shared, never copied.

    - `positions`: partition -> the last entry included.
    - `query_id`: the query's identity, which names its source-wide quota bucket. Created with the
      query's first planned batch and kept in its checkpoint, so a restart charges the same bucket and
      two queries never share one by accident of naming. None: an initial offset, or a checkpoint
      written before identities.
    - `ledger_ends`: partition -> the ledger after its position, where the position is the last entry
      of a closed ledger followed by an empty one: the proof a restart needs, once retention deleted
      the fully read ledger, that nothing unread went with it.
    - `query_start`: carried by the end offset of a query's first batch only: the positions that batch
      started from. Spark re-runs an unfinished first batch from a fresh initialOffset() call, which
      would resolve "earliest", "latest" or a time again against a topic that moved on (Kafka's source
      keeps its initial offsets in the checkpoint for the same reason); the re-run must read the same range.
    """

    positions: dict[str, EntryPosition]
    query_id: str | None = None
    ledger_ends: dict[str, int] = field(default_factory=dict)
    query_start: dict[str, EntryPosition] | None = None
    progress: dict[str, Any] | None = field(default=None, compare=False)  # see the module doc
    # partition -> K: the entry after its position is included up to (not with) batch index K >= 1 (the module doc)
    cuts: dict[str, int] = field(default_factory=dict)

    def cut_message(self, partition: str) -> MessagePosition | None:
        """The first message of `partition` not included when its entry was cut inside, else None."""
        k = self.cuts.get(partition)
        if k is None:
            return None
        before = self.positions[partition]
        return MessagePosition(before.ledger_id, before.entry_id + 1, k)

    def to_json(self) -> dict[str, Any]:
        """The offset as Spark stores it; the keys in one fixed order (see the module doc)."""
        out: dict[str, Any] = positions_to_json(self.positions)
        for p, k in self.cuts.items():
            before = self.positions[p]
            out[p] = {"ledgerId": before.ledger_id, "entryId": before.entry_id + 1, BATCH_INDEX: k}
        if self.query_id is not None:
            out[QUERY_ID] = self.query_id
        if self.ledger_ends:
            out[LEDGER_ENDS] = {p: self.ledger_ends[p] for p in sorted(self.ledger_ends, key=partition_sort_key)}
        if self.query_start is not None:
            out[QUERY_START] = positions_to_json(self.query_start)
        if self.progress is not None:
            out[PROGRESS] = self.progress
        return out

    @classmethod
    def from_json(cls, value: Any, where: str) -> SourceOffset:
        """An offset Spark hands back from its checkpoint; a malformed one is an error that names
        `where` and says what to do."""
        found = value if isinstance(value, Mapping) else None
        query_start = None
        if found is not None and QUERY_START in found:
            query_start = _checkpointed_positions(found[QUERY_START], f"{where} ({QUERY_START})")
        progress = found.get(PROGRESS) if found is not None else None
        cuts = _cuts(found, where) if found is not None else {}
        if cuts:
            value = {p: v for p, v in value.items() if p not in cuts}
        positions = _checkpointed_positions(value, where)
        if cuts:
            positions.update({p: before for p, (before, _) in cuts.items()})
            positions = {p: positions[p] for p in sorted(positions, key=partition_sort_key)}
        return cls(positions, _query_id(found, where), _ledger_ends(found, where), query_start,
                   progress if isinstance(progress, dict) else None, {p: k for p, (_, k) in cuts.items()})


def positions_to_json(positions: Mapping[str, EntryPosition]) -> dict[str, Any]:
    """Spark compares offsets as JSON strings: always emit partitions in one fixed order."""
    return {p: positions[p].to_json() for p in sorted(positions, key=partition_sort_key)}


def positions_from_json(value: Any, where: str = "checkpointed offset") -> dict[str, EntryPosition]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a JSON object mapping partition topics to positions, got {type(value).__name__}")
    return {str(p): EntryPosition.from_json(v, f"{where} for partition {p}") for p, v in value.items()}


def _checkpointed_positions(value: Any, where: str) -> dict[str, EntryPosition]:
    if isinstance(value, Mapping) and any(key in value for key in _NOT_PARTITIONS):
        value = {p: v for p, v in value.items() if p not in _NOT_PARTITIONS}
    try:
        positions = positions_from_json(value, where)
        bad = [p for p in positions if not p.startswith("persistent://") or p.count("/") != 4]
        if bad:
            raise ValueError(f"{where}: {bad[0]!r} is not a partition name (expected persistent://tenant/namespace/topic-partition-N)")
    except ValueError as e:
        raise ValueError(f"{e}. {CHECKPOINT_HINT}") from None
    return positions


def _cuts(value: Mapping[str, Any], where: str) -> dict[str, tuple[EntryPosition, int]]:
    """The partitions written with a batchIndex: the position before the entry cut, and the index."""
    out: dict[str, tuple[EntryPosition, int]] = {}
    for p, v in value.items():
        if p in _NOT_PARTITIONS or not isinstance(v, Mapping) or BATCH_INDEX not in v:
            continue
        k = v[BATCH_INDEX]
        entry = EntryPosition.from_json({key: x for key, x in v.items() if key != BATCH_INDEX}, f"{where} for partition {p}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1 or entry.ledger_id < 0 or entry.entry_id < 0:
            raise ValueError(f"{where} for partition {p}: a {BATCH_INDEX} must be a positive integer after an entry's "
                             f"ledgerId and entryId (>= 0), got {dict(v)!r}. {CHECKPOINT_HINT}")
        out[str(p)] = (EntryPosition(entry.ledger_id, entry.entry_id - 1), k)
    return out


def _query_id(value: Mapping[str, Any] | None, where: str) -> str | None:
    if value is None or QUERY_ID not in value:
        return None
    found = value[QUERY_ID]
    if not isinstance(found, str) or not _QUERY_ID_FORM.fullmatch(found):
        raise ValueError(f"{where}: {QUERY_ID} must be 32 lowercase hex digits, got {found!r}. {CHECKPOINT_HINT}")
    return found


def _ledger_ends(value: Mapping[str, Any] | None, where: str) -> dict[str, int]:
    if value is None or LEDGER_ENDS not in value:
        return {}
    found = value[LEDGER_ENDS]
    if not isinstance(found, Mapping) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in found.values()):
        raise ValueError(f"{where}: {LEDGER_ENDS} must map partitions to ledger ids, got {found!r}. {CHECKPOINT_HINT}")
    return {str(p): int(v) for p, v in found.items()}
