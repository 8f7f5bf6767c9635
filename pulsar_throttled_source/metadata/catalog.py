"""Which partitions the query reads and their ledger layouts, cached for planning.

Spark polls `latestOffset` up to ~90 times a second when idle; every answer here is
reused for `metadataRefreshIntervalMs`, so an idle poll inside that interval makes
no admin request, and new data or partitions are seen at most that late.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..positions import EntryPosition
from ..topics import TopicName, partition_sort_key
from .admin import PulsarAdmin
from .admin_http import TopicNotFound, TransactionsDisabled
from .layout import PartitionLayout

log = logging.getLogger(__name__)
SYSTEM_TOPIC = re.compile(r"/__[^/]*$|/__change_events|__transaction")


@dataclass(frozen=True)
class PublishStats:
    """Publish-side counters of one partition (for precise mode and relative rates)."""

    msg_in_counter: int
    bytes_in_counter: int
    msg_rate_in: float
    throughput_in: float


@dataclass(frozen=True)
class CatalogSnapshot:
    fetched_at: float
    layouts: dict[str, PartitionLayout]  # partition topic name -> layout, in offset order
    stats: dict[str, PublishStats] = field(default_factory=dict)
    # partition -> last entry the broker dispatches now (an open transaction holds back what follows)
    max_read: dict[str, EntryPosition] = field(default_factory=dict)

    def readable_end(self, partition: str) -> EntryPosition:
        """The newest entry planning may include: the latest, or the max read position before it."""
        latest = self.layouts[partition].latest
        cap = self.max_read.get(partition)
        return latest if cap is None else min(latest, cap)


class PartitionCatalog:
    def __init__(self, admin: PulsarAdmin, topics: tuple[TopicName, ...], pattern: re.Pattern[str] | None,
                 pattern_namespace: str | None, refresh_ms: int, with_stats: bool,
                 clock: Callable[[], float] = time.monotonic,
                 on_topics: Callable[[list[TopicName]], None] | None = None) -> None:
        self._admin = admin
        self._topics = topics
        self._pattern = pattern
        self._namespace = pattern_namespace
        self._refresh_s = refresh_ms / 1000.0
        self._with_stats = with_stats
        self._clock = clock
        self._on_topics = on_topics  # sees each refresh's topics before any is planned (schema checks)
        self._partitioned: dict[TopicName, bool] = {}  # learned once per topic: partitioned or not
        self._transactions: bool | None = None  # whether the broker runs a transaction coordinator
        self._max_read: dict[str, EntryPosition] = {}
        self._seen: set[TopicName] = set()
        self._snapshot: CatalogSnapshot | None = None

    def snapshot(self, force: bool = False) -> CatalogSnapshot:
        now = self._clock()
        if not force and self._snapshot is not None and now - self._snapshot.fetched_at < self._refresh_s:
            return self._snapshot
        self._snapshot = self._fetch(now)
        return self._snapshot

    def _current_topics(self) -> list[TopicName]:
        return current_topics(self._admin, self._topics, self._pattern, self._namespace)

    def _fetch(self, now: float) -> CatalogSnapshot:
        layouts: dict[str, PartitionLayout] = {}
        stats: dict[str, PublishStats] = {}
        topics = self._current_topics()
        if self._on_topics is not None:
            self._on_topics(topics)
        for topic in topics:
            try:
                self._fetch_topic(topic, layouts, stats)
                self._seen.add(topic)
            except TopicNotFound:
                if topic not in self._seen and self._pattern is None:
                    raise  # a named topic that never existed: a configuration error
                # Deleted while the query runs: its partitions drop out of the snapshot and the
                # planner decides (failOnDataLoss) what that means.
                self._partitioned.pop(topic, None)
        ordered = {p: layouts[p] for p in sorted(layouts, key=partition_sort_key)}
        return CatalogSnapshot(now, ordered, stats, self._max_read_positions(ordered))

    def _max_read_positions(self, layouts: dict[str, PartitionLayout]) -> dict[str, EntryPosition]:
        """Each partition's transaction max read position, asked only where entries lie past the last
        one known (on a topic without open transactions it is simply the newest entry)."""
        if self._transactions is False:
            return {}
        out: dict[str, EntryPosition] = {}
        for name, layout in layouts.items():
            known = self._max_read.get(name)
            if known is None or layout.latest > known:
                try:
                    answer = self._admin.max_read_position(TopicName.parse(name))
                except TransactionsDisabled:
                    self._transactions = False
                    return {}
                except TopicNotFound:
                    continue
                self._transactions = True
                # No open transaction: nothing is held back up to the newest entry seen now.
                known = layout.latest if answer is None else min(layout.latest, EntryPosition.parse(answer, f"max read position of {name}"))
                self._max_read[name] = known
            out[name] = known
        return out

    def _fetch_topic(self, topic: TopicName, layouts: dict[str, PartitionLayout], stats: dict[str, PublishStats]) -> None:
        partitioned = self._partitioned.get(topic)
        if partitioned is None:
            partitioned = self._admin.partition_count(topic) > 0
            self._partitioned[topic] = partitioned
        if partitioned:
            # One request for every partition's ledgers; new partitions appear here too.
            for name, internal in self._admin.partitioned_internal_stats(topic).items():
                layouts[name] = PartitionLayout.from_internal_stats(name, internal)
            if self._with_stats:
                for name, s in self._admin.partitioned_stats(topic).items():
                    stats[name] = _publish_stats(s)
        else:
            layouts[str(topic)] = PartitionLayout.from_internal_stats(str(topic), self._admin.internal_stats(topic))
            if self._with_stats:
                stats[str(topic)] = _publish_stats(self._admin.stats(topic))


def _publish_stats(s: dict) -> PublishStats:
    return PublishStats(int(s.get("msgInCounter", 0)), int(s.get("bytesInCounter", 0)),
                        float(s.get("msgRateIn", 0.0)), float(s.get("msgThroughputIn", 0.0)))


def current_topics(admin: PulsarAdmin, topics: tuple[TopicName, ...], pattern: re.Pattern[str] | None,
                   namespace: str | None) -> list[TopicName]:
    """The topics a query reads now: those named, or those of the namespace the pattern matches."""
    if pattern is None:
        return list(topics)
    assert namespace is not None
    bases: dict[str, TopicName] = {}
    for name in admin.list_topics(namespace):
        if SYSTEM_TOPIC.search(name):
            continue
        topic = TopicName.parse(name).base
        if pattern.fullmatch(str(topic)):
            bases[str(topic)] = topic
    return [bases[k] for k in sorted(bases)]
