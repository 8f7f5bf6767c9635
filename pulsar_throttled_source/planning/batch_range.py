"""A batch query's range (spark.read): where it ends, the start checked against the end, and its read tasks, split
as a stream's micro-batch is and bounded at the messages inside entries that the positions name.

The planner's own pieces (start_positions, task_ranges, data_loss), asked once; the Spark-facing reader
(batch.py) only calls plan_batch.
"""

from __future__ import annotations

from ..metadata.admin import PulsarAdmin
from ..metadata.admin_http import TopicNotFound
from ..metadata.catalog import CatalogSnapshot, PartitionCatalog
from ..offsets import SourceOffset
from ..options import EndSpec, SourceOptions, StartSpec
from ..positions import EntryPosition, MessagePosition
from ..read_task import ClientConfig, PartitionRange
from .data_loss import DataLossPolicy
from .start_positions import known_positions, position_before_time, resolve_start
from .task_ranges import task_ranges


def plan_batch(o: SourceOptions, catalog: PartitionCatalog, admin: PulsarAdmin, config: ClientConfig) -> list[PartitionRange]:
    """The batch query's read tasks, from startingOffsets/startingTime to endingOffsets/endingTime."""
    try:
        snap = catalog.snapshot(force=True)
    except TopicNotFound as gone:
        # failOnDataLoss does not apply: a deleted topic and a misspelt one look the same, and reading
        # nothing from either would hide the mistake.
        raise TopicNotFound(f"{gone} Options 'topic'/'topics' of a batch query name topics that exist (deleted "
                            "ones too: their messages are gone; failOnDataLoss=false does not skip them).") from None
    # As Kafka's source: a batch query reads from the beginning unless told otherwise.
    start = resolve_start(o.start if o.start.given else StartSpec("earliest"), snap, admin)
    end = resolve_end(o.end, snap, admin)
    check_start_before_end(o, start, end)
    loss = DataLossPolicy(o.subscription, False, o.fail_on_data_loss, batch_query=True)
    ranges = task_ranges(start, end, snap, o.max_entries_per_task, config, loss.check_range, loss.partitions_gone)
    return bound_messages(ranges, start, end, o.start.inside_entries(), o.end.inside_entries())


def resolve_end(end: EndSpec, snap: CatalogSnapshot, admin: PulsarAdmin) -> SourceOffset:
    """endingOffsets or endingTime as the last entry to read per partition (a user position is the first entry
    not read; a time's first message at or after it is not read)."""
    latest = {p: snap.readable_end(p) for p in snap.layouts}
    if end.kind == "latest":
        return SourceOffset(latest)
    if end.kind == "time":
        assert end.time_ms is not None
        # Never past an open transaction's start: what is published before the time but not readable yet is not read.
        return SourceOffset({p: min(position_before_time(admin, p, layout, end.time_ms), latest[p])
                             for p, layout in snap.layouts.items()})
    given = known_positions("endingOffsets", end.positions, snap)
    out: dict[str, EntryPosition] = {}
    for p in snap.layouts:
        value = given.get(p, "latest")
        if isinstance(value, str):
            out[p] = latest[p]
            continue
        # A message inside an entry ends the range in that entry: it is read, up to the message (read task).
        inside = isinstance(value, MessagePosition) and value.batch_index > 0
        last = EntryPosition(value.ledger_id, value.entry_id - (0 if inside else 1))
        if last > latest[p]:
            readable = latest[p]
            raise ValueError(f"Option 'endingOffsets' for partition {p}: {value} is beyond the "
                             f"partition's end (its newest readable entry is {readable.ledger_id}:{readable.entry_id}, so "
                             f"at most {{\"ledgerId\": {readable.ledger_id}, \"entryId\": {readable.entry_id + 1}}}), or use \"latest\".")
        out[p] = last
    return SourceOffset(out)


def check_start_before_end(o: SourceOptions, start: SourceOffset, end: SourceOffset) -> None:
    """Each partition's start at or before its end: message by message (in Pulsar's order) where both options give
    the partition a position and either names a message, else entry by entry as resolved."""
    given_start, given_end = dict(o.start.positions), dict(o.end.positions)
    for p, s in start.positions.items():
        first, stop = _message(given_start.get(p)), _message(given_end.get(p))
        if first is not None and stop is not None and MessagePosition in (type(given_start[p]), type(given_end[p])):
            if first > stop:
                raise ValueError(f"Partition {p}: the start ({':'.join(map(str, first))}) is after the end "
                                 f"({':'.join(map(str, stop))}): options 'startingOffsets' and 'endingOffsets' must give a "
                                 "start at or before the end (ledger:entry:batchIndex).")
            continue
        e = end.positions[p]
        if s > e:  # offsets hold the last entry read: the first entry read is the next one
            first_entry, last_entry = EntryPosition(s.ledger_id, s.entry_id + 1), EntryPosition(e.ledger_id, e.entry_id + 1)
            begin = "startingTime" if o.start.kind == "time" else "startingOffsets"
            raise ValueError(f"Partition {p}: the start ({first_entry}) is after the end ({last_entry}): options '{begin}' "
                             f"and '{o.end.option}' must give a start at or before the end.")


def _message(value: EntryPosition | MessagePosition | str | None) -> tuple[int, int, int] | None:
    """A given position as (ledger, entry, batch index); None for "earliest"/"latest" or none given."""
    if isinstance(value, MessagePosition):
        return value.bound()
    return (value.ledger_id, value.entry_id, 0) if isinstance(value, EntryPosition) else None


def bound_messages(ranges: list[PartitionRange], start: SourceOffset, end: SourceOffset,
                   first: dict[str, MessagePosition], stop: dict[str, MessagePosition]) -> list[PartitionRange]:
    """A partition's first task starts at its start message, its last task ends before its end message."""
    out = []
    for r in ranges:
        f = first.get(r.partition) if r.start == start.positions.get(r.partition) else None
        e = stop.get(r.partition) if r.end == end.positions.get(r.partition) else None
        out.append(r if f is None and e is None else
                   r.inside_entries(f.bound() if f is not None else None, e.bound() if e is not None else None))
    return out
