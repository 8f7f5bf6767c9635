"""Executor side: the native read path's side of the read loop (range_reader).

The library appends an entry's messages to the batch in C and reports the entry in a par_group_t
(range_reader.EntryGroup's fields): its position, its first chunk for a chunked message, whether
its last message was read, from the batch size in the message id (the broker is asked only when
the id does not carry it). What the range does not own is truncated off the batch's tail in C,
or, before the tail, sliced off the Arrow batch at export.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

from ..positions import BEFORE_EARLIEST
from ..read_task import PartitionRange
from .client_cache import drop_native_client, park_native_reader
from .decoded_rows import decode_native_batch, decoder_for
from .native_library import native_library
from .native_reader import NativeReader
from .range_reader import DroppedRows, read_entries
from .reader_calls import close_reader, open_native_reader
from .reader_start import reader_start
from .task_lookup import TaskLookup


def read_native_messages(reader: NativeReader, part: PartitionRange, lookups: TaskLookup,
                         gone: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
    """The messages the range owns (range_reader.read_entries), read by the native library."""
    return read_entries(NativeEntrySource(reader, part), part, lookups, gone)


class NativePath:
    """The native read path (read_path.ReadPath): a reader of the native library on the worker's shared native
    client, or the reader the last range of this partition left parked at this range's start."""

    def open(self, part: PartitionRange, gone: Callable[[], bool] | None) -> NativeEntrySource:
        start_id, inclusive = reader_start(part, exclusive_only=not native_library().inclusive_start)
        serialized = None if part.start == BEFORE_EARLIEST else start_id.serialize()
        return NativeEntrySource(open_native_reader(part, serialized, gone, inclusive), part)

    def close(self, source: NativeEntrySource, part: PartitionRange, failed: bool) -> None:
        if not failed and source.ended_exactly:
            park_native_reader(part, source.reader)  # the next range's task in this process reads on from it
            return
        close_reader(source.reader, failed)
        if failed:
            drop_native_client(part.config)


NATIVE_PATH = NativePath()


class NativeEntrySource:
    """A NativeReader as a range_reader source: the library's own calls, plus the Arrow batches."""

    def __init__(self, reader: NativeReader, part: PartitionRange) -> None:
        self.reader = self._reader = reader
        self._part = part
        cfg = part.config
        self._decoder = decoder_for(part.partition, cfg) if cfg.value_schema is not None else None
        # The library's bound methods themselves: no Python call in between on the per-entry path.
        self.read_group = reader.read_group
        self.truncate = reader.truncate
        self.has_message_available = reader.has_message_available
        # Rows of the batch being filled that a bounded first entry does not own, dropped at export (the library
        # only truncates the batch's tail; a zero-copy slice drops rows before the tail).
        self._dropped = DroppedRows()
        self.drop = self._dropped.drop

    @property
    def ended_exactly(self) -> bool:
        return self._reader.ended_exactly

    @ended_exactly.setter
    def ended_exactly(self, value: bool) -> None:
        self._reader.ended_exactly = value  # read where the task closes or parks the reader

    @property
    def rows(self) -> int:
        return self._reader.rows

    def batches(self) -> Iterator[pa.RecordBatch]:
        part = self._part
        exported = self._reader.export()
        if self._decoder is None:
            out = exported.to_batch(part.partition, part.partition_index)
        else:
            out = decode_native_batch(exported, self._decoder, part.partition, part.partition_index)
        yield from self._dropped.kept(out)
