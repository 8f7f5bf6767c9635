"""The partition catalog and the broker-policy reader on a fake admin API and a fake clock:
what is asked of the broker, when, and what a snapshot holds."""

from __future__ import annotations

import pytest
from builders import URLS, catalog_of
from fakes import FakeAdmin, FakeClock

from pulsar_throttled_source.metadata.admin_http import TopicNotFound
from pulsar_throttled_source.metadata.catalog import CatalogSettings, PartitionCatalog, stats_refresh_s
from pulsar_throttled_source.metadata.policies import BrokerPolicies, rate_from_policy
from pulsar_throttled_source.metadata.request_pool import RequestPool
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.quota_settings import Rate
from pulsar_throttled_source.topics import TopicName

NS = "persistent://public/default"


def catalog(admin: FakeAdmin, clock: FakeClock, *topics: str, pattern: str | None = None) -> PartitionCatalog:
    """A stream's catalog (the publish counters every policyRefreshIntervalMs, 30 s), refreshed every second."""
    return catalog_of(admin, clock, *topics, pattern=pattern)


def test_a_snapshot_is_reused_within_the_refresh_interval_and_the_partition_count_asked_once():
    admin, clock = FakeAdmin(), FakeClock(100.0)
    admin.partitions[f"{NS}/t"] = 2
    cat = catalog(admin, clock, f"{NS}/t")
    first = cat.snapshot()
    assert list(first.layouts) == [f"{NS}/t-partition-0", f"{NS}/t-partition-1"]
    asked = len(admin.calls)
    clock.now += 0.9
    assert cat.snapshot() is first and len(admin.calls) == asked  # an idle poll asks nothing
    clock.now += 0.2
    admin.partitions[f"{NS}/t"] = 3  # grown: new partitions show in the partitioned stats
    assert len(cat.snapshot().layouts) == 3
    assert sum(c.startswith("partition_count") for c in admin.calls) == 1
    cached = cat.snapshot()
    assert cat.snapshot(force=True) is not cached  # force refetches


def test_a_named_topic_that_never_existed_fails_but_one_deleted_later_drops_out():
    admin, clock = FakeAdmin(), FakeClock(100.0)
    with pytest.raises(TopicNotFound):
        catalog(admin, clock, f"{NS}/missing").snapshot()
    admin.partitions.update({f"{NS}/a": 0, f"{NS}/b": 0})
    cat = catalog(admin, clock, f"{NS}/a", f"{NS}/b")
    assert list(cat.snapshot().layouts) == [f"{NS}/a", f"{NS}/b"]
    del admin.partitions[f"{NS}/b"]
    assert list(cat.snapshot(force=True).layouts) == [f"{NS}/a"]  # the planner decides what that means


def test_a_pattern_reads_matching_topics_of_the_namespace_skipping_system_topics():
    admin, clock = FakeAdmin(), FakeClock(100.0)
    admin.partitions.update({f"{NS}/orders-eu": 2, f"{NS}/orders-us": 0, f"{NS}/payments": 0})
    cat = catalog(admin, clock, pattern=f"{NS}/orders-.*")
    assert list(cat.snapshot().layouts) == [f"{NS}/orders-eu-partition-0", f"{NS}/orders-eu-partition-1", f"{NS}/orders-us"]
    admin.partitions[f"{NS}/orders-apac"] = 0
    assert f"{NS}/orders-apac" in cat.snapshot(force=True).layouts


@pytest.mark.parametrize("reports_open_transactions", [True, False], ids=["open transactions in stats", "older broker"])
def test_max_read_position_is_asked_only_for_new_entries_and_caps_an_open_transaction(reports_open_transactions):
    admin, clock = FakeAdmin(), FakeClock(100.0)
    admin.reports_open_transactions = reports_open_transactions
    t = f"{NS}/tx"
    admin.partitions[t] = 0
    admin.entries[t] = 10
    admin.max_read[t] = "7:3"  # a transaction opened after entry 7:3
    cat = catalog(admin, clock, t)
    snap = cat.snapshot()
    assert snap.readable_end(t) == EntryPosition(7, 3) and snap.layouts[t].latest == EntryPosition(7, 9)
    assert cat.snapshot(force=True).readable_end(t) == EntryPosition(7, 3)  # asked again: entries lie past the cap
    admin.max_read[t] = None  # committed: nothing held back any more
    assert cat.snapshot(force=True).readable_end(t) == EntryPosition(7, 9)
    assert cat.snapshot(force=True).readable_end(t) == EntryPosition(7, 9)  # nothing new: not asked
    admin.entries[t] = 12
    assert cat.snapshot(force=True).readable_end(t) == EntryPosition(7, 11)
    asked = [c for c in admin.calls if c.startswith("max_read_position")]
    # Asked while a transaction was open; once the stats say none is, only a broker that cannot say asks.
    assert len(asked) == (2 if reports_open_transactions else 4)


def test_a_broker_with_transactions_is_asked_max_read_positions_only_where_one_is_open():
    admin, clock = FakeAdmin(), FakeClock(100.0)
    t = f"{NS}/many"
    admin.partitions[t] = 100
    cat = catalog(admin, clock, t)
    cat.snapshot()
    assert sum(c.startswith("max_read_position") for c in admin.calls) == 1  # whether the broker runs transactions
    admin.calls.clear()
    for i in range(100):
        admin.entries[f"{t}-partition-{i}"] = 5  # every partition moved
    admin.max_read[f"{t}-partition-42"] = "7:2"  # one open transaction
    snap = cat.snapshot(force=True)
    assert admin.calls == [f"partitioned_internal_stats {t}", f"partitioned_stats {t}", f"max_read_position {t}-partition-42"]
    assert snap.readable_end(f"{t}-partition-42") == EntryPosition(7, 2)
    assert snap.readable_end(f"{t}-partition-7") == EntryPosition(7, 4)
    admin.calls.clear()
    admin.max_read[f"{t}-partition-42"] = None  # committed
    cat.snapshot(force=True)  # only partition 42 has entries past its max read position
    assert admin.calls == [f"partitioned_internal_stats {t}", f"partitioned_stats {t}"]
    admin.calls.clear()
    assert cat.snapshot(force=True).readable_end(f"{t}-partition-42") == EntryPosition(7, 4)
    assert admin.calls == [f"partitioned_internal_stats {t}"]  # nothing moved: the layouts alone


def test_a_broker_without_transactions_is_asked_once():
    admin, clock = FakeAdmin(), FakeClock(100.0)
    admin.partitions[f"{NS}/plain"] = 0
    admin.transactions = False
    cat = catalog(admin, clock, f"{NS}/plain")
    for n in (5, 6, 7):
        admin.entries[f"{NS}/plain"] = n
        assert cat.snapshot(force=True).readable_end(f"{NS}/plain") == EntryPosition(7, n - 1)
    assert sum(c.startswith("max_read_position") for c in admin.calls) == 1
    assert sum(c.startswith("stats") for c in admin.calls) == 1  # open transactions asked with the first layouts only


def test_rate_from_policy_treats_zero_or_less_as_no_limit():
    assert rate_from_policy(None) is None
    assert rate_from_policy({"dispatchThrottlingRateInMsg": 0, "dispatchThrottlingRateInByte": -1}) is None
    assert rate_from_policy({"dispatchThrottlingRateInMsg": 50, "dispatchThrottlingRateInByte": 0, "ratePeriodInSecond": 2,
                             "relativeToPublishRate": True}) == Rate(50, -1, 2, True)


def test_broker_policies_are_reread_after_the_refresh_interval():
    admin, clock = FakeAdmin(), FakeClock(100.0)
    t = TopicName.parse(f"{NS}/t")
    admin.policies[f"topic {t}"] = {"dispatchThrottlingRateInMsg": 100, "ratePeriodInSecond": 1}
    policies = BrokerPolicies(admin, 30_000, clock)  # type: ignore[arg-type]
    assert policies.rates(t) == (Rate(100, -1, 1, False), None)
    admin.policies[f"subscription {t}"] = {"dispatchThrottlingRateInByte": 4096, "ratePeriodInSecond": 1}
    clock.now += 29
    assert policies.rates(t) == (Rate(100, -1, 1, False), None)  # cached
    clock.now += 2
    assert policies.rates(t) == (Rate(100, -1, 1, False), Rate(-1, 4096, 1, False))
    assert sum(c.startswith("dispatch_rate") for c in admin.calls) == 2


def test_publish_stats_are_asked_every_refresh_only_when_rates_must_be_live():
    """Stats are a second request per topic: live counters only for relative quotas, else at most
    every stats_refresh_s, each snapshot saying when its stats were fetched."""
    relative = {"dispatchThrottlingRatePerTopicInMsg": 10, "relativeToPublishRate": "true"}
    for options, refresh_s, expected in ((relative, 0.0, 5), ({}, 30.0, 2)):
        admin, clock = FakeAdmin(), FakeClock(100.0)
        admin.transactions = False  # with transactions, stats come with every refresh for their open transactions
        admin.partitions[f"{NS}/t"] = 2
        cat = catalog_of(admin, clock, f"{NS}/t", **options)
        for _ in range(5):
            snap = cat.snapshot()
            assert set(snap.stats) == set(snap.layouts)
            clock.now += 10.0
        assert sum(c.startswith("partitioned_stats") for c in admin.calls) == expected
        assert sum(c.startswith("partitioned_internal_stats") for c in admin.calls) == 5  # layouts: every refresh
        assert snap.fetched_at == 140.0 and snap.stats_at == (140.0 if refresh_s == 0 else 130.0)


def test_topics_are_checked_after_their_layouts_so_a_producer_connecting_between_is_seen():
    """A pattern query's schema check (on_topics) sees a topic's schema as of after its layout was
    read: a producer registers its schema before it writes, so nothing the snapshot holds was
    written under a schema the check did not see (it once ran first and let such entries through)."""
    admin, clock = FakeAdmin(), FakeClock(100.0)
    schemas: dict[str, str] = {}
    admin.partitions[f"{NS}/p-json"] = 0
    read_layout = admin.internal_stats

    def producer_connects_and_writes(topic: TopicName) -> dict:
        schemas[str(topic)] = "JSON"  # registered at connect, before the entry the layout shows
        return read_layout(topic)
    admin.internal_stats = producer_connects_and_writes  # type: ignore[method-assign]

    def check(topics: list[TopicName]) -> None:
        wrong = [str(t) for t in topics if schemas.get(str(t)) == "JSON"]
        if wrong:
            raise ValueError(f"schema JSON on {wrong}")
    cat = catalog_of(admin, clock, pattern=f"{NS}/p-.*", on_topics=check)
    with pytest.raises(ValueError, match="p-json"):
        cat.snapshot()


def test_snapshots_carry_pending_adds_and_the_other_subscriptions_throttling_counters():
    """adaptiveThrottling's signals read what the catalog fetches anyway: pendingAddEntriesCount from the internal
    stats of every refresh, the others' dispatchThrottled* counters with the stats (not the query's own subscription)."""
    admin, clock = FakeAdmin(), FakeClock(100.0)
    admin.transactions = False
    admin.partitions[f"{NS}/t"] = 2
    read_layout, read_stats = admin.partitioned_internal_stats, admin.partitioned_stats

    def with_pending(topic):
        return {p: {**s, "pendingAddEntriesCount": 3} for p, s in read_layout(topic).items()}

    def with_subscriptions(topic):
        subs = {"billing": {"durable": True, "dispatchThrottledMsgEventsBySubscriptionLimit": 4},
                "ingest": {"durable": True, "dispatchThrottledMsgEventsByTopicLimit": 100}}  # the query's own
        return {p: {**s, "subscriptions": subs} for p, s in read_stats(topic).items()}
    admin.partitioned_internal_stats, admin.partitioned_stats = with_pending, with_subscriptions  # type: ignore[method-assign]
    cat = catalog_of(admin, clock, f"{NS}/t", subscription="ingest")
    stress = cat.snapshot().stress
    assert {p: (s.pending_adds, s.throttled_events) for p, s in stress.items()} == {
        f"{NS}/t-partition-0": (3, 4), f"{NS}/t-partition-1": (3, 4)}


@pytest.mark.parametrize(("extra", "streaming", "expected"), [
    ({}, True, 30.0),  # a stream without live needs: messages per entry only, every policyRefreshIntervalMs
    ({"policyRefreshIntervalMs": "5000"}, True, 5.0),
    ({"dispatchThrottlingRatePerTopicInMsg": "10", "relativeToPublishRate": "true"}, True, 0.0),
    ({"quotaSource": "broker"}, True, 0.0),
    ({}, False, 0.0),  # a one-shot plan (batch query, status command): the counters with every snapshot
])
def test_every_caller_builds_its_catalog_with_the_stats_cadence_its_options_need(extra, streaming, expected):
    options = parse_options({**URLS, "topic": f"{NS}/t", **extra})
    assert stats_refresh_s(options, streaming) == expected
    admin = FakeAdmin()
    admin.partitions[f"{NS}/t"] = 2
    assert CatalogSettings.of(options, streaming=streaming).in_background == streaming  # a stream's refresh thread
    cat = PartitionCatalog(admin, CatalogSettings.of(options, streaming=False))  # type: ignore[arg-type]
    try:
        snap = cat.snapshot(force=True)  # the named topics' partitions, with their counters at the first fetch
        assert set(snap.layouts) == set(snap.stats) == {f"{NS}/t-partition-0", f"{NS}/t-partition-1"}
    finally:
        cat.close()


def test_the_request_pool_answers_in_order_with_a_missing_topic_in_its_place_and_raises_any_other_error():
    pool = RequestPool()
    try:
        def fetch(n: int) -> int:
            if n == 2:
                raise TopicNotFound(f"topic {n}")
            return n * 10
        answers = pool.each(fetch, [1, 2, 3, 4, 5])
        assert answers[:1] + answers[2:] == [10, 30, 40, 50] and isinstance(answers[1], TopicNotFound)

        def broken(n: int) -> int:
            raise RuntimeError("HTTP 500")
        with pytest.raises(RuntimeError, match="HTTP 500"):
            pool.each(broken, [1, 2])
    finally:
        pool.close()
