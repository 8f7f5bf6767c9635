"""Driver side: the publish time of each partition's oldest unread entry, for the time lag the query
progress reports (planning/progress.py).

An entry's publish time is in its admin-API headers (HEAD .../ledger/L/entry/E, as lookup_scheduler asks
for precise mode), so the time lag of a partition costs one lookup of the first entry after the
planned end. Only partitions that are behind are asked, and each position once: an idle or caught-up
query asks nothing, and a throttled one that waits out a window asks nothing again. A planning call
starts at most LOOKUPS_PER_PLAN lookups (the partitions asked longest ago first) and waits for them at
most WAIT_S in all; a partition whose answer is still out keeps the publish time of the earlier entry
it knew, which is older, so its time lag is over- and never under-stated until the answer comes. A
partition that knows none yet (the query's first plans, the first lookup opening its connection) is
waited for up to FIRST_WAIT_S, so the first report has a time lag too.
(Measured on the test broker: a HEAD answers in ~6 ms, 13 ms at p90, on 2 busy cores.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..positions import EntryPosition
from ..topics import TopicName

if TYPE_CHECKING:
    from .admin import PulsarAdmin

log = logging.getLogger(__name__)

LOOKUPS_PER_PLAN = 32
WAIT_S = 0.1
FIRST_WAIT_S = 1.0
RETRY_S = 5.0  # an entry whose lookup failed, or that has no publish time, is asked again after this
CONCURRENT = 4
PUBLISH_TIME = "x-pulsar-publish-time"

Lookup = Callable[[str, EntryPosition], "Mapping[str, str] | None"]  # an entry's headers; None: not stored


def publish_ms(headers: Mapping[str, str] | None) -> int | None:
    """The epoch-ms publish time in an entry's headers (None: none, or the entry is gone)."""
    if headers is None:
        return None
    text = next((v for k, v in headers.items() if k.lower() == PUBLISH_TIME), None)
    if not text:
        return None
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


class OldestUnread:
    """Per partition, the publish time of the first entry after a position, looked up on demand."""

    def __init__(self, lookup: Lookup, pool: Callable[[], Executor] | None = None, wait_s: float = WAIT_S,
                 clock: Callable[[], float] = time.monotonic, first_wait_s: float = FIRST_WAIT_S,
                 per_call: int = LOOKUPS_PER_PLAN) -> None:
        self._lookup = lookup
        self._per_call = per_call  # lookups started by one publish_times call
        self._new_pool = pool or (lambda: ThreadPoolExecutor(CONCURRENT, thread_name_prefix="pulsar-publish-times"))
        self._pool: Executor | None = None
        self._wait_s = wait_s
        self._first_wait_s = first_wait_s
        self._clock = clock
        self._known: dict[str, tuple[EntryPosition, int]] = {}  # partition -> (entry, its publish ms)
        self._pending: dict[str, tuple[EntryPosition, Future[Mapping[str, str] | None]]] = {}
        self._asked_at: dict[str, float] = {}
        self._unanswered: dict[str, EntryPosition] = {}  # the last lookup failed or told no time

    @classmethod
    def of_admin(cls, admin: PulsarAdmin, **settings: Any) -> OldestUnread:
        def lookup(partition: str, entry: EntryPosition) -> Mapping[str, str] | None:
            return admin.entry_headers(TopicName.parse(partition), entry.ledger_id, entry.entry_id)
        return cls(lookup, **settings)

    @classmethod
    def once(cls, admin: PulsarAdmin, first_unread: Mapping[str, EntryPosition], timeout_s: float) -> dict[str, int]:
        """One answer, as a command asks it (the status command): every partition's lookup started at once,
        CONCURRENT at a time, all waited for within `timeout_s`; a partition not answered by then has no time."""
        times = cls.of_admin(admin, wait_s=timeout_s, first_wait_s=timeout_s, per_call=max(1, len(first_unread)))
        try:
            return times.publish_times(first_unread)
        finally:
            times.close()

    def publish_times(self, first_unread: Mapping[str, EntryPosition]) -> dict[str, int]:
        """Epoch-ms publish time of each given partition's first unread entry, where known (or of an
        earlier entry while its own lookup is out); asks the broker only for entries not yet asked."""
        for partition in [p for p in (*self._known, *self._unanswered) if p not in first_unread]:
            self._known.pop(partition, None)  # caught up (or gone): its next lag starts afresh
            self._unanswered.pop(partition, None)
        to_ask = [p for p, e in first_unread.items() if self._wanted(p, e)]
        to_ask.sort(key=lambda p: self._asked_at.get(p, 0.0))
        for partition in to_ask[:self._per_call]:
            entry = first_unread[partition]
            if self._pool is None:
                self._pool = self._new_pool()
            self._pending[partition] = (entry, self._pool.submit(self._lookup, partition, entry))
            self._asked_at[partition] = self._clock()
        if self._pending:
            first = any(p not in self._known and p not in self._unanswered for p in self._pending)
            wait([f for _, f in self._pending.values()], timeout=self._first_wait_s if first else self._wait_s)
        for partition, (entry, future) in list(self._pending.items()):
            if not future.done():
                continue
            del self._pending[partition]
            try:
                ms = publish_ms(future.result())
            except Exception as e:  # an outage: asked again after RETRY_S
                log.debug("Looking up the publish time of %s of %s failed: %s", entry, partition, e)
                ms = None
            if ms is None:
                self._unanswered[partition] = entry
            else:
                self._known[partition] = (entry, ms)
                self._unanswered.pop(partition, None)
        return {p: self._known[p][1] for p in first_unread if p in self._known}

    def _wanted(self, partition: str, entry: EntryPosition) -> bool:
        known = self._known.get(partition)
        pending = self._pending.get(partition)
        if self._unanswered.get(partition) == entry and self._clock() - self._asked_at.get(partition, 0.0) < RETRY_S:
            return False
        return (known is None or known[0] != entry) and (pending is None or pending[0] != entry)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
