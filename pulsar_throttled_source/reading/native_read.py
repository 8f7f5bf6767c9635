"""Executor side: the read loop of the native read path.

The same decisions as read._read_messages, taken once per entry instead of once per message: the
library appends an entry's messages to the batch in C and reports the entry (its position, its
first chunk for a chunked message, whether its last message was read); this loop decides whether
the range owns it, keeps or drops those rows, and when the range is done. What the Python loop
asks the client per message (has_message_available in the last entry) the library answers from
the batch size in the message id, asking the broker only when the id does not carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..read_task import IDLE_CHECK_MS, PartitionRange
from .client_cache import has_message_available
from .decoded_rows import decode_native_batch, decoder_for
from .errors import PartitionDeleted, encrypted_without_key
from .native_library import STATUS_TIMEOUT
from .native_reader import NativeReader
from .range_entries import EncryptedEntryError
from .range_progress import RangeProgress
from .task_lookup import TaskLookup


def read_native_messages(reader: NativeReader, part: PartitionRange, lookups: TaskLookup,
                         gone: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
    """The messages the range owns, as read._read_messages defines them, as Arrow batches. `gone`
    says whether the range's entries were all deleted, asked when the broker keeps failing."""
    cfg = part.config
    progress = RangeProgress(part, lookups)
    account = progress.account
    poll_ms = min(cfg.poll_timeout_ms, IDLE_CHECK_MS)
    limit = cfg.max_rows_per_batch
    decoder = decoder_for(part.partition, cfg) if cfg.value_schema is not None else None
    last_pos = progress.start
    skip = False
    window: tuple[int, int] | None = None
    in_end_entry = False
    idle_ms = 0
    deleted = False

    # Rows of the batch being filled that a bounded first entry does not own: [from, to), dropped at export
    # (the library only truncates the batch's tail; a zero-copy slice drops rows before the tail).
    dropped: list[tuple[int, int]] = []

    def batches() -> Iterator[pa.RecordBatch]:
        exported = reader.export()
        if decoder is None:
            out = exported.to_batch(part.partition, part.partition_index)
        else:
            out = decode_native_batch(exported, decoder, part.partition, part.partition_index)
        kept = 0
        for lo, hi in dropped:
            if lo > kept:
                yield out.slice(kept, lo - kept)
            kept = hi
        dropped.clear()
        if kept < out.num_rows:
            yield out.slice(kept)

    def bound(g: Any, lo: int, hi: int) -> int:
        """Keep only the group's messages of batch indexes [lo, hi); the batch's rows after it."""
        first, rows = max(g.batch_index, 0), g.rows - g.rows_before  # a group's messages are consecutive indexes
        keep_from = g.rows_before + min(max(lo - first, 0), rows)
        keep_to = g.rows_before + min(max(hi - first, 0), rows)
        if keep_to <= keep_from:
            reader.truncate(g.rows_before)
            return int(g.rows_before)
        if keep_to < g.rows:
            reader.truncate(keep_to)
        if keep_from > g.rows_before:
            dropped.append((g.rows_before, keep_from))
        return keep_to

    def more_in_entry(complete: int) -> bool:
        """Whether messages of the entry just read may follow (-1: the id did not say; ask the broker)."""
        return complete == 0 or (complete < 0 and has_message_available(reader, part, gone))

    try:
        while True:
            g = reader.read_group(poll_ms, limit)
            if g.status == STATUS_TIMEOUT:
                idle_ms += poll_ms
                if progress.idle(idle_ms, last_pos):
                    break
                continue
            idle_ms = 0
            batch_index, complete = g.batch_index, g.entry_complete
            if g.new_entry:
                position = (g.ledger, g.entry)
                first = (g.first_chunk_ledger, g.first_chunk_entry) if g.first_chunk_ledger >= 0 else None
                verdict = progress.enter(position, first)
                if verdict is None:
                    reader.truncate(g.rows_before)  # the range is done: these rows are the next micro-batch's
                    break
                skip = verdict
                window = progress.window(position, first)
                in_end_entry = position == progress.last_entry
                last_pos = position
            if skip:
                reader.truncate(g.rows_before)
                continue
            rows = g.rows if window is None else bound(g, *window)
            if rows >= limit:
                yield from batches()
            if account is not None and account.cursor.exhausted:
                more_of_end_batch = in_end_entry and batch_index >= 0 and more_in_entry(complete)
                if not more_of_end_batch:
                    settled = account.settled()
                    if progress.done(settled):
                        # Stopped right after the range's last message, owing nothing: the reader can go on.
                        reader.ended_exactly = in_end_entry and settled
                        break
            if account is None and in_end_entry and (batch_index < 0 or not more_in_entry(complete)):
                reader.ended_exactly = True
                break
    except EncryptedEntryError as e:
        raise encrypted_without_key(part, e) from None
    except PartitionDeleted:
        deleted = True
    if reader.rows:
        yield from batches()
    progress.report(deleted)
