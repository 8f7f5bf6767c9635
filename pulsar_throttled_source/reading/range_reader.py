"""Executor side: the one read loop of both read paths, entry by entry.

A source appends the messages of one entry (or as many as fit the batch) to the batch it builds and
describes them in a group (`EntryGroup`'s fields: the native library's par_group_t has the same):
python_read.PythonEntrySource with the pulsar-client reader, message by message in Python;
native_read.NativeEntrySource with one call into the native library. This loop takes every decision
about the range once per group, with range_progress: whether the range owns the entry (its
exclusive start, the entry a chunked message began in, entries past its end), the batch indexes
it reads of a bounded first or last entry, when it is done (its end entry read to the end, the
entries it never sees as messages, an idle reader), and what a deleted partition means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pyarrow as pa

from ..read_task import IDLE_CHECK_MS, PartitionRange
from .native_library import GROUP_FIELDS, STATUS_TIMEOUT
from .range_entries import EncryptedEntryError
from .range_progress import RangeProgress
from .read_errors import PartitionDeleted, encrypted_without_key
from .reader_calls import has_message_available
from .task_lookup import TaskLookup


class EntryGroup:
    """What one `read_group` appended (par_group_t's fields): `status` 0, STATUS_TIMEOUT when nothing
    arrived, or STATUS_FULL when nothing was appended because the batch cannot take the next message (the
    loop exports it and calls again); the batch's rows before and after; the entry, the batch index of the
    first appended message (-1: not batched), whether it starts the entry, whether the entry's last message
    was appended (1), more follow (0) or the id does not say (-1), and a chunked message's first chunk (-1: none).

    The grouping rules both read paths follow (tests/unit/test_read_path_conformance.py runs the same scripted
    deliveries through both): a group is one entry's messages, or as many as fit the batch; a message continues
    the last group's entry when it is of the same ledger and entry at the next batch index (a reader started
    inside a batch begins it at a later index: a new entry all the same); a batched message whose id does not
    give its batch size ends its group, `entry_complete` -1 (the loop asks the broker where that matters: the
    range's end entry); an unbatched message is a group of its own, complete."""

    __slots__ = tuple(name for name, _ in GROUP_FIELDS if name not in ("result", "padding"))  # par_group_t's

    def __init__(self) -> None:
        self.status = self.rows_before = self.rows = self.ledger = self.entry = 0
        self.batch_index = self.new_entry = self.entry_complete = 0
        self.first_chunk_ledger = self.first_chunk_entry = -1


class DroppedRows:
    """The rows of the batch being filled that a bounded first entry does not own, [lo, hi): kept in the batch
    until it is exported, then sliced off the Arrow batch without a copy (both paths count them in the batch's
    rows until then, as its buffers hold them)."""

    __slots__ = ("_dropped",)

    def __init__(self) -> None:
        self._dropped: list[tuple[int, int]] = []

    def drop(self, lo: int, hi: int, rows: int) -> int:
        self._dropped.append((lo, hi))
        return rows

    def kept(self, batch: pa.RecordBatch | pa.Table) -> Iterator[pa.RecordBatch]:
        """The exported batch less its dropped rows (in slices), and none dropped from now on. A table (a batch
        whose payloads pyarrow had to chunk) yields a record batch per chunk."""
        kept = 0
        pieces = []
        for lo, hi in self._dropped:
            if lo > kept:
                pieces.append(batch.slice(kept, lo - kept))
            kept = hi
        self._dropped.clear()
        if kept < batch.num_rows:
            pieces.append(batch.slice(kept) if kept else batch)
        for piece in pieces:
            if isinstance(piece, pa.Table):
                yield from piece.to_batches()
            else:
                yield piece


class EntrySource(Protocol):
    """A read path's side of the loop: the reader and the batch it fills."""

    ended_exactly: bool  # set when the loop stopped right after the range's last message

    def read_group(self, timeout_ms: int, max_rows: int) -> Any:
        """Append the next entry's messages, up to `max_rows` rows in the batch; an EntryGroup (or par_group_t)."""

    @property
    def rows(self) -> int:
        """The rows in the batch being built."""

    def truncate(self, rows: int) -> None:
        """Drop the batch's rows from `rows` on."""

    def drop(self, lo: int, hi: int, rows: int) -> int:
        """Drop the batch's rows [lo, hi) of `rows`; how many rows the batch now counts."""

    def has_message_available(self) -> bool:
        """Whether the broker holds messages after the last one read."""

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The batch built so far, as Arrow batches; the next rows go to a new one."""


def read_entries(source: EntrySource, part: PartitionRange, lookups: TaskLookup,
                 gone: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
    """The messages the range owns: those whose entry (for a chunked message, whose FIRST chunk)
    lies in (start, end]. A chunked message that starts in the range and ends after it is read to
    its end; one that started before the range belongs to the previous range (the client drops
    its orphan chunks). Entries never dispatched as messages of their own (markers, aborted,
    chunks) are looked up when the reader passes or waits on them, so no read waits for them.
    `gone` says whether the range's entries were all deleted, asked when the broker keeps failing."""
    cfg = part.config
    progress = RangeProgress(part, lookups)
    account, last_entry, enter, windows = progress.account, progress.last_entry, progress.enter, progress.windows
    poll_ms = min(cfg.poll_timeout_ms, IDLE_CHECK_MS)
    limit = cfg.max_rows_per_batch
    read_group, truncate = source.read_group, source.truncate
    # Where the current entry stands: decided at its first group, kept for the groups of the rest of it.
    last_pos = progress.start
    skip = False
    window: tuple[int, int] | None = None
    in_end_entry = False
    idle_ms = 0
    deleted = False
    # How far the reader got: (ledger, entry, batch index; -1 not batched) of the last message it gave. A reader
    # only moves forward, except that after a reconnect (its topic moved to another broker) the client may give
    # again messages it gave before (seen on a cluster whose bundles moved: one message of a batch twice).
    reached = (-1, -1, -1)

    def bound(g: Any, lo: int, hi: int) -> int:
        """Keep only the group's messages of batch indexes [lo, hi); the batch's rows after it."""
        first, rows = max(g.batch_index, 0), g.rows - g.rows_before  # a group's messages are consecutive indexes
        keep_from = g.rows_before + min(max(lo - first, 0), rows)
        keep_to = g.rows_before + min(max(hi - first, 0), rows)
        if keep_to <= keep_from:
            truncate(g.rows_before)
            return int(g.rows_before)
        if keep_to < g.rows:
            truncate(keep_to)
        if keep_from > g.rows_before:
            return source.drop(g.rows_before, keep_from, keep_to)
        return keep_to

    def more_in_entry(complete: int) -> bool:
        """Whether messages of the entry just read may follow (-1: the id did not say; ask the broker,
        a read of the topic's last entry: its False is reliable; a stale True after dropped orphan
        chunks ends in a walk)."""
        return complete == 0 or (complete < 0 and has_message_available(source, part, gone))

    timed_out = STATUS_TIMEOUT
    try:
        while True:
            g = read_group(poll_ms, limit)
            if g.status:
                if g.status != timed_out:  # STATUS_FULL: the next message goes to a new batch
                    yield from source.batches()
                    continue
                idle_ms += poll_ms
                if progress.idle(idle_ms, last_pos):
                    break
                continue
            idle_ms = 0
            first_index = g.batch_index
            got = g.rows - g.rows_before
            last = (g.ledger, g.entry, first_index + got - 1 if first_index >= 0 else -1)
            if (g.ledger, g.entry, first_index) <= reached:
                if last <= reached:
                    truncate(g.rows_before)  # all given before: dropped
                    continue
                # Part of it given before (the same entry, from an earlier index): keep what follows.
                again = reached[2] - first_index + 1
                g.rows = source.drop(g.rows_before, g.rows_before + again, g.rows)
                g.batch_index = reached[2] + 1
                g.new_entry = 0  # the entry was entered when its first messages came
            reached = max(reached, last)
            if g.new_entry:
                position = (g.ledger, g.entry)
                # A chunked message belongs to the range of its first chunk.
                first = (g.first_chunk_ledger, g.first_chunk_entry) if g.first_chunk_ledger >= 0 else None
                verdict = enter(position, first)
                if verdict is None:
                    truncate(g.rows_before)  # the range is done: these rows are the next micro-batch's
                    break
                skip = verdict
                window = progress.window(position, first) if windows else None
                in_end_entry = position == last_entry
                last_pos = position
            if skip:
                truncate(g.rows_before)
                continue
            # A bounded first or last entry keeps only its batch indexes in the range; the group still ends
            # the range below when it holds the entry's last message.
            rows = g.rows if window is None else bound(g, *window)
            if rows >= limit:
                yield from source.batches()
            if account is not None:
                if account.cursor.exhausted:
                    more_of_end_batch = in_end_entry and g.batch_index >= 0 and more_in_entry(g.entry_complete)
                    if not more_of_end_batch:
                        settled = account.settled()
                        if progress.done(settled):
                            # Stopped right after the range's last message, owing nothing: the reader can go on.
                            source.ended_exactly = in_end_entry and settled
                            break
            # Last entry of the range: done unless more messages of the same batch follow.
            elif in_end_entry and (g.batch_index < 0 or not more_in_entry(g.entry_complete)):
                source.ended_exactly = True
                break
    except EncryptedEntryError as e:
        raise encrypted_without_key(part, e) from None
    except PartitionDeleted:
        deleted = True
    if source.rows:
        yield from source.batches()
    progress.report(deleted)
