"""The Spark-facing reader of a batch query: `spark.read.format("pulsar-throttled")` (issue 34).

Reads the messages between `startingOffsets` (or `startingTime`) and `endingOffsets` (or `endingTime`) once, split into
read tasks as a stream's micro-batch is (`maxEntriesPerTask`), with the same columns, decoding,
chunked and transactional handling and data-loss rules: the planner's own pieces, asked once.

Quotas and trigger limits throttle a stream's micro-batches; a batch query has one batch, read at
once, so they are refused with an error that says so (a throttled backfill is a stream with
Trigger.AvailableNow).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .metadata.admin import PulsarAdmin
from .metadata.admin_http import TopicNotFound
from .metadata.catalog import CatalogSnapshot, PartitionCatalog
from .offsets import SourceOffset
from .options import EndSpec, SourceOptions, StartSpec
from .planning.data_loss import DataLossPolicy
from .planning.start_positions import known_positions, position_before_time, resolve_start
from .planning.task_ranges import task_ranges
from .positions import EntryPosition, MessagePosition
from .read_task import PartitionRange
from .reading.read import read_range
from .schemas.columns import ValueSchema
from .schemas.schema_guard import TopicSchemaGuard


def check_batch_options(o: SourceOptions) -> None:
    """A batch query refuses what only throttles a stream, naming it."""
    throttling = "quotas (dispatchThrottlingRate*, quotaSource=broker)" if o.throttled else ""
    trigger = "maxEntriesPerTrigger" if o.max_entries_per_trigger is not None else ""
    floor = "minEntriesPerTrigger" if o.min_entries_per_trigger is not None else ""
    given = [name for name in (throttling, trigger, floor) if name]
    if given:
        raise ValueError(f"Options {' and '.join(given)} throttle a stream's micro-batches; a batch query (spark.read) reads "
                         "its whole range in one batch. Remove them, or read with spark.readStream and "
                         "trigger(availableNow=True) for a throttled backfill that stops at the end.")


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


def inside_entries(o: SourceOptions) -> tuple[dict[str, MessagePosition], dict[str, MessagePosition]]:
    """The partitions whose start, and those whose end, is a message inside an entry (a batchIndex past 0)."""
    def inside(positions: tuple[tuple[str, EntryPosition | MessagePosition | str], ...]) -> dict[str, MessagePosition]:
        return {p: v for p, v in positions if isinstance(v, MessagePosition) and v.batch_index > 0}
    return inside(o.start.positions), inside(o.end.positions)


def check_message_order(o: SourceOptions) -> None:
    """A start after the end, where either names a message inside an entry (entry-level ends are checked after
    resolving): compared message by message, in Pulsar's order."""
    def message(value: EntryPosition | MessagePosition | str) -> tuple[int, int, int] | None:
        return value.bound() if isinstance(value, MessagePosition) else (
            (value.ledger_id, value.entry_id, 0) if isinstance(value, EntryPosition) else None)
    ends = dict(o.end.positions)
    for p, value in o.start.positions:
        end_value = ends.get(p, "latest")
        if not (isinstance(value, MessagePosition) or isinstance(end_value, MessagePosition)):
            continue
        first, stop = message(value), message(end_value)
        if first is not None and stop is not None and first > stop:
            raise ValueError(f"Partition {p}: the start ({':'.join(map(str, first))}) is after the end "
                             f"({':'.join(map(str, stop))}): options 'startingOffsets' and 'endingOffsets' must give a start "
                             "at or before the end (ledger:entry:batchIndex).")


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


class PulsarBatchReader(DataSourceReader):
    """partitions(): the query's read tasks, planned once on the driver; read(): one task, on an executor."""

    def __init__(self, options: SourceOptions, value_schema: ValueSchema | None = None) -> None:
        check_batch_options(options)
        self.options = options
        self.value_schema = value_schema

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        admin = PulsarAdmin.for_planning(o)
        guard = TopicSchemaGuard(admin, self.value_schema).check if o.decode_schema else None
        catalog = PartitionCatalog(admin, o.topics, o.topics_pattern, o.pattern_namespace, o.metadata_refresh_ms, False,
                                   on_topics=guard)
        try:
            check_message_order(o)
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
            for p, s in start.positions.items():
                e = end.positions[p]
                if s > e:
                    first, last = EntryPosition(s.ledger_id, s.entry_id + 1), EntryPosition(e.ledger_id, e.entry_id + 1)
                    begin = "startingTime" if o.start.kind == "time" else "startingOffsets"
                    raise ValueError(f"Partition {p}: the start ({first}) is after the end ({last}): options '{begin}' "
                                     f"and '{o.end.option}' must give a start at or before the end.")
            loss = DataLossPolicy(o.subscription, False, o.fail_on_data_loss, batch_query=True)
            ranges = task_ranges(start, end, snap, o.max_entries_per_task, o.read_task_config(self.value_schema), loss.check_range,
                                 loss.partitions_gone)
            return bound_messages(ranges, start, end, *inside_entries(o))
        finally:
            catalog.close()
            admin.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PartitionRange):
            return iter(())  # an empty range: PySpark still runs one task, with a partition of its own
        return read_range(partition)
