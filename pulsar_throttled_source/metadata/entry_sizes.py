"""Driver side: the messages and stored bytes of the entries at the head of each partition's
backlog, from each entry's own metadata (admin API HEAD .../ledger/L/entry/E, see entry_headers).

Quotas are priced by the entries they admit, not by a topic-wide average: a topic whose history is
unbatched and whose recent part is batched 10 per entry must not be admitted 10x its message quota
(nor the reverse a tenth of it), and a ledger whose first entries are larger than its average must
not be read past its byte quota. Only the entries one window's tightest quota could admit are looked
up: the first EXACT_AHEAD of them, SAMPLES spread over the rest, and bisection where neighbouring
samples disagree. Each is looked up once (answers are kept until the query moves past them), so
idle polls and held-back partitions ask nothing, and a planning call asks at most LOOKUPS_PER_PLAN.

A planning call over more than WAIT_ALL_UP_TO partitions with backlog waits for lookups at most
LOOKUP_WAIT_S in all: at 1,000 partitions the entries new since the last trigger are hundreds of
lookups, more than a busy broker answers in a trigger. An entry of the exact head still unanswered
then is not guessed at: the partition is admitted only the entries before it (at least one), and
the rest at a later trigger, once the answers are in. A call over fewer partitions waits for all its
lookups (bench/planning.py, 16 partitions, a refresh every call: 43 ms per plan waiting for all, 154 ms
with the deadline), so such queries are priced exactly at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout  # not the builtin before Python 3.11
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from ..entry_values import EntryValues, LearnedEntries, LearnEntries, changed
from ..positions import BEFORE_EARLIEST
from ..topics import TopicName
from .entry_headers import messages_in_entry, stored_bytes
from .layout import Backlog
from .uniform_batching import AlikeStretches

if TYPE_CHECKING:
    from .admin import PulsarAdmin

Position = tuple[int, int]

LOOKUPS_PER_PLAN = 256  # per planning call, over all partitions
EXACT_AHEAD = 64  # entries counted exactly ahead of a partition's start (a window of ~10-message entries)
HEAD_CHUNK = 16  # looked up together, as many chunks as the quota reaches
SAMPLES = 8  # entries sampled across each further stretch of what one window could admit
EXTENSIONS = 4  # times the sampled reach is pushed further when it holds less than thought
REFINE_LOOKUPS = 32  # bisection lookups per partition and call, to find where the batching changed
CONCURRENT_LOOKUPS = 8
LOOKUP_WAIT_S = 0.05  # per planning call, over all partitions (see the module doc)
WAIT_ALL_UP_TO = 64  # partitions with backlog in a planning call that waits for all its lookups
ESTIMATE_REFRESH_S = 60.0  # how old a partition's messages per entry may grow before its newest entry is sampled


@dataclass(frozen=True)
class EntrySize:
    msgs: int  # what a reader is handed
    bytes: float | None  # stored bytes; None when the headers cannot tell (priced at its ledger's average)


@dataclass
class _Known:
    """Values of entries at indexes of one backlog: the exact head, and knots further on."""

    msgs: list[float]
    bytes: list[float]
    msg_knots: dict[int, float]
    byte_knots: dict[int, float]
    _learned: LearnedEntries | None = None  # built once per change (its totals are cached inside)

    def learned(self) -> LearnedEntries:
        if self._learned is None:
            self._learned = LearnedEntries(
                EntryValues(tuple(self.msgs), tuple(sorted(self.msg_knots.items()))),
                EntryValues(tuple(self.bytes), tuple(sorted(self.byte_knots.items())), floor=0.0))
        return self._learned

    def add_knot(self, index: int, msgs: float, size: float) -> None:
        self.msg_knots[index], self.byte_knots[index] = msgs, size
        self._learned = None


class EntrySizes:
    """Messages and bytes of backlog entries, per partition, learned on demand within a per-call
    budget: the first entries exactly (16 at a time, as far as the quota reaches, at most
    EXACT_AHEAD), then SAMPLES spread over the rest of what the quota could reach (extended while
    they hold less than thought), then bisection wherever neighbouring known entries differ by more
    than entry_values.CHANGE (a producer changed its batching there), so a window that crosses such
    a change is priced on both sides of it. Once a batch is planned, the next window's entries are
    looked up in the background."""

    def __init__(self, admin: PulsarAdmin, wait_s: float = LOOKUP_WAIT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin
        self._wait_s = wait_s
        self._clock = clock
        self._deadline = 0.0  # this planning call waits for lookups until then
        self._known: dict[str, dict[Position, EntrySize]] = {}
        self._pending: dict[str, dict[Position, Future[Mapping[str, str] | None]]] = {}
        self._asked: dict[str, tuple[float, float]] = {}  # what each partition's quotas asked for last
        self._per_entry: dict[str, float] = {}  # each partition's messages per entry when last learned
        self._budget = LOOKUPS_PER_PLAN
        self._pool: ThreadPoolExecutor | None = None
        self._answers: dict[str, tuple[object, LearnedEntries]] = {}  # each partition's last answer, and its question
        self._complete = True  # whether the answer being learned is all there is to learn now
        self._learned_at: dict[str, float] = {}  # when each partition's messages per entry were last learned
        self._topic_per_entry: dict[str, float] = {}  # the last learned of any partition of each topic
        self._samples: dict[str, Future[Mapping[str, str] | None]] = {}  # a partition's newest entry, looked up
        self._estimates: dict[float, LearnedEntries] = {}
        self._alike = AlikeStretches()  # stretches of alike entries, priced from a few of them

    def new_plan(self, partitions: int = 0) -> None:
        """A planning call starts, over `partitions` partitions with backlog."""
        self._budget = LOOKUPS_PER_PLAN
        self._deadline = math.inf if partitions <= WAIT_ALL_UP_TO else self._clock() + self._wait_s

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def learner(self, partition: str, backlog: Backlog) -> LearnEntries:
        """For the engine: the entries holding `msgs` messages and `size` bytes from the backlog's
        start, and one more."""
        known = self._known.setdefault(partition, {})
        pending = self._pending.setdefault(partition, {})
        if backlog.runs:  # forget what the query has moved past
            ledger, first, _, _ = backlog.runs[0]
            for table in (known, pending):
                for position in [p for p in table if p < (ledger, first)]:
                    del table[position]

        def learn(msgs: float, size: float) -> LearnedEntries:
            self._asked[partition] = (msgs, size)
            # The same question over the same entries, with nothing learned since: the same answer
            # (a throttled partition held back, or polls between triggers, cost no work).
            key = (backlog.runs, msgs, size, len(known), len(pending))
            remembered = self._answers.get(partition)
            if remembered is not None and remembered[0] == key:
                return remembered[1]
            budget = self._budget
            answer = self._learn(partition, backlog, msgs, size)
            if self._budget == budget > 0 and self._complete:  # nothing looked up, nothing missing
                self._answers[partition] = (key, answer)
            return answer

        return learn

    def _learn(self, partition: str, backlog: Backlog, msgs: float, size: float) -> LearnedEntries:
        known = self._known[partition]
        self._complete = True
        alike = self._alike.knots(partition, backlog, lambda indexes: self._entries_at(partition, backlog, indexes), msgs, size)
        values = _Known([], [], {}, {})
        if alike is not None:  # a producer's alike batches (uniform_batching)
            for index, (entry_msgs, entry_bytes) in alike.items():
                values.add_knot(index, entry_msgs, entry_bytes)
            return self._remembered(partition, values)
        held_msgs = held_bytes = 0.0  # what the entries counted so far hold
        head = backlog.entries_between(0, EXACT_AHEAD)
        for chunk in range(0, len(head), HEAD_CHUNK):  # only as far as the quotas reach
            self._look_up(partition, [(ledger, entry) for ledger, entry, _ in head[chunk:chunk + HEAD_CHUNK]], wait=True)
            for ledger, entry_id, ledger_average in head[chunk:chunk + HEAD_CHUNK]:
                entry = known.get((ledger, entry_id))
                if entry is None:  # not stored any more, out of budget, or not answered in time
                    self._complete = False
                    late = (ledger, entry_id) in self._pending[partition]
                    return self._remembered(partition, values, reach=len(values.msgs) if late else None)
                reached = held_msgs >= msgs and held_bytes >= size
                values.msgs.append(entry.msgs)
                values.bytes.append(entry.bytes if entry.bytes is not None else ledger_average)
                held_msgs, held_bytes = held_msgs + values.msgs[-1], held_bytes + values.bytes[-1]
                if reached:
                    return self._remembered(partition, values)
        self._beyond(partition, backlog, values, msgs, size)
        return self._remembered(partition, values)

    def _entries_at(self, partition: str, backlog: Backlog, indexes: list[int]) -> list[tuple[float, float | None] | None]:
        """(messages, stored bytes) of the backlog's entries at `indexes`, looked up (waiting as a
        planning call may); None for one not known."""
        positions = [_position(backlog, i) for i in indexes]
        self._look_up(partition, positions, wait=True)
        known = self._known[partition]
        entries = [known.get(position) for position in positions]
        self._complete = self._complete and all(entry is not None for entry in entries)
        return [None if entry is None else (entry.msgs, entry.bytes) for entry in entries]

    def _remembered(self, partition: str, values: _Known, reach: int | None = None) -> LearnedEntries:
        """What was learned, remembering its messages per entry; when nothing could be looked up
        (the call's budget went to other partitions), the average this partition had last time.
        `reach`: the head's entries known before one still being looked up (admit no further)."""
        learned = values.learned()
        if learned.msgs is not None and learned.msgs.per_entry is not None:
            self._remember_per_entry(partition, learned.msgs.per_entry)
        elif partition in self._per_entry:
            learned = LearnedEntries(EntryValues((), ((0, self._per_entry[partition]),)), None)
        else:
            learned = LearnedEntries()
        return learned if reach is None else replace(learned, reach=reach)

    def _remember_per_entry(self, partition: str, per_entry: float) -> None:
        self._per_entry[partition] = per_entry
        self._learned_at[partition] = self._clock()
        self._topic_per_entry[_topic_of(partition)] = per_entry

    def estimate(self, partition: str, backlog: Backlog) -> LearnedEntries | None:
        """What the backlog's entries are thought to hold, without waiting on a lookup: the messages
        per entry last learned for the partition, else for another partition of its topic (producers
        batch a topic's partitions alike); None when neither is known. Bytes are left to the ledgers'
        averages. A partition whose figure is older than ESTIMATE_REFRESH_S (or its topic's) has its
        newest entry looked up in the background, so a producer that changed its batching is seen."""
        sample = self._samples.get(partition)
        if sample is not None and sample.done():
            del self._samples[partition]
            try:
                headers = sample.result()
            except Exception:  # an outage: a later estimate samples again
                headers = None
            if headers is not None:
                self._remember_per_entry(partition, max(1.0, float(messages_in_entry(headers))))
        per_entry = self._per_entry.get(partition)
        if per_entry is None:
            per_entry = self._topic_per_entry.get(_topic_of(partition))
        due = self._clock() - self._learned_at.get(partition, -math.inf) >= ESTIMATE_REFRESH_S
        if due and partition not in self._samples and backlog.entries and self._budget > 0:
            self._budget -= 1
            ledger, first, count, _ = backlog.runs[-1]
            self._samples[partition] = self._lookups().submit(self._admin.entry_headers, TopicName.parse(partition),
                                                              ledger, first + count - 1)
        if per_entry is None:
            return None
        estimate = self._estimates.get(per_entry)
        if estimate is None:  # immutable: one per value serves every partition (its totals cached inside)
            if len(self._estimates) >= 4096:  # averages take many values over hours
                self._estimates.clear()
            estimate = self._estimates[per_entry] = LearnedEntries(EntryValues((), ((0, per_entry),)), None)
        return estimate

    def _lookups(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(CONCURRENT_LOOKUPS, thread_name_prefix="pulsar-entry-lookups")
        return self._pool

    def _beyond(self, partition: str, backlog: Backlog, values: _Known, msgs: float, size: float) -> None:
        """Past the exact head: sample the entries the quotas could still reach, reaching further
        while the samples hold less than thought, then narrow down changes of batching."""
        reach = len(values.msgs)
        for _ in range(EXTENSIONS):
            estimate = values.learned()
            assert estimate.msgs is not None and estimate.bytes is not None
            short_msgs = msgs - estimate.msgs.total(reach)
            short_bytes = size - estimate.bytes.total(reach)
            if (short_msgs <= 0 and short_bytes <= 0) or reach >= backlog.entries or self._budget <= 0:
                break
            more = max(math.ceil(short_msgs / estimate.msgs.tail) if short_msgs > 0 else 0,
                       math.ceil(short_bytes / max(1.0, estimate.bytes.tail)) if short_bytes > 0 else 0)
            further = min(backlog.entries, reach + more + 1)
            indexes = self._already_asked(partition, backlog, reach, further)
            if len(indexes) < SAMPLES:  # too few prefetched there: sample the stretch
                indexes = sorted(set(indexes) | set(_spread(reach, further)))
            self._learn_knots(partition, backlog, indexes, values)
            reach = further
        self._narrow_changes(partition, backlog, values)

    def _narrow_changes(self, partition: str, backlog: Backlog, values: _Known) -> None:
        """Bisect between neighbouring known entries that differ by more than CHANGE (in messages or
        bytes), widest and most different first, until each change of batching is found or
        REFINE_LOOKUPS are spent."""
        spent = 0
        head = len(values.msgs)
        while spent < REFINE_LOOKUPS and self._budget > 0:
            points = ([(head - 1, values.msgs[-1], values.bytes[-1])] if head else []) + [
                (i, values.msg_knots[i], values.byte_knots[i]) for i in sorted(values.msg_knots)]
            gaps = sorted(((b - a) * max(_ratio(ma, mb), _ratio(sa, sb)), (a + b) // 2)
                          for (a, ma, sa), (b, mb, sb) in zip(points, points[1:], strict=False)
                          if b - a > 1 and (changed(ma, mb) or changed(sa, sb)))
            middles = [middle for _, middle in gaps[::-1][:min(CONCURRENT_LOOKUPS, REFINE_LOOKUPS - spent)]]
            if not middles:
                return
            spent += len(middles)
            if not self._learn_knots(partition, backlog, middles, values):
                return  # an entry is not stored any more, or the budget ran out

    def _learn_knots(self, partition: str, backlog: Backlog, indexes: list[int], values: _Known) -> bool:
        """Look up the entries at `indexes` and record them as knots; False if one is left unknown."""
        known = self._known[partition]
        positions = [_position(backlog, i) for i in indexes]
        self._look_up(partition, positions, wait=True)
        for index, position in zip(indexes, positions, strict=True):
            entry = known.get(position)
            if entry is not None:
                values.add_knot(index, entry.msgs, _size(entry, backlog, index))
        complete = all(position in known for position in positions)
        self._complete = self._complete and complete
        return complete

    def _already_asked(self, partition: str, backlog: Backlog, start: int, end: int) -> list[int]:
        """Indexes in [start, end) of entries known or under way (a prefetch asked for them)."""
        asked = (*self._known[partition], *self._pending[partition])
        indexes = (backlog.index_of(position) for position in asked)
        return sorted(i for i in indexes if i is not None and start <= i < end)

    def prefetch(self, partition: str, backlog: Backlog, admitted: int) -> None:
        """The batch just planned ends `admitted` entries into `backlog`: start looking up what the
        next window will ask about (the same quotas from there), without waiting."""
        if partition not in self._asked or admitted >= backlog.entries:
            return
        msgs, size = self._asked[partition]
        known = self._known.get(partition, {})
        alike = self._alike.prefetch(partition, backlog, admitted, msgs, size)
        if alike is not None:  # the entries the next window will check
            self._look_up(partition, [_position(backlog, i) for i in alike], wait=False)
            return
        head = self._head(backlog, admitted)
        head_known = [known[p] for p in head if p in known]
        per_entry = max(1.0, sum(e.msgs for e in head_known) / len(head_known)) if head_known else 1.0
        per_entry_bytes = max(1.0, backlog.bytes_for(admitted + len(head)) - backlog.bytes_for(admitted)) / max(1, len(head))
        start = admitted + len(head)
        more = max(math.ceil(max(0.0, msgs - per_entry * len(head)) / per_entry),
                   math.ceil(max(0.0, size - per_entry_bytes * len(head)) / per_entry_bytes))
        reach = min(backlog.entries, start + more + 1) if more else start
        self._look_up(partition, head + [_position(backlog, i) for i in _spread(start, reach)], wait=False)

    def _head(self, backlog: Backlog, start: int) -> list[Position]:
        return [(ledger, entry) for ledger, entry, _ in backlog.entries_between(start, start + EXACT_AHEAD)]

    def _look_up(self, partition: str, positions: list[Position], wait: bool) -> None:
        """Start lookups of the positions neither known nor under way (within the call's budget);
        with `wait`, record the answers for all of them."""
        known, pending = self._known[partition], self._pending[partition]
        topic = TopicName.parse(partition)
        for position in positions:
            if position not in known and position not in pending and self._budget > 0:
                self._budget -= 1
                pending[position] = self._lookups().submit(self._admin.entry_headers, topic, *position)
        for position in positions if wait else [p for p, f in pending.items() if f.done()]:
            future = pending.get(position)
            if future is not None and not future.done():
                try:  # no longer than the call's deadline: a later call gets the answer
                    left = self._deadline - self._clock()
                    future.exception(timeout=None if left == math.inf else max(0.0, left))
                except FutureTimeout:
                    continue
                except CancelledError:  # the pool was shut down: asked again below
                    pass
            future = pending.pop(position, None)
            if future is not None:
                try:
                    headers = future.result()
                except Exception:  # an earlier outage (a background lookup): ask again, now
                    headers = self._admin.entry_headers(topic, *position)
                if headers is not None:  # None: no longer stored; data loss is for the planner to report
                    known[position] = EntrySize(messages_in_entry(headers), stored_bytes(headers))


@lru_cache(maxsize=16384)
def _topic_of(partition: str) -> str:
    return str(TopicName.parse(partition).base)


def _size(entry: EntrySize, backlog: Backlog, index: int) -> float:
    """An entry's stored bytes, or its ledger's average when its headers do not tell."""
    if entry.bytes is not None:
        return entry.bytes
    return backlog.entries_between(index, index + 1)[0][2]


def _ratio(a: float, b: float) -> float:
    return max(a, b) / max(1.0, min(a, b))


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
