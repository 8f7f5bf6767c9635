"""Driver side: the messages and stored bytes of the entries at the head of each partition's
backlog, from each entry's own metadata (admin API HEAD .../ledger/L/entry/E, see entry_headers).

Quotas are priced by the entries they admit, not by a topic-wide average: a topic whose history is
unbatched and whose recent part is batched 10 per entry must not be admitted 10x its message quota
(nor the reverse a tenth of it), and a ledger whose first entries are larger than its average must
not be read past its byte quota. Only the entries one window's tightest quota could admit are looked
up, each once (answers are kept until the query moves past them), so idle polls and held-back
partitions ask nothing, and a planning call asks at most lookup_scheduler.LOOKUPS_PER_PLAN.

BacklogSizes is what the planner (planning/admission.py) holds; it joins the roles, each in its module:
- lookup_scheduler: LookupScheduler (pool, per-call budget and deadline, the answers kept);
- window_pricing: which entries a window needs and what they hold, and whether that is complete;
- uniform_batching: stretches a producer batched alike, priced from a grid of them;
- backlog_estimates: estimates without waiting, and the background samples that keep them fresh.
Here: the last answer of each partition remembered (an unchanged question costs nothing), and the
next window's lookups started once a batch is planned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import replace
from typing import TYPE_CHECKING

from ..backlog_values import BacklogValues, LearnBacklog, LearnedBacklog
from ..positions import Position
from .backlog_estimates import BacklogEstimates
from .layout import Backlog
from .lookup_scheduler import LOOKUP_WAIT_S, LookupScheduler, Waiter, lookup_pool, position_at, wait_for_answer
from .stress_readings import LatencySamples
from .uniform_batching import AlikeStretches
from .window_pricing import EXACT_AHEAD, PricedWindow, price_window, spread

if TYPE_CHECKING:
    from .admin import PulsarAdmin


class BacklogSizes:
    """Messages and bytes of backlog entries, per partition, learned on demand within a per-call
    budget (see window_pricing for which entries); once a batch is planned, the next window's
    entries are looked up in the background. `clock`, `waiter` and `pool` are for tests (see
    lookup_scheduler)."""

    def __init__(self, admin: PulsarAdmin, wait_s: float = LOOKUP_WAIT_S, clock: Callable[[], float] = time.monotonic,
                 waiter: Waiter = wait_for_answer, pool: Callable[[], Executor] = lookup_pool,
                 latency: LatencySamples | None = None) -> None:
        self._lookups = LookupScheduler(admin, wait_s, clock, waiter, pool, latency)
        self._estimates = BacklogEstimates(self._lookups, clock)
        self._alike = AlikeStretches()  # stretches of alike entries, priced from a few of them
        self._asked: dict[str, tuple[float, float]] = {}  # what each partition's quotas asked for last
        self._answers: dict[str, tuple[object, LearnedBacklog]] = {}  # each partition's last answer, and its question

    @property
    def lookups(self) -> LookupScheduler:
        """The lookup scheduler: what is known and under way (tests read it)."""
        return self._lookups

    def new_plan(self, partitions: int = 0) -> None:
        """A planning call starts, over `partitions` partitions with backlog."""
        self._lookups.new_plan(partitions)

    def close(self) -> None:
        self._lookups.close()

    def learner(self, partition: str, backlog: Backlog) -> LearnBacklog:
        """For the engine: the entries holding `msgs` messages and `size` bytes from the backlog's
        start, and one more."""
        self._lookups.follow(partition, backlog)  # forget what the query has moved past

        def learn(msgs: float, size: float) -> LearnedBacklog:
            self._asked[partition] = (msgs, size)
            # The same question over the same entries, with nothing learned since: the same answer
            # (a throttled partition held back, or polls between triggers, cost no work).
            key = (backlog.runs, msgs, size, *self._lookups.progress(partition))
            remembered = self._answers.get(partition)
            if remembered is not None and remembered[0] == key:
                return remembered[1]
            budget = self._lookups.budget
            priced = price_window(self._lookups, self._alike, partition, backlog, msgs, size)
            answer = self._learned(partition, priced)
            if self._lookups.budget == budget > 0 and priced.complete:  # nothing looked up, nothing missing
                self._answers[partition] = (key, answer)
            return answer

        return learn

    def _learned(self, partition: str, priced: PricedWindow) -> LearnedBacklog:
        """What was priced, remembering its messages per entry; when nothing could be looked up (the
        call's budget went to other partitions), the average this partition had last time."""
        learned = priced.values.learned()
        if learned.msgs is not None and learned.msgs.per_entry is not None:
            self._estimates.remember(partition, learned.msgs.per_entry)
        elif (last := self._estimates.last_learned(partition)) is not None:
            learned = LearnedBacklog(BacklogValues((), ((0, last),)), None)
        else:
            learned = LearnedBacklog()
        return learned if priced.reach is None else replace(learned, reach=priced.reach)

    def message_counts(self, partition: str, backlog: Backlog, positions: list[Position]) -> dict[Position, int]:
        """The messages a reader is handed for these backlog entries, those known or answered within the call's
        budget and deadline (maxMessagesPerTrigger: planning/message_cap.py)."""
        self._lookups.follow(partition, backlog)
        self._lookups.look_up(partition, positions, wait=True)
        known = self._lookups.known(partition)
        return {p: known[p].msgs for p in positions if p in known}

    def estimate(self, partition: str, backlog: Backlog) -> LearnedBacklog | None:
        """What the backlog's entries are thought to hold, without waiting on a lookup (backlog_estimates)."""
        return self._estimates.estimate(partition, backlog)

    def prefetch(self, partition: str, backlog: Backlog, admitted: int) -> None:
        """The batch just planned ends `admitted` entries into `backlog`: start looking up what the
        next window will ask about (the same quotas from there), without waiting."""
        if partition not in self._asked or admitted >= backlog.entries:
            return
        msgs, size = self._asked[partition]
        known = self._lookups.known(partition)
        alike = self._alike.prefetch(partition, backlog, admitted, msgs, size)
        if alike is not None:  # the entries the next window will check
            self._lookups.look_up(partition, [position_at(backlog, i) for i in alike], wait=False)
            return
        head = _head(backlog, admitted)
        head_known = [known[p] for p in head if p in known]
        per_entry = max(1.0, sum(e.msgs for e in head_known) / len(head_known)) if head_known else 1.0
        per_entry_bytes = max(1.0, backlog.bytes_for(admitted + len(head)) - backlog.bytes_for(admitted)) / max(1, len(head))
        start = admitted + len(head)
        more = max(math.ceil(max(0.0, msgs - per_entry * len(head)) / per_entry),
                   math.ceil(max(0.0, size - per_entry_bytes * len(head)) / per_entry_bytes))
        reach = min(backlog.entries, start + more + 1) if more else start
        self._lookups.look_up(partition, head + [position_at(backlog, i) for i in spread(start, reach)], wait=False)



def _head(backlog: Backlog, start: int) -> list[Position]:
    return [(ledger, entry) for ledger, entry, _ in backlog.entries_between(start, start + EXACT_AHEAD)]
