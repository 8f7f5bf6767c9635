"""Executor side: read one planned entry range of one partition into Arrow record batches.

Runs in Spark's Python workers on a fresh unpickled `PartitionRange` (..read_task). Readers come
from the worker's shared client (client_cache); what belongs to the range and when it is done is
decided by range_progress, which accounts for the entries a reader never sees as messages with
range_entries and metadata from task_lookup; rows are built by arrow_rows (decoded_rows for a
topic with a schema), or on the native read path by the library behind native_reader, driven by
native_read (read_path chooses); what goes wrong is reported by errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..positions import BEFORE_EARLIEST
from ..protobuf_wire import first_chunk_position, varint
from ..read_task import IDLE_CHECK_MS, PartitionRange
from .arrow_rows import Columns, EntryIds
from .client_cache import (
    drop_client,
    drop_native_client,
    has_message_available,
    open_native_reader,
    open_reader,
    park_native_reader,
)
from .decoded_rows import DecodedColumns, decoder_for
from .errors import PartitionDeleted, encrypted_without_key, report_missing
from .native_library import native_library
from .native_read import read_native_messages
from .range_entries import EncryptedEntryError
from .range_progress import RangeProgress
from .read_path import uses_native_path
from .task_lookup import TaskLookup


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
                messages = _read_messages(reader, part, lookups, gone)
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


def _read_messages(reader: Any, part: PartitionRange, lookups: TaskLookup,
                   gone: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
    """The messages the range owns: those whose entry (for a chunked message, whose FIRST chunk)
    lies in (start, end]. A chunked message that starts in the range and ends after it is read to
    its end; one that started before the range belongs to the previous range (the client drops
    its orphan chunks). Entries never dispatched as messages of their own (markers, aborted,
    chunks) are looked up when the reader passes or waits on them, so no read waits for them."""
    import pulsar

    cfg = part.config
    progress = RangeProgress(part, lookups)
    account, last_entry, enter = progress.account, progress.last_entry, progress.enter
    # The public Reader wraps every message in a Python object; the pybind11 reader it wraps
    # returns the native message directly, a large part of the per-message cost on this hot path
    # (bench/README.md, "Figures behind the code").
    raw_read = getattr(reader, "_reader", reader).read_next
    poll_ms = min(cfg.poll_timeout_ms, IDLE_CHECK_MS)
    limit = cfg.max_rows_per_batch
    decoder = decoder_for(part.partition, cfg) if cfg.value_schema is not None else None

    def new_columns() -> Columns | DecodedColumns:
        return Columns() if decoder is None else DecodedColumns(decoder, part.partition)

    columns = new_columns()
    last_pos = progress.start
    # Where the current entry stands: decided at an entry's first message and reused for the
    # rest of its batch (a batch's messages arrive consecutively, index after index), which
    # saves two native calls per message on batched topics.
    prev_index = -2
    skip = False
    window: tuple[int, int] | None = None
    in_end_entry = False
    publish_ms = 0
    producer = ""
    serialized = b""
    ids = EntryIds()
    cursor_exhausted = False
    id_head: bytes | None = None
    id_tail = b""
    batch_size = 0

    def more_in_entry(index: int, size: int) -> bool:
        """Whether messages of a batched entry follow the one of `index`: its id says how many the entry
        holds; where it does not, ask the broker (has_message_available, a read of the topic's last entry)."""
        return index + 1 < size if size > 0 else has_message_available(reader, part, gone)

    rows, add_msg, add_id, add_publish, add_producer = columns.appenders()
    idle_ms = 0
    deleted = False

    try:
        while True:
            try:
                msg = raw_read(poll_ms)
            except pulsar.Timeout:
                idle_ms += poll_ms
                if progress.idle(idle_ms, last_pos):
                    break
                cursor_exhausted = account is not None and account.cursor.exhausted
                continue
            idle_ms = 0
            mid = msg.message_id()
            index = mid.batch_index()
            if index < 1 or index != prev_index + 1:
                position = (mid.ledger_id(), mid.entry_id())
                first = None
                if index < 0:
                    serialized = mid.serialize()
                    # A chunked message belongs to the range of its first chunk.
                    first = first_chunk_position(serialized) if 0x3A in serialized else None
                verdict = enter(position, first)
                if verdict is None:
                    break  # the range is done: this message belongs to the next micro-batch
                skip = verdict
                window = progress.window(position, first)
                in_end_entry = position == last_entry
                last_pos = position
                publish_ms = msg.publish_timestamp()  # one per entry: a batch shares its metadata
                producer = msg.producer_name()
                ids.new_entry(mid, index)
                id_head, id_tail, batch_size = ids.head, ids.tail, ids.batch_size
                # Only an entry's first message (or an idle walk) moves the cursor: asked once here.
                cursor_exhausted = account is not None and account.cursor.exhausted
            prev_index = index
            if skip:
                continue
            # A message of a bounded first or last entry outside the range's batch indexes is not read, but
            # still ends the range below when it is the entry's last.
            if window is None or window[0] <= max(index, 0) < window[1]:
                # Columns.appenders(), inlined: per message, only appends (the fields are read at to_batch).
                add_msg(msg)
                # The id: spliced from the entry's head and tail (EntryIds), or the client's own bytes.
                add_id(serialized if index < 0 else id_head + varint(index) + id_tail if id_head is not None else mid.serialize())
                add_publish(publish_ms)
                add_producer(producer)
                if len(rows) >= limit:
                    yield columns.to_batch(part.partition, part.partition_index)
                    columns = new_columns()
                    rows, add_msg, add_id, add_publish, add_producer = columns.appenders()
            if cursor_exhausted:
                assert account is not None
                # The end entry's batch may hold more messages: has_message_available() says so
                # (its False is reliable; a stale True after dropped orphan chunks ends in a walk).
                more_of_end_batch = in_end_entry and index >= 0 and more_in_entry(index, batch_size)
                if not more_of_end_batch and progress.done(account.settled()):
                    break  # the end entry was read (or the last owed message arrived past it)
            # Last entry of the range: done unless more messages of the same batch follow.
            if account is None and in_end_entry and (index < 0 or not more_in_entry(index, batch_size)):
                break
    except EncryptedEntryError as e:
        raise encrypted_without_key(part, e) from None
    except PartitionDeleted:
        deleted = True
    if columns.rows:
        yield columns.to_batch(part.partition, part.partition_index)
    progress.report(deleted)
