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
from .metadata.catalog import CatalogSnapshot, PartitionCatalog
from .options import EndSpec, SourceOptions, StartSpec
from .planning.data_loss import DataLossPolicy
from .planning.start_positions import known_positions, position_before_time, resolve_start
from .planning.task_ranges import task_ranges
from .positions import EntryPosition
from .reading.read import read_range
from .reading.task import PartitionRange
from .schemas.columns import ValueSchema
from .schemas.schema_guard import TopicSchemaGuard
from .stream import client_config


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


def resolve_end(end: EndSpec, snap: CatalogSnapshot, admin: PulsarAdmin) -> dict[str, EntryPosition]:
    """endingOffsets or endingTime as the last entry to read per partition (a user position is the first entry
    not read; a time's first message at or after it is not read)."""
    latest = {p: snap.readable_end(p) for p in snap.layouts}
    if end.kind == "latest":
        return latest
    if end.kind == "time":
        assert end.time_ms is not None
        # Never past an open transaction's start: what is published before the time but not readable yet is not read.
        return {p: min(position_before_time(admin, p, layout, end.time_ms), latest[p]) for p, layout in snap.layouts.items()}
    given = known_positions("endingOffsets", end.positions, snap)
    out: dict[str, EntryPosition] = {}
    for p in snap.layouts:
        value = given.get(p, "latest")
        if not isinstance(value, EntryPosition):
            out[p] = latest[p]
            continue
        last = EntryPosition(value.ledger_id, value.entry_id - 1)
        if last > latest[p]:
            readable = latest[p]
            raise ValueError(f"Option 'endingOffsets' for partition {p}: {value.ledger_id}:{value.entry_id} is beyond the "
                             f"partition's end (its newest readable entry is {readable.ledger_id}:{readable.entry_id}, so "
                             f"at most {{\"ledgerId\": {readable.ledger_id}, \"entryId\": {readable.entry_id + 1}}}), or use \"latest\".")
        out[p] = last
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
            snap = catalog.snapshot(force=True)
            # As Kafka's source: a batch query reads from the beginning unless told otherwise.
            starts = resolve_start(o.start if o.start.given else StartSpec("earliest"), snap, admin)
            ends = resolve_end(o.end, snap, admin)
            for p, s in starts.items():
                if s > ends[p]:
                    first, last = EntryPosition(s.ledger_id, s.entry_id + 1), EntryPosition(ends[p].ledger_id, ends[p].entry_id + 1)
                    begin = "startingTime" if o.start.kind == "time" else "startingOffsets"
                    raise ValueError(f"Partition {p}: the start ({first}) is after the end ({last}): options '{begin}' "
                                     f"and '{o.end.option}' must give a start at or before the end.")
            loss = DataLossPolicy(o.subscription, False, o.fail_on_data_loss)
            ranges: Sequence[InputPartition] = task_ranges(starts, ends, snap, o.max_entries_per_task,
                                                           client_config(o, self.value_schema), loss.check_range,
                                                           loss.partitions_gone)
            return ranges
        finally:
            catalog.close()
            admin.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PartitionRange):
            return iter(())  # an empty range: PySpark still runs one task, with a partition of its own
        return read_range(partition)
