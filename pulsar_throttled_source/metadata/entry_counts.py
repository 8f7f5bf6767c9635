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
from .entry_headers import messages_in_entry
from .layout import Backlog

if TYPE_CHECKING:
    from .admin import PulsarAdmin

Position = tuple[int, int]

LOOKUPS_PER_PLAN = 256  # per planning call, over all partitions
EXACT_AHEAD = 64  # entries counted exactly ahead of a partition's start (a window of ~10-message entries)
HEAD_CHUNK = 16  # looked up together, as many chunks as the quota reaches
SAMPLES = 8  # entries sampled across each further stretch of what one window could admit
EXTENSIONS = 4  # times the sampled reach is pushed further when it holds fewer messages than thought
CHANGE = 1.5  # neighbouring entries further apart than this ratio: the batching changed between them
REFINE_LOOKUPS = 32  # bisection lookups per partition and call, to find where the batching changed
CONCURRENT_LOOKUPS = 8


class EntryMessageCounts:
    """Message counts of backlog entries, per partition, learned on demand within a per-call budget:
    the first EXACT_AHEAD entries exactly, then SAMPLES entries spread over the rest of what the
    quota could reach (extended while they say it holds fewer messages than thought), then
    bisection wherever two neighbouring samples disagree by more than CHANGE (a producer changed
    its batching there), so a window that crosses such a change is priced on both sides of it.
    Once a batch is planned, the next window's entries are looked up in the background."""

    def __init__(self, admin: PulsarAdmin) -> None:
        self._admin = admin
        self._known: dict[str, dict[Position, int]] = {}
        self._pending: dict[str, dict[Position, Future[Mapping[str, str] | None]]] = {}
        self._asked: dict[str, float] = {}  # the messages each partition's quota asked for last
        self._per_entry: dict[str, float] = {}  # each partition's average when it was last learned
        self._budget = LOOKUPS_PER_PLAN
        self._pool: ThreadPoolExecutor | None = None

    def new_plan(self) -> None:
        self._budget = LOOKUPS_PER_PLAN

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

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
            counts: list[int] = []
            total = 0
            head = self._head(backlog, 0)
            for chunk in range(0, len(head), HEAD_CHUNK):  # only as far as the quota reaches
                self._look_up(partition, head[chunk:chunk + HEAD_CHUNK], wait=True)
                for position in head[chunk:chunk + HEAD_CHUNK]:
                    count = known.get(position)
                    if count is None:  # not stored any more, or out of budget
                        return self._remembered(partition, counts)
                    counts.append(count)
                    if total >= msgs:
                        return self._remembered(partition, counts)
                    total += count
            return self._remembered(partition, counts, self._beyond(partition, backlog, tuple(counts), msgs))

        return learn

    def _remembered(self, partition: str, counts: list[int], learned: EntryMessages | None = None) -> EntryMessages:
        """What was learned, remembering its per-entry average; when nothing could be looked up (the
        call's budget is spent on other partitions), the average this partition had last time."""
        learned = learned or EntryMessages(tuple(counts))
        if learned.per_entry is not None:
            self._per_entry[partition] = learned.per_entry
        elif partition in self._per_entry:
            learned = EntryMessages((), ((0, self._per_entry[partition]),))
        return learned

    def _beyond(self, partition: str, backlog: Backlog, counts: tuple[int, ...], msgs: float) -> EntryMessages:
        """Past the exact counts: sample the entries the quota could still reach, reaching further
        while the samples say they hold fewer messages, then narrow down changes of batching."""
        knots: dict[int, int] = {}
        reach = len(counts)
        for _ in range(EXTENSIONS):
            estimate = EntryMessages(counts, tuple(sorted(knots.items())))
            short = msgs - estimate.msgs(reach)
            if short <= 0 or reach >= backlog.entries or self._budget <= 0:
                break
            further = min(backlog.entries, reach + math.ceil(short / estimate.tail) + 1)
            indexes = self._already_asked(partition, backlog, reach, further)
            if len(indexes) < SAMPLES:  # too few prefetched there: sample the stretch
                indexes = sorted(set(indexes) | set(_spread(reach, further)))
            self._learn_knots(partition, backlog, indexes, knots)
            reach = further
        self._narrow_changes(partition, backlog, counts, knots)
        return EntryMessages(counts, tuple(sorted(knots.items())))

    def _narrow_changes(self, partition: str, backlog: Backlog, counts: tuple[int, ...], knots: dict[int, int]) -> None:
        """Bisect between neighbouring known entries that disagree by more than CHANGE, widest and
        most different first, until each change of batching is found or REFINE_LOOKUPS are spent."""
        spent = 0
        while spent < REFINE_LOOKUPS and self._budget > 0:
            points = ([(len(counts) - 1, counts[-1])] if counts else []) + sorted(knots.items())
            gaps = sorted(((b - a) * abs(cb - ca), (a + b) // 2)
                          for (a, ca), (b, cb) in zip(points, points[1:], strict=False)
                          if b - a > 1 and max(ca, cb) > CHANGE * max(1, min(ca, cb)))
            middles = [middle for _, middle in gaps[::-1][:min(CONCURRENT_LOOKUPS, REFINE_LOOKUPS - spent)]]
            if not middles:
                return
            spent += len(middles)
            if not self._learn_knots(partition, backlog, middles, knots):
                return  # an entry is not stored any more, or the budget ran out

    def _learn_knots(self, partition: str, backlog: Backlog, indexes: list[int], knots: dict[int, int]) -> bool:
        """Look up the entries at `indexes` and record them as knots; False if one is left unknown."""
        known = self._known[partition]
        positions = [_position(backlog, i) for i in indexes]
        self._look_up(partition, positions, wait=True)
        for index, position in zip(indexes, positions, strict=True):
            if position in known:
                knots[index] = known[position]
        return all(position in known for position in positions)

    def _already_asked(self, partition: str, backlog: Backlog, start: int, end: int) -> list[int]:
        """Indexes in [start, end) of entries known or under way (a prefetch asked for them)."""
        asked = (*self._known[partition], *self._pending[partition])
        indexes = (backlog.index_of(position) for position in asked)
        return sorted(i for i in indexes if i is not None and start <= i < end)

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
        start = admitted + len(head)
        reach = min(backlog.entries, start + math.ceil(max(0.0, msgs - exact) / per_entry) + 1)
        samples = [_position(backlog, i) for i in _spread(start, reach)] if msgs > exact else []
        self._look_up(partition, head + samples, wait=False)

    def _head(self, backlog: Backlog, start: int) -> list[Position]:
        return [_position(backlog, i) for i in range(start, min(start + EXACT_AHEAD, backlog.entries))]

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


def _spread(start: int, end: int) -> list[int]:
    """SAMPLES indexes spread evenly over [start, end) (fewer when the stretch is shorter)."""
    if end <= start:
        return []
    step = (end - start) / SAMPLES
    return sorted({start + int(step * (i + 0.5)) for i in range(SAMPLES)})


def _position(backlog: Backlog, index: int) -> Position:
    """The backlog's entry at `index` (0: its first)."""
    position = backlog.position_after(BEFORE_EARLIEST, index + 1)
    return (position.ledger_id, position.entry_id)
