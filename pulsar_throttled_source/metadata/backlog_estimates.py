"""What a partition's backlog entries are thought to hold without waiting on a lookup: the messages
per entry last learned for it (or another partition of its topic), kept fresh by sampling its newest
entry in the background.

A large plan prices the partitions far below their quotas by estimate (throttling/headroom.py);
producers batch a topic's partitions alike, so one partition's figure serves its siblings until
they are learned themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future
from functools import lru_cache

from ..backlog_values import BacklogValues, LearnedBacklog
from ..topics import TopicName
from .entry_headers import EntryHeaders
from .layout import Backlog
from .lookup_scheduler import Headers, LookupScheduler

ESTIMATE_REFRESH_S = 60.0  # how old a partition's messages per entry may grow before its newest entry is sampled
MAX_ESTIMATES = 4096  # estimates kept, one per value: averages take many values over hours


class BacklogEstimates:
    """Messages per entry last learned, per partition and per topic, and the samples under way."""

    def __init__(self, lookups: LookupScheduler, clock: Callable[[], float]) -> None:
        self._lookups = lookups  # samples are asked through it: they count against the call's budget
        self._clock = clock
        self._per_entry: dict[str, float] = {}  # each partition's messages per entry when last learned
        self._learned_at: dict[str, float] = {}  # when each partition's messages per entry were last learned
        self._topic_per_entry: dict[str, float] = {}  # the last learned of any partition of each topic
        self._samples: dict[str, Future[Headers]] = {}  # a partition's newest entry, looked up
        self._estimates: dict[float, LearnedBacklog] = {}

    def remember(self, partition: str, per_entry: float) -> None:
        """The partition's entries were just learned to hold `per_entry` messages on average."""
        self._per_entry[partition] = per_entry
        self._learned_at[partition] = self._clock()
        self._topic_per_entry[_topic_of(partition)] = per_entry

    def last_learned(self, partition: str) -> float | None:
        return self._per_entry.get(partition)

    def estimate(self, partition: str, backlog: Backlog) -> LearnedBacklog | None:
        """The messages per entry last learned for the partition, else for another partition of its
        topic; None when neither is known. Bytes are left to the ledgers' averages. A partition whose
        figure is older than ESTIMATE_REFRESH_S (or its topic's) has its newest entry looked up in the
        background, so a producer that changed its batching is seen."""
        sample = self._samples.get(partition)
        if sample is not None and sample.done():
            del self._samples[partition]
            try:
                headers = sample.result()
            except Exception:  # an outage: a later estimate samples again
                headers = None
            if headers is not None:
                self.remember(partition, max(1.0, float(EntryHeaders.parse(headers).messages)))
        per_entry = self._per_entry.get(partition)
        if per_entry is None:
            per_entry = self._topic_per_entry.get(_topic_of(partition))
        due = self._clock() - self._learned_at.get(partition, -math.inf) >= ESTIMATE_REFRESH_S
        if due and partition not in self._samples and backlog.entries:
            ledger, first, count, _ = backlog.runs[-1]
            started = self._lookups.start_one(partition, (ledger, first + count - 1))
            if started is not None:  # None: the call's budget went to exact lookups
                self._samples[partition] = started
        if per_entry is None:
            return None
        estimate = self._estimates.get(per_entry)
        if estimate is None:  # immutable: one per value serves every partition (its totals cached inside)
            if len(self._estimates) >= MAX_ESTIMATES:
                self._estimates.clear()
            estimate = self._estimates[per_entry] = LearnedBacklog(BacklogValues((), ((0, per_entry),)), None)
        return estimate


@lru_cache(maxsize=16384)
def _topic_of(partition: str) -> str:
    return str(TopicName.parse(partition).base)
