"""Which partitions the query reads and their ledger layouts, cached for planning.

Spark polls `latestOffset` up to ~90 times a second when idle; every answer here is
reused for `metadataRefreshIntervalMs`, so an idle poll inside that interval makes
no admin request. While planning calls keep coming, the snapshot is fetched again every
interval in the background (background_refresh): a plan never waits on the broker, and sees
new data or partitions at most one interval plus one refresh late.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..positions import EntryPosition
from ..topics import TopicName, partition_sort_key
from .admin import PulsarAdmin
from .admin_http import TopicNotFound
from .background_refresh import BackgroundRefresh
from .layout import PartitionLayout
from .max_read import MaxReadPositions, open_transactions
from .request_pool import RequestPool
from .stress_readings import BrokerStress, pending_adds, throttled_events

if TYPE_CHECKING:
    from ..options.source_options import SourceOptions

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
    stats_at: float = 0.0  # when `stats` were fetched (they may be older than the layouts)
    # partition -> congestion counters (adaptiveThrottling's signals): pending adds of this refresh, and the
    # throttling counters of the last stats fetched
    stress: dict[str, BrokerStress] = field(default_factory=dict)

    def readable_end(self, partition: str) -> EntryPosition:
        """The newest entry planning may include: the latest, or the max read position before it."""
        latest = self.layouts[partition].latest
        cap = self.max_read.get(partition)
        return latest if cap is None else min(latest, cap)


class PublishCounters:
    """The publish counters a catalog last fetched and when they are due again. They are a second request per
    topic: asked with every refresh where they must be live (refresh_s 0), else at most every refresh_s."""

    def __init__(self, refresh_s: float) -> None:
        self._refresh_s = refresh_s
        self.stats: dict[str, PublishStats] = {}
        self.at = 0.0  # when `stats` were fetched
        self.throttled: dict[str, int | None] = {}  # the other subscriptions' throttling counters, fetched with them

    def due(self, now: float) -> bool:
        return not self.stats or now - self.at >= self._refresh_s

    def fetched(self, now: float, stats: dict[str, PublishStats], throttled: dict[str, int | None]) -> PublishCounters:
        self.stats, self.at, self.throttled = stats, now, throttled
        return self


@dataclass(frozen=True)
class CatalogSettings:
    """What a catalog reads and how often, as a query's options say (`of`)."""

    topics: tuple[TopicName, ...]  # the named topics (none with a pattern)
    pattern: re.Pattern[str] | None  # else the topics of `pattern_namespace` it matches, found again each refresh
    pattern_namespace: str | None
    refresh_s: float  # metadataRefreshIntervalMs: how long a snapshot is reused
    stats_refresh_s: float  # how often the publish counters are asked (0: with every refresh)
    in_background: bool  # a stream's snapshots are refreshed by a thread; a one-shot plan's fetched when asked
    own_subscription: str | None  # left out of the others' throttling counters

    @classmethod
    def of(cls, options: SourceOptions, *, streaming: bool) -> CatalogSettings:
        """A stream's catalog is refreshed in the background, a one-shot plan's (a batch query, the status
        command) fetched when asked; the publish counters as often as stats_refresh_s says."""
        o = options
        return cls(o.topics, o.topics_pattern, o.pattern_namespace, o.metadata_refresh_ms / 1000.0,
                   stats_refresh_s(o, streaming), in_background=streaming, own_subscription=o.subscription)


class PartitionCatalog:
    """The topics a query reads (named, or those a pattern matches in its namespace) and each partition's ledger
    layout, one snapshot per refresh; with them the publish counters at their cadence (stats_refresh_s), the
    transaction max read positions (max_read), the congestion counters, and the schema check of each refresh's
    topics (`on_topics`). Requests go a few at a time (request_pool). Every caller builds it the same way:
    PartitionCatalog(admin, CatalogSettings.of(options, streaming=...), on_topics=...)."""

    def __init__(self, admin: PulsarAdmin, settings: CatalogSettings,
                 on_topics: Callable[[list[TopicName]], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin
        self._own_subscription = settings.own_subscription
        self._topics = settings.topics
        self._pattern = settings.pattern
        self._namespace = settings.pattern_namespace
        self._counters = PublishCounters(settings.stats_refresh_s)
        self._on_topics = on_topics  # sees each refresh's topics before any is planned, after their layouts (schema checks)
        self._partitioned: dict[TopicName, bool] = {}  # learned once per topic: partitioned or not
        self._seen: set[TopicName] = set()
        self._built: dict[str, PartitionLayout] = {}
        self._requests = RequestPool()
        self._max_read = MaxReadPositions(admin, self._requests)  # the transactions probe
        self._refresh = BackgroundRefresh(self._fetch, settings.refresh_s, "pulsar-catalog-refresh", clock,
                                          settings.in_background)

    def snapshot(self, force: bool = False) -> CatalogSnapshot:
        """The newest snapshot; `force`: one fetched now (where a query starts, or fixes its end)."""
        return self._refresh.get(force)

    def _current_topics(self) -> list[TopicName]:
        return current_topics(self._admin, self._topics, self._pattern, self._namespace)

    def _fetch(self, now: float) -> CatalogSnapshot:
        layouts: dict[str, PartitionLayout] = {}
        stats: dict[str, PublishStats] = {}
        with_stats = self._counters.due(now)
        topics = self._current_topics()
        # On a broker with transactions (or before that is known), each topic's stats come with its
        # layouts: their open-transaction counts say whose max read position must be asked.
        with_txn_counts = self._max_read.may_hold_back
        outcomes = self._requests.each(lambda topic: self._fetch_topic(topic, with_stats, with_txn_counts), topics)
        if self._on_topics is not None:
            # After the layouts: a producer registers its schema before it writes, so a schema found
            # missing here was missing for every entry these layouts hold (asked before the layouts,
            # a producer connecting in between wrote entries of a schema never checked).
            self._on_topics(topics)
        pending: dict[str, int] = {}
        throttled: dict[str, int | None] = {}
        open_txns: dict[str, int | None] = {}
        for topic, outcome in zip(topics, outcomes, strict=True):
            if isinstance(outcome, TopicNotFound):
                if topic not in self._seen and self._pattern is None:
                    raise outcome  # a named topic that never existed: a configuration error
                # Deleted while the query runs: its partitions drop out of the snapshot and the
                # planner decides (failOnDataLoss) what that means.
                self._partitioned.pop(topic, None)
                continue
            layouts.update(outcome[0])
            stats.update(outcome[1])
            open_txns.update(outcome[2])
            pending.update(outcome[3])
            throttled.update(outcome[4])
            self._seen.add(topic)
        ordered = {p: layouts[p] for p in sorted(layouts, key=partition_sort_key)}
        self._built = ordered  # the next refresh reuses the layouts of partitions that did not move
        counters = self._counters.fetched(now, stats, throttled) if with_stats else self._counters
        stress = {p: BrokerStress(pending[p], counters.throttled.get(p)) for p in ordered if p in pending}
        return CatalogSnapshot(now, ordered, counters.stats, self._max_read.positions(ordered, open_txns),
                               counters.at, stress)

    def close(self) -> None:
        self._refresh.stop()
        self._requests.close()

    def _fetch_topic(self, topic: TopicName, with_stats: bool, with_txn_counts: bool
                     ) -> tuple[dict[str, PartitionLayout], dict[str, PublishStats], dict[str, int | None],
                                dict[str, int], dict[str, int | None]]:
        """The topic's partition layouts, then (asked after them) its publish stats and, where entries
        lie past a known max read position, its open transactions per partition; and the congestion
        counters both carry (pending adds, the other subscriptions' throttling counters)."""
        layouts: dict[str, PartitionLayout] = {}
        stats: dict[str, PublishStats] = {}
        open_txns: dict[str, int | None] = {}
        pending: dict[str, int] = {}
        throttled: dict[str, int | None] = {}
        partitioned = self._partitioned.get(topic)
        if partitioned is None:
            partitioned = self._admin.partition_count(topic) > 0
            self._partitioned[topic] = partitioned
        if partitioned:
            # One request for every partition's ledgers; new partitions appear here too.
            for name, internal in self._admin.partitioned_internal_stats(topic).items():
                layouts[name] = PartitionLayout.from_internal_stats(name, internal, self._built.get(name))
                pending[name] = pending_adds(internal)
        else:
            internal = self._admin.internal_stats(topic)
            layouts[str(topic)] = PartitionLayout.from_internal_stats(str(topic), internal, self._built.get(str(topic)))
            pending[str(topic)] = pending_adds(internal)
        # An idle topic's open transactions are not asked: nothing of it waits for a max read position.
        with_txn_counts = with_txn_counts and any(self._max_read.moved_past(name, layout) for name, layout in layouts.items())
        topic_stats: dict[str, dict] = {}
        if with_stats or with_txn_counts:
            topic_stats = self._admin.partitioned_stats(topic) if partitioned else {str(topic): self._admin.stats(topic)}
        for name, s in topic_stats.items():
            if with_stats:
                stats[name] = _publish_stats(s)
                throttled[name] = throttled_events(s, self._own_subscription)
            if with_txn_counts:
                open_txns[name] = open_transactions(s)
        return layouts, stats, open_txns, pending, throttled


def stats_refresh_s(options: SourceOptions, streaming: bool) -> float:
    """How often a catalog asks the publish counters (0: with every refresh). Live only where they must be:
    quotas relative to the publish rate (the broker's may be), adaptiveThrottling's signal on the other
    subscriptions' throttling counters, and a one-shot plan (it fetches once or twice). Else a stream asks
    them every policyRefreshIntervalMs: they then give only messages per entry, which size the read tasks'
    receiver queues and the progress report's messages, and change slowly."""
    o = options
    live = not streaming or o.uses_broker_quotas or o.adaptive is not None or any(
        r.relative_to_publish_rate for r in (o.quota.source, o.topic_rate, o.subscription_rate))
    return 0.0 if live else o.policy_refresh_ms / 1000.0


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


def check_topics_exist(admin: PulsarAdmin, topics: Sequence[TopicName]) -> None:
    """Named topics that do not exist fail the query at load(), naming each and its namespace (rather than at the
    first plan, after start()). partition_count decides existence as planning does: the partitioned metadata asked
    with auto-creation off (a lookup that may create topics would make them exist), and for an answer of 0
    partitions (what Pulsar says for a missing topic too) the topic's own ledgers. A 404 is never retried."""
    missing: list[TopicName] = []
    for topic in topics:
        try:
            admin.partition_count(topic)
        except TopicNotFound:
            missing.append(topic)
    if missing:
        namespaces = ", ".join(dict.fromkeys(t.namespace_name for t in missing))
        which = (f"Topic {missing[0]} does not exist in namespace {namespaces}" if len(missing) == 1 else
                 f"Topics {', '.join(map(str, missing))} do not exist in namespace(s) {namespaces}")
        raise ValueError(f"{which} on {admin.base}, neither partitioned nor non-partitioned (option 'topic' or 'topics'). "
                         "The source never creates topics: check the name (a short name is in public/default) and "
                         "'admin.url', or create the topic first.")
