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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from ..positions import EntryPosition
from ..topics import TopicName, partition_sort_key
from .admin import PulsarAdmin
from .admin_http import TopicNotFound, TransactionsDisabled
from .background_refresh import BackgroundRefresh
from .layout import PartitionLayout
from .stress_readings import BrokerStress, pending_adds, throttled_events

if TYPE_CHECKING:
    from ..options.model import SourceOptions

log = logging.getLogger(__name__)
SYSTEM_TOPIC = re.compile(r"/__[^/]*$|/__change_events|__transaction")
CONCURRENT_REQUESTS = 4  # admin requests in flight at once while refreshing (topics, max read positions)
T = TypeVar("T")
R = TypeVar("R")


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


class PartitionCatalog:
    def __init__(self, admin: PulsarAdmin, topics: tuple[TopicName, ...], pattern: re.Pattern[str] | None,
                 pattern_namespace: str | None, refresh_ms: int, with_stats: bool,
                 clock: Callable[[], float] = time.monotonic,
                 on_topics: Callable[[list[TopicName]], None] | None = None, stats_refresh_s: float = 0.0,
                 in_background: bool = False, own_subscription: str | None = None) -> None:
        self._admin = admin
        self._own_subscription = own_subscription  # left out of the others' throttling counters
        self._topics = topics
        self._pattern = pattern
        self._namespace = pattern_namespace
        self._refresh_s = refresh_ms / 1000.0
        self._with_stats = with_stats
        # Publish stats are a second request per topic: asked at every refresh only when quotas relative
        # to the publish rate need live counters, else at most every stats_refresh_s (they then feed
        # only the progress report's messages-per-entry estimate, which changes slowly).
        self._stats_refresh_s = stats_refresh_s
        self._stats: dict[str, PublishStats] = {}
        self._stats_at = 0.0
        self._throttled: dict[str, int | None] = {}  # the others' throttling counters, with the last stats fetched
        self._clock = clock
        self._on_topics = on_topics  # sees each refresh's topics before any is planned, after their layouts (schema checks)
        self._partitioned: dict[TopicName, bool] = {}  # learned once per topic: partitioned or not
        self._transactions: bool | None = None  # whether the broker runs a transaction coordinator
        self._max_read: dict[str, EntryPosition] = {}
        self._seen: set[TopicName] = set()
        self._built: dict[str, PartitionLayout] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._refresh = BackgroundRefresh(self._fetch, self._refresh_s, "pulsar-catalog-refresh", clock, in_background)

    @classmethod
    def for_query(cls, options: SourceOptions, admin: PulsarAdmin, *, streaming: bool,
                  on_topics: Callable[[list[TopicName]], None] | None = None) -> PartitionCatalog:
        """The catalog of the topics `options` name, as every caller builds it: a stream's is refreshed in the
        background, a one-shot plan's (a batch query, the status command) fetched when asked; the publish
        counters as often as stats_refresh_s says. `on_topics`: the schema check of the topics found."""
        o = options
        return cls(admin, o.topics, o.topics_pattern, o.pattern_namespace, o.metadata_refresh_ms, True,
                   on_topics=on_topics, stats_refresh_s=stats_refresh_s(o, streaming),
                   in_background=streaming, own_subscription=o.subscription)

    def snapshot(self, force: bool = False) -> CatalogSnapshot:
        """The newest snapshot; `force`: one fetched now (where a query starts, or fixes its end)."""
        return self._refresh.get(force)

    def _current_topics(self) -> list[TopicName]:
        return current_topics(self._admin, self._topics, self._pattern, self._namespace)

    def _fetch(self, now: float) -> CatalogSnapshot:
        layouts: dict[str, PartitionLayout] = {}
        stats: dict[str, PublishStats] = {}
        with_stats = self._with_stats and (not self._stats or now - self._stats_at >= self._stats_refresh_s)
        topics = self._current_topics()
        # On a broker with transactions (or before that is known), each topic's stats come with its
        # layouts: their open-transaction counts say whose max read position must be asked.
        with_txn_counts = self._transactions is not False
        # Topics are asked about a few at a time: at 100 topics, one after the other is 100 round trips.
        outcomes = self._each(lambda topic: self._fetch_topic(topic, with_stats, with_txn_counts), topics)
        if self._on_topics is not None:
            # After the layouts: a producer registers its schema before it writes, so a schema found
            # missing here was missing for every entry these layouts hold (asked before the layouts,
            # a producer connecting in between wrote entries of a schema never checked).
            self._on_topics(topics)
        open_transactions: dict[str, int | None] = {}
        pending: dict[str, int] = {}
        throttled: dict[str, int | None] = {}
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
            open_transactions.update(outcome[2])
            pending.update(outcome[3])
            throttled.update(outcome[4])
            self._seen.add(topic)
        ordered = {p: layouts[p] for p in sorted(layouts, key=partition_sort_key)}
        self._built = ordered  # the next refresh reuses the layouts of partitions that did not move
        if with_stats:
            self._stats, self._stats_at, self._throttled = stats, now, throttled
        stress = {p: BrokerStress(pending[p], self._throttled.get(p)) for p in ordered if p in pending}
        return CatalogSnapshot(now, ordered, self._stats, self._max_read_positions(ordered, open_transactions),
                               self._stats_at, stress)

    def _each(self, fetch: Callable[[T], R], items: Sequence[T]) -> list[R | TopicNotFound]:
        """fetch(item) for each item, CONCURRENT_REQUESTS at a time, in order; a TopicNotFound is
        returned in its item's place, any other error raised."""
        def one(item: T) -> R | TopicNotFound:
            try:
                return fetch(item)
            except TopicNotFound as e:
                return e
        if len(items) <= 1:
            return [one(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(CONCURRENT_REQUESTS, thread_name_prefix="pulsar-metadata")
        return list(self._pool.map(one, items))

    def close(self) -> None:
        self._refresh.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _max_read_positions(self, layouts: dict[str, PartitionLayout],
                            open_transactions: dict[str, int | None]) -> dict[str, EntryPosition]:
        """Each partition's transaction max read position, asked only where entries lie past the last
        one known and a transaction is open (without one it is simply the newest entry). The counts
        of open transactions were read after the layouts: a partition with none then dispatches
        every entry of its layout. One partition is asked in any case until the broker is known to
        run transactions or not (a broker without them refuses the request)."""
        if self._transactions is False:
            return {}
        moved = [name for name, layout in layouts.items() if self._past_max_read(name, layout)]
        settled = [name for name in moved if open_transactions.get(name) == 0]
        asked = [name for name in moved if open_transactions.get(name) != 0]  # open, or a broker too old to say
        if self._transactions is None and not asked and settled:
            asked, settled = settled[:1], settled[1:]
        try:
            answers = self._each(lambda name: self._admin.max_read_position(TopicName.parse(name)), asked)
        except TransactionsDisabled:
            self._transactions = False
            return {}
        for name in settled:
            self._max_read[name] = layouts[name].latest
        for name, answer in zip(asked, answers, strict=True):
            if isinstance(answer, TopicNotFound):
                continue
            self._transactions = True
            # No open transaction: nothing is held back up to the newest entry seen now.
            latest = layouts[name].latest
            self._max_read[name] = latest if answer is None else min(latest, EntryPosition.parse(answer, f"max read position of {name}"))
        return {name: self._max_read[name] for name in layouts if name in self._max_read}

    def _past_max_read(self, partition: str, layout: PartitionLayout) -> bool:
        """Whether entries lie past the partition's last known max read position."""
        known = self._max_read.get(partition)
        return known is None or layout.latest > known

    def _fetch_topic(self, topic: TopicName, with_stats: bool, with_txn_counts: bool
                     ) -> tuple[dict[str, PartitionLayout], dict[str, PublishStats], dict[str, int | None],
                                dict[str, int], dict[str, int | None]]:
        """The topic's partition layouts, then (asked after them) its publish stats and, where entries
        lie past a known max read position, its open transactions per partition; and the congestion
        counters both carry (pending adds, the other subscriptions' throttling counters)."""
        layouts: dict[str, PartitionLayout] = {}
        stats: dict[str, PublishStats] = {}
        open_transactions: dict[str, int | None] = {}
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
        with_txn_counts = with_txn_counts and any(self._past_max_read(name, layout) for name, layout in layouts.items())
        topic_stats: dict[str, dict] = {}
        if with_stats or with_txn_counts:
            topic_stats = self._admin.partitioned_stats(topic) if partitioned else {str(topic): self._admin.stats(topic)}
        for name, s in topic_stats.items():
            if with_stats:
                stats[name] = _publish_stats(s)
                throttled[name] = throttled_events(s, self._own_subscription)
            if with_txn_counts:
                open_transactions[name] = _open_transactions(s)
        return layouts, stats, open_transactions, pending, throttled


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


def _open_transactions(s: dict) -> int | None:
    """A partition's open transactions (None: a broker too old to report them)."""
    count = s.get("ongoingTxnCount")
    return None if count is None else int(count)


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
