"""Executor side: the Python read path's side of the read loop (range_reader).

The hot loop of the Python path, message by message over the pulsar-client reader: each call
appends one entry's messages (or as many as fit the batch) to arrow_rows' columns (decoded_rows'
for a topic with a schema) and describes them in a range_reader.EntryGroup, as the native library
does in C. Whatever is decided about the range is range_reader's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..protobuf_wire import first_chunk_position, varint
from ..read_task import PartitionRange
from .arrow_rows import Columns, EntryIds
from .client_cache import drop_client
from .decoded_rows import DecodedColumns, decoder_for
from .native_library import STATUS_OK, STATUS_TIMEOUT
from .range_reader import DroppedRows, EntryGroup, read_entries
from .reader_calls import close_reader, open_reader
from .reader_start import reader_start
from .task_lookup import TaskLookup


def read_python_messages(reader: Any, part: PartitionRange, lookups: TaskLookup,
                         gone: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
    """The messages the range owns (range_reader.read_entries), read by a pulsar.Reader."""
    return read_entries(PythonEntrySource(reader, part), part, lookups, gone)


class PythonPath:
    """The Python read path (read_path.ReadPath): a pulsar.Reader on the worker's shared pulsar.Client."""

    def open(self, part: PartitionRange, gone: Callable[[], bool] | None) -> PythonEntrySource:
        start_id, inclusive = reader_start(part, exclusive_only=False)
        return PythonEntrySource(open_reader(part, start_id, gone, inclusive), part)

    def close(self, source: PythonEntrySource, part: PartitionRange, failed: bool) -> None:
        close_reader(source.reader, failed)
        if failed:
            drop_client(part.config)


PYTHON_PATH = PythonPath()


class PythonEntrySource:
    """A pulsar.Reader and the columns it fills, as a range_reader source."""

    def __init__(self, reader: Any, part: PartitionRange) -> None:
        import pulsar

        self.reader = self._reader = reader
        # The public Reader wraps every message in a Python object; the pybind11 reader it wraps
        # returns the native message directly, a large part of the per-message cost on this hot path
        # (bench/README.md, "Figures behind the code").
        self._read = getattr(reader, "_reader", reader).read_next
        self._timeout = pulsar.Timeout
        self._part = part
        cfg = part.config
        self._decoder = decoder_for(part.partition, cfg) if cfg.value_schema is not None else None
        self._columns = self._new_columns()
        self._appenders = self._columns.appenders()
        self._group = EntryGroup()
        self._dropped = DroppedRows()  # as the native path: sliced off at export
        self.drop = self._dropped.drop
        self.ended_exactly = False  # the Python path never parks its reader
        # The current entry, as its first message said (a batch shares its metadata), for the rest of its messages.
        self._prev_index = -2
        self._ids = EntryIds()
        self._publish_ms = 0
        self._producer = ""
        # A message read past the group's entry (the next call's first), and an error met after the group's
        # first message (raised by the next call, once the messages before it are accounted for).
        self._pending: tuple[Any, Any] | None = None
        self._error: BaseException | None = None

    def _new_columns(self) -> Columns:
        return Columns() if self._decoder is None else DecodedColumns(self._decoder, self._part.partition)

    def read_group(self, timeout_ms: int, max_rows: int) -> EntryGroup:
        g = self._group
        rows, add_msg, add_id, add_publish, add_producer = self._appenders
        g.rows_before = before = len(rows)
        read = self._read
        if self._pending is not None:
            (msg, mid), self._pending = self._pending, None
        else:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            try:
                msg = read(timeout_ms)
            except self._timeout:
                g.status = STATUS_TIMEOUT
                return g
            mid = msg.message_id()
        g.status = STATUS_OK
        index = mid.batch_index()
        g.batch_index = index
        if index < 0:
            # Not batched: one message, an entry of its own (every message of an unbatched topic: no loop).
            g.new_entry = g.entry_complete = 1
            g.ledger, g.entry = mid.ledger_id(), mid.entry_id()
            serialized = mid.serialize()
            # A chunked message belongs to the range of its first chunk.
            first = first_chunk_position(serialized) if 0x3A in serialized else None
            if first is None:
                g.first_chunk_ledger = g.first_chunk_entry = -1
            else:
                g.first_chunk_ledger, g.first_chunk_entry = first
            add_msg(msg)
            add_id(serialized)
            add_publish(msg.publish_timestamp())
            add_producer(msg.producer_name())
            self._prev_index = index
            g.rows = before + 1
            return g
        ids = self._ids
        # The next index of the same entry continues it (the last call ended before the entry's end); the ledger
        # and entry are asked only then: a message at the next index may be another entry's (its first ones skipped).
        if index == 0 or index != self._prev_index + 1 or mid.entry_id() != g.entry or mid.ledger_id() != g.ledger:
            g.new_entry = 1
            g.ledger, g.entry = mid.ledger_id(), mid.entry_id()
            g.first_chunk_ledger = g.first_chunk_entry = -1  # a batch is never chunked
            self._publish_ms = msg.publish_timestamp()  # one per entry: a batch shares its metadata
            self._producer = msg.producer_name()
            ids.new_entry(mid, index)
        else:
            g.new_entry = 0
        publish_ms, producer = self._publish_ms, self._producer
        id_head, id_tail, size = ids.head, ids.tail, ids.batch_size
        timeout = self._timeout
        while True:
            # Columns.appenders(), inlined: per message, only appends (the fields are read at to_batch).
            add_msg(msg)
            # The id: spliced from the entry's head and tail (EntryIds), or the client's own bytes.
            add_id(id_head + varint(index) + id_tail if id_head is not None else mid.serialize())
            add_publish(publish_ms)
            add_producer(producer)
            if index + 1 >= size:
                # The entry's last message, or (size 0) its id does not say how many follow: the loop asks
                # the broker where it matters (the range's last entry), as before every message.
                complete = 1 if size > 0 else -1
                break
            if len(rows) >= max_rows:
                complete = 0
                break
            # A batch's messages are queued together when its entry arrives: the rest are there.
            try:
                msg = read(timeout_ms)
            except timeout:
                complete = -1
                break
            except Exception as e:
                self._error = e
                complete = -1
                break
            mid = msg.message_id()
            next_index = mid.batch_index()
            if next_index != index + 1:
                self._pending = (msg, mid)  # another entry: the next call's
                complete = 1
                break
            index = next_index
        self._prev_index = index
        g.entry_complete = complete
        g.rows = len(rows)
        return g

    @property
    def rows(self) -> int:
        return self._columns.rows

    def truncate(self, rows: int) -> None:
        self._columns.truncate(rows)  # in place: the appenders stay bound

    def has_message_available(self) -> bool:
        return bool(self._reader.has_message_available())

    def batches(self) -> Iterator[pa.RecordBatch]:
        columns, self._columns = self._columns, self._new_columns()
        self._appenders = self._columns.appenders()
        yield from self._dropped.kept(columns.to_batch(self._part.partition, self._part.partition_index))
