"""Executor side: read one planned entry range of one partition into Arrow record batches (read_ranges
runs a task's ranges in turn: one, or several packed by planning/task_packing.py).

Runs in Spark's Python workers on a fresh unpickled `PartitionRange` (..read_task). Readers come
from the worker's shared client (client_cache); what belongs to the range and when it is done is
decided by range_progress, which accounts for the entries a reader never sees as messages with
range_entries and metadata from task_lookup. Both read paths run one read loop, range_reader, entry
by entry, over the source their read_path.ReadPath opens; each appends an entry's messages in its own
way: python_read, message by message into arrow_rows (decoded_rows for a topic with a schema), or
native_read, one call into the library behind native_reader (read_path chooses); what goes wrong is
reported by errors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..read_task import PartitionRange, ReadTask, ranges_of
from .range_reader import read_entries
from .read_errors import PartitionDeleted, report_missing, scrub_error
from .read_path import read_path_for
from .task_lookup import TaskLookup


def read_ranges(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """Yield the messages of each of the task's ranges in turn, one Arrow stream. Each range is read as it
    would be alone (its own reader, parked at its end for the next batch); a retried task reads them all again.
    This is both read paths' error boundary: whatever fails leaves scrubbed of secrets."""
    ranges = ranges_of(task)
    try:
        for part in ranges:
            yield from read_range(part)
    except Exception as e:
        scrub_error(e, ranges[0].config)
        raise


def read_range(part: PartitionRange) -> Iterator[pa.RecordBatch]:
    """Yield the messages of (start, end] as Arrow batches of at most max_rows_per_batch rows."""
    path = read_path_for(part.config)
    lookups = TaskLookup(part)
    try:
        try:
            if part.runs and lookups.partition_gone():
                # Never open a reader here: the broker's topic auto-creation would bring the partition back.
                report_missing(part, planned_positions(part), "the partition was deleted after planning")
                return
        except PartitionDeleted:
            report_missing(part, planned_positions(part), PartitionDeleted.WHY)
            return
        gone = lookups.range_gone if part.runs else None
        try:
            source = path.open(part, gone)
        except PartitionDeleted:
            report_missing(part, planned_positions(part), PartitionDeleted.WHY)
            return
        failed = False
        try:
            yield from read_entries(source, part, lookups, gone)
        except Exception:
            failed = True
            raise
        finally:
            path.close(source, part, failed)
    finally:
        lookups.close()


def planned_positions(part: PartitionRange) -> list[tuple[int, int]]:
    return [(ledger, entry) for ledger, first, count in part.runs or () for entry in range(first, first + count)]
