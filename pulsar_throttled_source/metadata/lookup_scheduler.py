"""The planner's entry lookups (precise mode, byte quotas; a read task's own are reading.task_lookup):
asks the broker for single entries' headers (admin API HEAD .../ledger/L/entry/E) on a thread pool,
within a per-call budget and deadline, and keeps the answers (each entry's messages and stored bytes)
until the query moves past them.

It decides nothing about which entries to ask for (window_pricing, backlog_estimates and backlog_sizes
do): it makes sure each entry is asked once, that a planning call starts at most LOOKUPS_PER_PLAN
lookups, and that it waits for them no longer than its deadline.

A planning call over more than WAIT_ALL_UP_TO partitions with backlog waits for lookups at most
LOOKUP_WAIT_S in all: at 1,000 partitions the entries new since the last trigger are hundreds of
lookups, more than a busy broker answers in a trigger; what is still unanswered then is left to a
later call (the pricer admits no further than the entries known before it). A call over fewer
partitions waits for all its lookups, so such queries are priced exactly at once (the cost of both
choices: bench/README.md, planning.py).

The pool, the clock and the way of waiting for an answer are injectable, so tests can play a busy
broker without real waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout  # not the builtin before Python 3.11
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..positions import BEFORE_EARLIEST, Position
from ..topics import TopicName
from .entry_headers import EntryHeaders
from .layout import Backlog
from .stress_readings import LatencySamples

if TYPE_CHECKING:
    from .admin import PulsarAdmin

Headers = Mapping[str, str] | None  # what a lookup answers; None: the entry is not stored any more

LOOKUPS_PER_PLAN = 256  # per planning call, over all partitions
CONCURRENT_LOOKUPS = 8
LOOKUP_WAIT_S = 0.05  # per planning call, over all partitions (see the module doc)
WAIT_ALL_UP_TO = 64  # partitions with backlog in a planning call that waits for all its lookups

# Waits for a lookup's answer at most the given seconds (None: until it comes); whether it came.
Waiter = Callable[["Future[Any]", "float | None"], bool]


def wait_for_answer(future: Future[Any], timeout: float | None) -> bool:
    """The real waiter: blocks on the future. A lookup cancelled by close() counts as answered: its
    result raises, and the scheduler asks the broker again itself."""
    try:
        future.exception(timeout=timeout)
    except FutureTimeout:
        return False
    except CancelledError:
        pass
    return True


def lookup_pool() -> Executor:
    return ThreadPoolExecutor(CONCURRENT_LOOKUPS, thread_name_prefix="pulsar-entry-lookups")


@dataclass(frozen=True)
class LookedUpEntry:
    """One backlog entry's size as its lookup answered it (the entry's headers)."""

    msgs: int  # what a reader is handed
    bytes: float | None  # stored bytes; None when the headers cannot tell (priced at its ledger's average)

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> LookedUpEntry:
        parsed = EntryHeaders.parse(headers)  # once: messages and stored bytes read the same fields
        return cls(parsed.messages, parsed.stored_bytes)


class LookupScheduler:
    """Per partition, the entries known (answered) and pending (asked, not yet answered)."""

    def __init__(self, admin: PulsarAdmin, wait_s: float = LOOKUP_WAIT_S, clock: Callable[[], float] = time.monotonic,
                 waiter: Waiter = wait_for_answer, pool: Callable[[], Executor] = lookup_pool,
                 latency: LatencySamples | None = None) -> None:
        self._admin = admin
        self._latency = latency  # adaptiveThrottling: each lookup's duration, a sign of the bookies' load
        self._wait_s = wait_s
        self._clock = clock
        self._waiter = waiter
        self._new_pool = pool
        self._pool: Executor | None = None  # made at the first lookup, again after close()
        self._deadline = 0.0  # this planning call waits for lookups until then
        self._budget = LOOKUPS_PER_PLAN  # lookups this planning call may still start
        self._known: dict[str, dict[Position, LookedUpEntry]] = {}
        self._pending: dict[str, dict[Position, Future[Headers]]] = {}
        self._unanswered: set[Future[Headers]] = set()  # every lookup started, samples included, until answered

    @property
    def budget(self) -> int:
        return self._budget

    @property
    def unanswered(self) -> int:
        """Lookups started (kept or samples) whose answer has not come yet: 0 once the broker has
        answered every lookup started in the background."""
        return len(self._unanswered)

    def new_plan(self, partitions: int = 0) -> None:
        """A planning call starts, over `partitions` partitions with backlog."""
        self._budget = LOOKUPS_PER_PLAN
        self._deadline = math.inf if partitions <= WAIT_ALL_UP_TO else self._clock() + self._wait_s

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)  # lookups under way are not waited for
            self._pool = None

    def follow(self, partition: str, backlog: Backlog) -> None:
        """The partition's backlog now starts where `backlog` does: forget the entries before it."""
        known = self._known.setdefault(partition, {})
        pending = self._pending.setdefault(partition, {})
        if backlog.runs:
            ledger, first, _, _ = backlog.runs[0]
            for table in (known, pending):
                for position in [p for p in table if p < (ledger, first)]:
                    del table[position]

    def known(self, partition: str) -> Mapping[Position, LookedUpEntry]:
        return self._known.get(partition, {})

    def is_pending(self, partition: str, position: Position) -> bool:
        return position in self._pending.get(partition, {})

    def asked(self, partition: str) -> Iterator[Position]:
        """The entries known or under way."""
        yield from self._known.get(partition, {})
        yield from self._pending.get(partition, {})

    def progress(self, partition: str) -> tuple[int, int]:
        """(entries known, entries under way): changes whenever something was asked or answered."""
        return len(self._known.get(partition, {})), len(self._pending.get(partition, {}))

    def start_one(self, partition: str, position: Position) -> Future[Headers] | None:
        """A lookup of one entry that is not kept with the others (a sample for an estimate), within
        the call's budget; None when the budget is spent."""
        if self._budget <= 0:
            return None
        self._budget -= 1
        return self._submit(TopicName.parse(partition), position)

    def look_up(self, partition: str, positions: list[Position], wait: bool) -> None:
        """Start lookups of the positions neither known nor under way (within the call's budget);
        with `wait`, take in the answers of all of them (waiting no longer than the call's deadline),
        else only those already answered."""
        known, pending = self._known[partition], self._pending[partition]
        topic = TopicName.parse(partition)
        for position in positions:
            if position not in known and position not in pending and self._budget > 0:
                self._budget -= 1
                pending[position] = self._submit(topic, position)
        for position in positions if wait else [p for p, f in pending.items() if f.done()]:
            future = pending.get(position)
            if future is not None and not future.done():
                left = self._deadline - self._clock()
                if not self._waiter(future, None if left == math.inf else max(0.0, left)):
                    continue  # not answered by the call's deadline: a later call takes it in
            future = pending.pop(position, None)
            if future is not None:
                try:
                    headers = future.result()
                except Exception:  # an earlier outage (a background lookup), or cancelled: ask again, now
                    headers = self._admin.entry_headers(topic, *position)
                if headers is not None:  # None: no longer stored; data loss is for the planner to report
                    known[position] = LookedUpEntry.of(headers)

    def _submit(self, topic: TopicName, position: Position) -> Future[Headers]:
        if self._pool is None:
            self._pool = self._new_pool()
        future: Future[Headers]
        if self._latency is None:
            future = self._pool.submit(self._admin.entry_headers, topic, *position)
        else:
            future = self._pool.submit(self._timed_lookup, topic, position)
        self._unanswered.add(future)
        future.add_done_callback(self._unanswered.discard)  # on the pool's thread; set ops hold the GIL
        return future

    def _timed_lookup(self, topic: TopicName, position: Position) -> Headers:
        assert self._latency is not None
        began = time.monotonic()  # the real clock: the broker's latency, whatever clock plans run on
        try:
            headers = self._admin.entry_headers(topic, *position)
        except Exception:
            self._latency.failed()
            raise
        self._latency.record(time.monotonic() - began)
        return headers


def position_at(backlog: Backlog, index: int) -> Position:
    """The backlog's entry at `index` (0: its first)."""
    position = backlog.position_after(BEFORE_EARLIEST, index + 1)
    return (position.ledger_id, position.entry_id)
