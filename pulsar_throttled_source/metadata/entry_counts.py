"""Driver side: how many messages the entries at the head of each partition's backlog hold, from
each entry's own metadata (admin API HEAD .../ledger/L/entry/E: X-Pulsar-num-batch-message).

Precise mode prices the entries it is about to admit by what they hold, not by a topic-wide
average: a topic whose history is unbatched and whose recent part is batched 10 per entry must not
be admitted 10x its quota (nor the reverse a tenth of it). Only the entries one window's tightest
message quota could admit are looked up (the first EXACT_AHEAD of them, and SAMPLES spread over
the rest), each once (answers are kept until the query moves past them), so idle polls and
held-back partitions ask nothing, and a planning call asks at most LOOKUPS_PER_PLAN questions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..positions import BEFORE_EARLIEST
from ..throttling.model import EntryMessages, LearnEntryMessages
from ..topics import TopicName
from .layout import Backlog

if TYPE_CHECKING:
    from .admin import PulsarAdmin

Position = tuple[int, int]

LOOKUPS_PER_PLAN = 256  # per planning call, over all partitions
EXACT_AHEAD = 16  # entries counted exactly ahead of a partition's start
SAMPLES = 8  # entries sampled across the rest of what one window could admit
CONCURRENT_LOOKUPS = 8


def messages_in_entry(headers: Mapping[str, str]) -> int:
    """What a reader is handed for one entry: a batch's messages; a chunked message once (its first
    chunk owns it); nothing for a transaction marker or an aborted entry."""
    h = {k.lower(): v for k, v in headers.items()}
    if "x-pulsar-marker-type" in h or h.get("x-pulsar-txn-aborted", "").strip().lower() == "true":
        return 0
    chunk_id = int(h.get("x-pulsar-chunk-id", -1))
    if chunk_id >= 0 and int(h.get("x-pulsar-num-chunks-from-msg", 0)) > 1:
        return 1 if chunk_id == 0 else 0
    return max(1, int(h.get("x-pulsar-num-batch-message", 1)))


class EntryMessageCounts:
    """Message counts of backlog entries, per partition, learned on demand within a per-call budget:
    the first EXACT_AHEAD entries exactly, and SAMPLES entries spread over the rest of what the
    quota could admit (their average prices the entries in between). Once a batch is planned,
    the next window's entries are looked up in the background, so planning rarely waits."""

    def __init__(self, admin: PulsarAdmin) -> None:
        self._admin = admin
        self._known: dict[str, dict[Position, int]] = {}
        self._pending: dict[str, dict[Position, Future[Mapping[str, str] | None]]] = {}
        self._asked: dict[str, float] = {}  # the messages each partition's quota asked for last
        self._budget = LOOKUPS_PER_PLAN
        self._pool: ThreadPoolExecutor | None = None

    def new_plan(self) -> None:
        self._budget = LOOKUPS_PER_PLAN

    def learner(self, partition: str, backlog: Backlog) -> LearnEntryMessages:
        """For the engine: the entries holding `msgs` messages from the backlog's start, and one more."""
        known = self._known.setdefault(partition, {})
        pending = self._pending.setdefault(partition, {})
        if backlog.runs:  # forget what the query has moved past
            ledger, first, _, _ = backlog.runs[0]
            for table in (known, pending):
                for position in [p for p in table if p < (ledger, first)]:
                    del table[position]

        def learn(msgs: float) -> EntryMessages:
            self._asked[partition] = msgs
            head = self._head(backlog, 0)
            self._look_up(partition, head, wait=True)
            counts: list[int] = []
            total = 0
            for position in head:
                count = known.get(position)
                if count is None:
                    return EntryMessages(tuple(counts))  # not stored any more, or out of budget
                counts.append(count)
                if total >= msgs:
                    return EntryMessages(tuple(counts))
                total += count
            # The quota reaches past the exact part: sample the entries it could still reach (those
            # already looked up or under way there, when there are enough of them).
            samples = self._samples(backlog, len(counts), msgs - total, max(1.0, total / len(counts)) if counts else 1.0)
            if samples:
                reached = [p for p in (*known, *pending) if head[-1] < p <= samples[-1]]
                samples = sorted(reached) if len(reached) >= SAMPLES // 2 else samples
            self._look_up(partition, samples, wait=True)
            sampled = [known[p] for p in samples if p in known]
            return EntryMessages(tuple(counts), max(1.0, sum(sampled) / len(sampled)) if sampled else None)

        return learn

    def prefetch(self, partition: str, backlog: Backlog, admitted: int) -> None:
        """The batch just planned ends `admitted` entries into `backlog`: start looking up what the
        next window will ask about (the same quota from there), without waiting."""
        msgs = self._asked.get(partition)
        if msgs is None or admitted >= backlog.entries:
            return
        known = self._known.get(partition, {})
        head = self._head(backlog, admitted)
        head_known = [known[p] for p in head if p in known]
        per_entry = max(1.0, sum(head_known) / len(head_known)) if head_known else max(1.0, msgs / max(1, admitted))
        exact = sum(head_known) + (len(head) - len(head_known)) * per_entry
        self._look_up(partition, head + self._samples(backlog, admitted + len(head), msgs - exact, per_entry), wait=False)

    def _head(self, backlog: Backlog, start: int) -> list[Position]:
        return [_position(backlog, i) for i in range(start, min(start + EXACT_AHEAD, backlog.entries))]

    def _samples(self, backlog: Backlog, start: int, msgs: float, per_entry: float) -> list[Position]:
        """SAMPLES positions spread over the entries after `start` that could hold `msgs` messages."""
        reach = min(backlog.entries, start + math.ceil(msgs / per_entry) + 1)
        if msgs <= 0 or reach <= start:
            return []
        step = (reach - start) / SAMPLES
        return sorted({_position(backlog, start + int(step * (i + 0.5))) for i in range(SAMPLES)})

    def _look_up(self, partition: str, positions: list[Position], wait: bool) -> None:
        """Start lookups of the positions neither known nor under way (within the call's budget);
        with `wait`, record the answers for all of them."""
        known, pending = self._known[partition], self._pending[partition]
        topic = TopicName.parse(partition)
        for position in positions:
            if position not in known and position not in pending and self._budget > 0:
                self._budget -= 1
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(CONCURRENT_LOOKUPS, thread_name_prefix="pulsar-entry-lookups")
                pending[position] = self._pool.submit(self._admin.entry_headers, topic, *position)
        for position in positions if wait else [p for p, f in pending.items() if f.done()]:
            future = pending.pop(position, None)
            if future is not None:
                try:
                    headers = future.result()
                except Exception:  # an earlier outage (a background lookup): ask again, now
                    headers = self._admin.entry_headers(topic, *position)
                if headers is not None:  # None: no longer stored; data loss is for the planner to report
                    known[position] = messages_in_entry(headers)


def _position(backlog: Backlog, index: int) -> Position:
    """The backlog's entry at `index` (0: its first)."""
    position = backlog.position_after(BEFORE_EARLIEST, index + 1)
    return (position.ledger_id, position.entry_id)
