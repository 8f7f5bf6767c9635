"""Which entries of a planned range a read task has accounted for, and what the others are.

A planned range (start, end] holds an exact list of entries (from internalStats). The
reader never sees some of them as messages of their own:
- chunks of a chunked message (the client hands over one message, known by its first
  and last chunk; middle chunks and other producers' interleaved chunks stay unseen);
- tail chunks of a message whose first chunk lies before the range (the client
  discards them: that message belongs to the range that holds its first chunk);
- transaction markers and aborted entries (the broker never dispatches them);
- entries deleted between planning and reading.

The reader walks the range's positions in order as messages arrive; every position it
skips is a gap. At the end of the range, gaps are few (none on a plain topic), and only
they are looked up on the broker (entry metadata) to tell which still owe a message:
the first chunk of a chunked message that has not completed yet.

Ownership rule for chunked messages: the range that holds a message's FIRST chunk
delivers it, reading past its end if the message completes later; a range that starts
inside a message skips it. Every message so belongs to exactly one range, whatever the
quotas, splits, triggers or restart points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..metadata.entry_headers import EntryHeaders
from ..positions import EntryRuns, Position


class RangeCursor:
    """Walks a range's entry positions in dispatch order and collects the ones skipped."""

    __slots__ = ("_positions", "_next", "gaps", "seen")

    def __init__(self, runs: EntryRuns) -> None:
        self._positions: Iterator[Position] = _positions(runs)
        self._next: Position | None = next(self._positions, None)
        self.gaps: dict[Position, None] = {}  # insertion-ordered set
        self.seen = 0

    @property
    def exhausted(self) -> bool:
        """Every position of the range has been seen or recorded as a gap."""
        return self._next is None

    def saw(self, position: Position) -> None:
        """An entry at `position` was dispatched: the range's positions before it that were not
        dispatched are gaps (the broker dispatches a partition's entries in order)."""
        nxt = self._next
        while nxt is not None and nxt < position:
            self.gaps[nxt] = None
            nxt = next(self._positions, None)
        if nxt is not None and nxt == position:
            self.seen += 1
            nxt = next(self._positions, None)
        self._next = nxt

    def accounted(self, position: Position) -> None:
        """The first chunk of a delivered chunked message: not a gap after all."""
        self.gaps.pop(position, None)

    def peek(self) -> Position | None:
        """The next position not seen yet (None when the range is exhausted)."""
        return self._next

    def skip_next(self) -> None:
        """The next position will never be dispatched as a message of its own (looked up)."""
        self._next = next(self._positions, None)


def _positions(runs: EntryRuns) -> Iterator[Position]:
    for ledger, first, count in runs:
        for entry in range(first, first + count):
            yield (ledger, entry)


class EncryptedEntryError(RuntimeError):
    pass


class RangeAccount:
    """The read task's books for one planned range: what it has seen, what it skipped and why,
    and the chunked messages it still owes (first chunk -> producer uuid).

    `lookup(position) -> EntryHeaders | None` asks the broker about one entry (None: no longer
    stored); it is called only for entries the reader did not see as messages."""

    def __init__(self, runs: EntryRuns, lookup: Callable[[Position], EntryHeaders | None],
                 undecryptable: str = "wait") -> None:
        """`undecryptable`: what an encrypted entry that does not arrive means: "wait" (a key is set:
        it is decrypted and still coming), "fail" (no key: it never comes) or "skip" (discarded)."""
        self.cursor = RangeCursor(runs)
        self._undecryptable = undecryptable
        self._lookup = lookup
        self.owed: dict[Position, str] = {}
        self.missing: list[Position] = []
        self.skipped = 0
        self._gone_ledgers: set[int] = set()
        self.held_back_at: Position | None = None  # the last entry the broker reported past its max read position

    def saw(self, position: Position, first_chunk: Position | None = None) -> None:
        self.cursor.saw(position)
        if first_chunk is not None:
            self.cursor.accounted(first_chunk)
            self.owed.pop(first_chunk, None)

    def unseen(self) -> list[Position]:
        """The positions not seen yet, taken off the books (the range ends without them)."""
        out = []
        while (position := self.cursor.peek()) is not None:
            out.append(position)
            self.cursor.skip_next()
        return out

    def owes(self, first_chunk: Position) -> bool:
        return first_chunk in self.owed

    def settled(self) -> bool:
        """Once every position was seen or passed: True when the range owes nothing more."""
        self._classify_gaps()
        return self.cursor.exhausted and not self.owed

    def walk(self) -> bool:
        """The reader is idle: look at the next unseen positions in order. Entries the broker never
        dispatches as messages of their own are skipped; stop at one that must still arrive (a
        plain entry, or the last chunk of a message the range owes). True when nothing is left."""
        self.held_back_at = None
        self._classify_gaps()  # first: the chunked messages owed so far are all known
        while (position := self.cursor.peek()) is not None:
            meta = self._meta(position)
            if meta is not None and not self._never_dispatched(position, meta):
                return False
            self.cursor.skip_next()
        return not self.owed

    def _classify_gaps(self) -> None:
        for position in list(self.cursor.gaps):
            meta = self._meta(position)
            if meta is not None:
                self._never_dispatched(position, meta)
        self.cursor.gaps.clear()

    def _never_dispatched(self, position: Position, meta: EntryHeaders) -> bool:
        """Record what `position` means; False when it must still arrive as a message."""
        if meta.uncommitted:
            # Past the broker's max read position: an open transaction, or a transaction buffer that
            # has not caught up with plain entries yet (seen on a topic that never had a transaction).
            # Either way the broker dispatches it once that position passes it (or it turns out aborted,
            # which a later look sees), so it is waited for like any entry still coming.
            self.held_back_at = position
            return False
        if meta.starts_chunked_message:
            self.owed[position] = meta.uuid  # delivered once its last chunk arrives
            return True
        if meta.chunk_id > 0 and meta.chunk_id == meta.num_chunks - 1 and meta.uuid in self.owed.values():
            return False  # completes a message this range owes: it arrives as that message
        if meta.encrypted and self._undecryptable != "wait":
            if self._undecryptable == "fail":
                raise EncryptedEntryError(f"entry {position[0]}:{position[1]} is encrypted")
            self.skipped += 1  # discarded by the client (cryptoFailureAction=discard)
            return True
        if meta.chunk_id < 0 and not (meta.marker or meta.aborted):
            return False  # a plain entry: the broker dispatches it in order, it is still coming
        self.skipped += 1  # markers, aborted entries, middle chunks, tails of earlier ranges' messages
        return True

    def _meta(self, position: Position) -> EntryHeaders | None:
        """Entry metadata; None when not stored (recorded as missing). Ledgers are deleted whole, so
        one "not stored" answer covers the ledger's other positions without asking again."""
        meta = None if position[0] in self._gone_ledgers else self._lookup(position)
        if meta is None:
            self._gone_ledgers.add(position[0])
            self.missing.append(position)
        return meta
