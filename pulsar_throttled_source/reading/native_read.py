"""Executor side: the read loop of the native read path.

The same decisions as read._read_messages, taken once per entry instead of once per message: the
library appends an entry's messages to the batch in C and reports the entry (its position, its
first chunk for a chunked message, whether its last message was read); this loop decides whether
the range owns it, keeps or drops those rows, and when the range is done. What the Python loop
asks the client per message (has_message_available in the last entry) the library answers from
the batch size in the message id, asking the broker only when the id does not carry it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pyarrow as pa

from .decoded_rows import decode_native_batch, decoder_for
from .entry_lookup import EntryLookup
from .errors import PartitionDeleted, encrypted_without_key, gave_up_waiting, read_timeout, report_missing
from .native_library import STATUS_TIMEOUT
from .native_reader import NativeReader
from .range_entries import EncryptedEntryError, RangeAccount
from .task import IDLE_CHECK_MS, PartitionRange


def read_native_messages(reader: NativeReader, part: PartitionRange, lookups: EntryLookup,
                         gone: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
    """The messages the range owns, as read._read_messages defines them, as Arrow batches. `gone`
    says whether the range's entries were all deleted, asked when the broker keeps failing."""
    cfg = part.config
    start = (part.start.ledger_id, part.start.entry_id)
    end = (part.end.ledger_id, part.end.entry_id)
    last_entry = end
    if part.runs:
        run_ledger, run_first, run_count = part.runs[-1]
        last_entry = (run_ledger, run_first + run_count - 1)
    poll_ms = min(cfg.poll_timeout_ms, IDLE_CHECK_MS)
    limit = cfg.max_rows_per_batch
    decoder = decoder_for(part.partition, cfg) if cfg.value_schema is not None else None
    undecryptable = {"discard": "skip", "consume": "wait"}.get(cfg.crypto_failure_action, "wait" if cfg.private_key_path else "fail")
    account = RangeAccount(part.runs, lookups, undecryptable) if part.runs is not None else None
    owed_since: float | None = None
    last_pos = start
    skip = False
    in_end_entry = False
    idle_ms = 0
    deleted = False

    def done(settled: bool) -> bool:
        nonlocal owed_since
        assert account is not None
        if settled:
            return True
        if not account.cursor.exhausted:
            return False
        owed_since = owed_since if owed_since is not None else time.monotonic()
        return gave_up_waiting(part, account.owed, owed_since)

    def batch() -> pa.RecordBatch:
        exported = reader.export()
        if decoder is None:
            return exported.to_batch(part.partition, part.partition_index)
        return decode_native_batch(exported, decoder, part.partition, part.partition_index)

    def more_in_entry(complete: int) -> bool:
        """Whether messages of the entry just read may follow (-1: the id did not say; ask the broker)."""
        from .client_cache import has_message_available

        return complete == 0 or (complete < 0 and has_message_available(reader, part, gone))

    try:
        while True:
            g = reader.read_group(poll_ms, limit)
            if g.status == STATUS_TIMEOUT:
                idle_ms += poll_ms
                if account is not None and done(account.walk()):
                    break
                if idle_ms >= cfg.poll_timeout_ms and (account is None or not account.cursor.exhausted):
                    raise read_timeout(part, last_pos, account.held_back_at if account is not None else None) from None
                continue
            idle_ms = 0
            batch_index, complete = g.batch_index, g.entry_complete
            if g.new_entry:
                position = (g.ledger, g.entry)
                key = position
                first = (g.first_chunk_ledger, g.first_chunk_entry) if g.first_chunk_ledger >= 0 else None
                if first is not None:
                    key = first  # a chunked message belongs to the range of its first chunk
                if account is not None:
                    owed = first is not None and account.owes(first)
                    account.saw(position, first)
                    if owed:
                        skip = False
                    elif key > end:
                        if done(account.settled()):
                            reader.truncate(g.rows_before)
                            break
                        skip = True
                    else:
                        skip = key <= start
                elif key > end:
                    reader.truncate(g.rows_before)
                    break
                else:
                    skip = key <= start
                in_end_entry = position == last_entry
                last_pos = position
            if skip:
                reader.truncate(g.rows_before)
                continue
            if g.rows >= limit:
                yield batch()
            if account is not None and account.cursor.exhausted:
                more_of_end_batch = in_end_entry and batch_index >= 0 and more_in_entry(complete)
                if not more_of_end_batch and done(account.settled()):
                    break
            if account is None and in_end_entry and (batch_index < 0 or not more_in_entry(complete)):
                break
    except EncryptedEntryError as e:
        raise encrypted_without_key(part, e) from None
    except PartitionDeleted:
        deleted = True
    if reader.rows:
        yield batch()
    if account is not None:
        report_missing(part, sorted({*account.missing, *account.unseen()}) if deleted else account.missing,
                       PartitionDeleted.WHY if deleted else None)
