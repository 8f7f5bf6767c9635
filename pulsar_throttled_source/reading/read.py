"""Executor side: read one planned entry range of one partition into Arrow record batches (read_task
runs a task's ranges in turn: one, or several packed by planning/task_packing.py).

Runs in Spark's Python workers on a fresh unpickled `PartitionRange` (..read_task). Readers come
from the worker's shared client (client_cache); what belongs to the range and when it is done is
decided by range_progress, which accounts for the entries a reader never sees as messages with
range_entries and metadata from task_lookup. Both read paths run one read loop, range_reader, entry
by entry; each appends an entry's messages in its own way: python_read, message by message into
arrow_rows (decoded_rows for a topic with a schema), or native_read, one call into the library
behind native_reader (read_path chooses); what goes wrong is reported by errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..positions import BEFORE_EARLIEST
from ..read_task import PartitionRange, ReadTask, ranges_of
from .client_cache import drop_client, drop_native_client, open_native_reader, open_reader, park_native_reader
from .errors import PartitionDeleted, report_missing, scrub_error
from .native_library import native_library
from .native_read import read_native_messages
from .python_read import read_python_messages
from .read_path import uses_native_path
from .task_lookup import TaskLookup


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
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
    cfg = part.config
    native = uses_native_path(cfg)
    start_id, inclusive = reader_start(part, native and not native_library().inclusive_start)
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
            if native:
                reader = open_native_reader(part, None if part.start == BEFORE_EARLIEST else start_id.serialize(), gone, inclusive)
                messages = read_native_messages(reader, part, lookups, gone)
            else:
                reader = open_reader(part, start_id, gone, inclusive)
                messages = read_python_messages(reader, part, lookups, gone)
        except PartitionDeleted:
            report_missing(part, planned_positions(part), PartitionDeleted.WHY)
            return
        failed = False
        try:
            yield from messages
        except Exception:
            failed = True
            raise
        finally:
            _close(reader, part, failed, native)
    finally:
        lookups.close()


def reader_start(part: PartitionRange, exclusive_only: bool) -> tuple[Any, bool]:
    """Where a reader of the range starts (a pulsar.MessageId), and whether inclusively.

    Where planning listed the range's entries, at the first one, inclusively: started after
    `start`, the broker would read the entry at `start` too, only for the client to drop it (a
    bookie read per reader opened). Else (or `exclusive_only`: a native library that cannot set
    it) after `start`: the broker delivers the start entry itself for batch index -1, and the
    read loop skips entries at or before `start`."""
    import pulsar

    if part.start == BEFORE_EARLIEST:
        return pulsar.MessageId.earliest, False
    partition = max(part.partition_index, -1)
    if part.runs and not exclusive_only:
        ledger, first, _ = part.runs[0]
        return pulsar.MessageId(partition, ledger, first, -1), True
    return pulsar.MessageId(partition, part.start.ledger_id, part.start.entry_id, -1), False


def planned_positions(part: PartitionRange) -> list[tuple[int, int]]:
    return [(ledger, entry) for ledger, first, count in part.runs or () for entry in range(first, first + count)]


def _close(reader: Any, part: PartitionRange, failed: bool, native: bool) -> None:
    cfg = part.config
    if not failed:
        if native and reader.ended_exactly:
            park_native_reader(part, reader)  # the next range's task in this process reads on from it
        else:
            reader.close()
        return
    # A failed read (broker gone longer than pollTimeoutMs, connection broken): Spark retries the
    # task, possibly in this worker; the retry must get a fresh client.
    try:
        reader.close()
    except Exception:  # closing on a broken connection may fail too
        pass
    (drop_native_client if native else drop_client)(cfg)
