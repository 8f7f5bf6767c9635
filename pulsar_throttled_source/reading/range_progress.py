"""Executor side: the decisions the read loop (range_reader, entry by entry, on both read paths) takes
about its range: whether an entry belongs to the range, when the range
is done, what an idle reader means, and what is reported at the end."""

from __future__ import annotations

import time

from ..positions import Position
from ..read_task import PartitionRange
from .range_entries import RangeAccount
from .read_errors import PartitionDeleted, gave_up_waiting, read_timeout, report_missing
from .task_lookup import TaskLookup


class RangeProgress:
    """The range's bounds and books: what was seen (`account`, None when planning could not see the
    entries), and since when the range waits for chunked messages it owes past its end."""

    def __init__(self, part: PartitionRange, lookups: TaskLookup) -> None:
        cfg = part.config
        self._part = part
        self.start: Position = (part.start.ledger_id, part.start.entry_id)
        self.end: Position = (part.end.ledger_id, part.end.entry_id)
        # The range's last entry: its batch is read to the end. An end "before ledger L" (L, -1) names
        # no entry; the planned runs say which entry is the last one.
        self.last_entry = self.end
        if part.runs:
            run_ledger, run_first, run_count = part.runs[-1]
            self.last_entry = (run_ledger, run_first + run_count - 1)
        # What an encrypted entry that has not arrived means: discarded by the client, an error (no
        # key), or still coming (a key is set, or consume delivers it encrypted).
        undecryptable = {"discard": "skip", "consume": "wait"}.get(cfg.crypto_failure_action,
                                                                    "wait" if cfg.private_key_path else "fail")
        self.account = RangeAccount(part.runs, lookups, undecryptable) if part.runs is not None else None
        self._owed_since: float | None = None  # when the range's end was reached with chunked messages still owed
        # A batch query's bounds inside an entry (read_task.PartitionRange): entry -> the batch indexes [lo, hi) read.
        self.windows: dict[Position, tuple[int, int]] = {}
        if part.first_message is not None:
            ledger, entry, index = part.first_message
            self.windows[(ledger, entry)] = (index, 1 << 31)
        if part.end_message is not None:
            ledger, entry, index = part.end_message
            lo, _ = self.windows.get((ledger, entry), (0, 0))
            self.windows[(ledger, entry)] = (lo, index)

    def done(self, settled: bool) -> bool:
        """Whether to stop: the range owes nothing more, or its owed chunked messages timed out."""
        account = self.account
        assert account is not None
        if settled:
            return True
        if not account.cursor.exhausted:
            return False
        self._owed_since = self._owed_since if self._owed_since is not None else time.monotonic()
        return gave_up_waiting(self._part, account.owed, self._owed_since)

    def enter(self, position: Position, first_chunk: Position | None) -> bool | None:
        """An entry's first message arrived (`first_chunk`: where a chunked message began, which decides
        its range). None: the range is done, stop reading; else whether to skip the entry's messages."""
        key = first_chunk if first_chunk is not None else position
        account = self.account
        if account is None:
            # Past the end: the next micro-batch's. At or before the exclusive start: delivered by the broker.
            return None if key > self.end else key <= self.start
        owed = first_chunk is not None and account.owes(first_chunk)
        account.saw(position, first_chunk)
        if owed:
            return False  # a message the range waited for, completed past its end
        if key > self.end:
            # The next range's message, read while waiting for owed ones (or the range is done).
            return None if self.done(account.settled()) else True
        return key <= self.start

    def window(self, position: Position, first_chunk: Position | None) -> tuple[int, int] | None:
        """The batch indexes [lo, hi) the range reads of this entry (a message that is not batched is index 0);
        None: all of them. Entries are whole in a range but its first and last may be bounded (batch queries)."""
        return self.windows.get(first_chunk if first_chunk is not None else position) if self.windows else None

    def idle(self, idle_ms: int, last_pos: Position) -> bool:
        """Nothing arrived for `idle_ms`: True when the range is done (what is left never comes as
        messages); raises once pollTimeoutMs passed with entries still to come."""
        account = self.account
        if account is not None and self.done(account.walk()):
            return True
        if idle_ms >= self._part.config.poll_timeout_ms and (account is None or not account.cursor.exhausted):
            raise read_timeout(self._part, last_pos, account.held_back_at if account is not None else None) from None
        return False

    def report(self, deleted: bool) -> None:
        """Planned entries that never arrived: no longer stored, or (`deleted`) gone with the topic."""
        account = self.account
        if account is None:
            return
        if deleted:
            report_missing(self._part, sorted({*account.missing, *account.unseen()}), PartitionDeleted.WHY)
        else:
            report_missing(self._part, account.missing)
