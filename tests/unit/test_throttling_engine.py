"""Unit tests of the quota engine: exact numbers, driven by a fake clock."""

from __future__ import annotations

import pytest
from builders import P0, P1, TOPIC, demand, entries, stored_keys
from fakes import FakeClock
from memory_quota_store import MemoryQuotaStore

from pulsar_throttled_source.quota_settings import QuotaConfig, Rate
from pulsar_throttled_source.throttling.demands import Admission
from pulsar_throttled_source.throttling.engine import QuotaEngine
from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore

P2 = f"{TOPIC}-partition-2"
P3 = f"{TOPIC}-partition-3"
UNLIMITED = Rate()


def engine(
    clock: FakeClock,
    store: MemoryQuotaStore | SqliteQuotaStore | None = None,
    source: Rate = UNLIMITED,
    mode: str = "batch",
    query_id: str = "q",
    **config: object,
) -> QuotaEngine:
    return QuotaEngine(
        QuotaConfig(source=source, mode=mode, query_id=query_id, **config),  # type: ignore[arg-type]
        store if store is not None else MemoryQuotaStore(),
        clock=clock,
    )


# --- windows and debt --------------------------------------------------------------------


def test_debt_example_from_the_docs_30_admitted_then_0_0_then_10() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock)
    topic = Rate(msgs=10)

    # Window 1: 30 admitted (ReadAllAvailable over-admits; the buckets are still charged).
    assert entries(quota.plan([demand(backlog=30, topic=topic)], unthrottled=True).admissions) == [30]

    clock.advance(1)  # window 2
    [second] = quota.plan([demand(topic=topic)]).admissions
    assert second.entries == 0
    assert second.held_back == "topic quota exhausted (msgs, debt 10)"
    clock.advance(1)  # window 3
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [0]
    clock.advance(1)  # window 4
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [10]
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [0]  # same window: used up


def test_unused_quota_is_lost_not_saved_up() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock)
    topic = Rate(msgs=10)
    assert entries(quota.plan([demand(backlog=3, topic=topic)]).admissions) == [3]
    clock.advance(5)  # five idle windows do not add up to 50
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [10]


def test_windows_of_five_seconds() -> None:
    clock = FakeClock(1000.0)  # window 200 of 5 s
    quota = engine(clock)
    topic = Rate(msgs=10, period_s=5)
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [10]
    clock.now = 1004.9  # still window 200
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [0]
    clock.now = 1005.0  # window 201
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [10]


def test_each_level_reports_the_window_its_plan_was_charged_to() -> None:
    # Progress reports it (throttle.levels.<level>.windowStartMs): what the clock said when the plan charged,
    # not when Spark's trigger started or ended.
    clock = FakeClock(1004.9)
    quota = engine(clock)
    plan = quota.plan([demand(topic=Rate(msgs=10, period_s=5))])
    assert [level.window_start_ms for level in plan.levels] == [1_000_000]
    clock.now = 1005.0
    plan = quota.plan([demand(topic=Rate(msgs=10, period_s=5))])
    assert [level.window_start_ms for level in plan.levels] == [1_005_000]


def test_windows_are_epoch_aligned_so_a_late_starter_shares_the_window() -> None:
    store = MemoryQuotaStore()
    first = engine(FakeClock(1000.2), store, query_id="a")
    second = engine(FakeClock(1000.9), store, query_id="b")
    topic = Rate(msgs=10)
    assert entries(first.plan([demand(backlog=4, topic=topic)]).admissions) == [4]
    assert entries(second.plan([demand(topic=topic)]).admissions) == [6]


def test_a_process_with_a_late_clock_does_not_reset_a_newer_window() -> None:
    store = MemoryQuotaStore()
    ahead = engine(FakeClock(1001.0), store)
    behind = engine(FakeClock(1000.5), store)
    topic = Rate(msgs=10)
    assert entries(ahead.plan([demand(topic=topic)]).admissions) == [10]
    assert entries(behind.plan([demand(topic=topic)]).admissions) == [0]


# --- levels and units are ANDed ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "topic", "subscription", "expected", "reason"),
    [
        (100, 20, 50, 20, "topic quota exhausted (msgs)"),
        (100, 200, 30, 30, "subscription quota exhausted (msgs)"),
        (5, 20, 50, 5, "source-wide quota exhausted (msgs)"),
    ],
)
def test_levels_are_anded_and_the_tightest_wins(
    source: int, topic: int, subscription: int, expected: int, reason: str
) -> None:
    quota = engine(FakeClock(), source=Rate(msgs=source))
    [admission] = quota.plan([demand(topic=Rate(msgs=topic), subscription=Rate(msgs=subscription))]).admissions
    assert admission.entries == expected
    assert admission.msgs == expected
    assert admission.held_back == reason


@pytest.mark.parametrize(
    ("rate", "expected", "unit"),
    [
        (Rate(msgs=10, bytes=500), 5, "bytes"),  # 100-byte entries: bytes are tighter
        (Rate(msgs=3, bytes=500), 3, "msgs"),  # messages are tighter
    ],
)
def test_message_and_byte_limits_are_anded(rate: Rate, expected: int, unit: str) -> None:
    quota = engine(FakeClock())
    [admission] = quota.plan([demand(entry_bytes=100, topic=rate)]).admissions
    assert admission.entries == expected
    assert admission.bytes == expected * 100
    assert admission.held_back == f"topic quota exhausted ({unit})"


def test_topic_quota_from_options_and_broker_are_anded_with_separate_buckets() -> None:
    store = MemoryQuotaStore()
    quota = engine(FakeClock(), store)
    rates = (("options", Rate(msgs=20)), ("broker", Rate(msgs=5)))
    [admission] = quota.plan([demand(topic_rates=rates)]).admissions
    assert admission.entries == 5
    assert admission.held_back == "broker topic quota exhausted (msgs)"
    assert stored_keys(store) == [f"topic:broker:{P0}", f"topic:options:{P0}"]


def test_each_partition_of_a_topic_has_its_own_topic_bucket() -> None:
    store = MemoryQuotaStore()
    quota = engine(FakeClock(), store)
    topic = Rate(msgs=10)
    demands = [demand(P0, topic=topic), demand(P1, topic=topic)]
    assert entries(quota.plan(demands).admissions) == [10, 10]
    assert entries(quota.plan(demands).admissions) == [0, 0]
    assert stored_keys(store) == [f"topic:options:{P0}", f"topic:options:{P1}"]


def test_two_subscriptions_on_one_partition_share_the_topic_bucket_only() -> None:
    store = MemoryQuotaStore()
    clock = FakeClock()
    first = engine(clock, store, query_id="q1")
    second = engine(clock, store, query_id="q2")
    topic, subscription = Rate(msgs=10), Rate(msgs=6)

    [a] = first.plan([demand(topic=topic, subscription=subscription, subscription_name="s1")]).admissions
    [b] = second.plan([demand(topic=topic, subscription=subscription, subscription_name="s2")]).admissions
    assert (a.entries, a.held_back) == (6, "subscription quota exhausted (msgs)")
    assert (b.entries, b.held_back) == (4, "topic quota exhausted (msgs)")
    assert stored_keys(store) == [
        f"subscription:options:s1:{P0}",
        f"subscription:options:s2:{P0}",
        f"topic:options:{P0}",
    ]


# --- batch and precise mode --------------------------------------------------------------


def test_batch_mode_is_exact_over_many_windows_and_polls() -> None:
    clock = FakeClock(1000.0)
    store = MemoryQuotaStore()
    quota = engine(clock, store, mode="batch")
    topic = Rate(msgs=50)
    for _ in range(20):
        per_window = []
        for offset in (0.0, 0.3, 0.6):  # several micro-batches within one window
            clock.now = float(int(clock.now)) + offset
            [admission] = quota.plan([demand(msgs_per_entry=10, topic=topic)]).admissions
            assert admission.msgs == admission.entries  # one entry counts as one message
            per_window.append(admission.entries)
        assert per_window == [50, 0, 0]
        clock.now = float(int(clock.now)) + 1.0


def test_precise_mode_converts_messages_to_entries_by_what_they_hold() -> None:
    quota = engine(FakeClock(), mode="precise")
    [admission] = quota.plan([demand(msgs_per_entry=10, topic=Rate(msgs=500))]).admissions
    assert (admission.entries, admission.msgs) == (50, 500.0)


@pytest.mark.parametrize("history", ["batched then single", "single then batched"])
def test_precise_mode_prices_the_entries_it_admits_when_batching_changes(history: str) -> None:
    # The topic's batching changed: what the planner admits holds the quota, window after window,
    # whatever the topic's lifetime average.
    batched, single = [10] * 30, [1] * 300
    counts = batched + single if history == "batched then single" else single + batched
    clock = FakeClock(1000.0)
    quota = engine(clock, mode="precise")
    delivered = []
    while counts:
        [admission] = quota.plan([demand(backlog=len(counts), msgs_per_entry=counts, topic=Rate(msgs=100))]).admissions
        read = counts[:admission.entries]
        assert admission.msgs == sum(read)  # charged what the entries hold
        delivered.append(sum(read))
        del counts[:admission.entries]
        clock.advance(1)
    assert all(abs(d - 100) <= 5 for d in delivered[:-1]) and sum(delivered) == 600


def test_idle_polls_change_nothing_in_what_a_window_admits() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock, mode="precise")
    topic = Rate(msgs=100)
    assert entries(quota.plan([demand(msgs_per_entry=10, topic=topic)]).admissions) == [10]
    for _ in range(50):  # polls while the window's quota is spent
        assert entries(quota.plan([demand(msgs_per_entry=10, topic=topic)]).admissions) == [0]
    clock.advance(1)
    assert entries(quota.plan([demand(msgs_per_entry=10, topic=topic)]).admissions) == [10]


def test_precise_mode_without_known_entries_reads_one_entry_first() -> None:
    quota = engine(FakeClock(1000.0), mode="precise")
    topic = Rate(msgs=500)
    [first] = quota.plan([demand(msgs_per_entry=None, topic=topic)]).admissions
    assert (first.entries, first.msgs) == (1, 1.0)
    assert first.held_back is not None and "not known yet" in first.held_back
    # Once the entries are known, the rest of the window's quota (499) is used: 49.9 entries of 10,
    # and precise mode admits the nearest whole entry count, 50 (1 message of debt).
    assert entries(quota.plan([demand(msgs_per_entry=10, topic=topic)]).admissions) == [50]


def test_precise_mode_rounds_to_the_nearest_entry_so_slack_does_not_drift() -> None:
    # Entries of 10, 10 and 11 messages: rounding down would admit short of the quota every window,
    # for ever; nearest-entry admits up to half an entry over and pays it back as debt, so the
    # long-run rate equals the quota.
    clock = FakeClock(1000.0)
    quota = engine(clock, mode="precise")
    topic = Rate(msgs=500)
    counts = [10, 10, 11] * 2000
    delivered = []
    for _ in range(40):
        [admission] = quota.plan([demand(backlog=len(counts), msgs_per_entry=counts, topic=topic)]).admissions
        delivered.append(sum(counts[:admission.entries]))
        del counts[:admission.entries]
        clock.advance(1)
    assert all(abs(d - 500) <= 0.05 * 500 for d in delivered)
    assert abs(sum(delivered) / len(delivered) - 500) <= 0.01 * 500


def test_precise_mode_rounds_by_the_next_entry_not_the_average_one() -> None:
    # 469 messages in, 31 left, and the next entry holds 60 (a producer batching by time): taking
    # it ends 29 over, leaving it 31 under, so it is taken. Half the *average* entry (about 5) as
    # the allowance left the window 6 % short.
    quota = engine(FakeClock(1000.0), mode="precise")
    counts = [10] * 46 + [9, 60] + [10] * 100
    [admission] = quota.plan([demand(backlog=len(counts), msgs_per_entry=counts, topic=Rate(msgs=500))]).admissions
    assert (admission.entries, admission.msgs) == (48, 529.0)
    counts = [10] * 46 + [11, 60] + [10] * 100  # 471 in, 29 left: taking it would end 31 over
    [admission] = engine(FakeClock(1000.0), mode="precise").plan(
        [demand(backlog=len(counts), msgs_per_entry=counts, topic=Rate(msgs=500))]).admissions
    assert (admission.entries, admission.msgs) == (47, 471.0)


def test_one_entry_larger_than_the_byte_quota_is_admitted_once_then_paid_back() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock, mode="precise")
    topic = Rate(bytes=1000)
    admitted = []
    for _ in range(7):
        [admission] = quota.plan([demand(entry_bytes=5000, topic=topic)]).admissions
        admitted.append(admission.entries)
        clock.advance(1)
    # 5000 bytes = five windows of quota: the next four windows admit nothing.
    assert admitted == [1, 0, 0, 0, 0, 1, 0]


def test_a_partition_without_backlog_is_not_held_back() -> None:
    [admission] = engine(FakeClock()).plan([demand(backlog=0, topic=Rate(msgs=10))]).admissions
    assert admission == Admission(P0, 0, 0.0, 0.0, None, None)


# --- source-wide split -------------------------------------------------------------------


def test_source_quota_is_split_in_proportion_to_backlog() -> None:
    quota = engine(FakeClock(), source=Rate(msgs=100))
    a, b = quota.plan([demand(P0, backlog=300), demand(P1, backlog=100)]).admissions
    assert (a.entries, b.entries) == (75, 25)
    assert a.held_back == b.held_back == "source-wide quota exhausted (msgs)"


def test_source_share_left_by_a_partition_capped_elsewhere_goes_to_the_others() -> None:
    quota = engine(FakeClock(), source=Rate(msgs=100))
    a, b = quota.plan([demand(P0, backlog=300, topic=Rate(msgs=30)), demand(P1, backlog=100)]).admissions
    assert (a.entries, b.entries) == (30, 70)
    assert a.held_back == "topic quota exhausted (msgs)"


def test_source_quota_is_used_exactly_when_shares_are_fractional() -> None:
    quota = engine(FakeClock(), source=Rate(msgs=50))
    admissions = quota.plan([demand(P0), demand(P1), demand(P2)]).admissions
    assert entries(admissions) == [17, 17, 16]


def test_no_partition_starves_when_the_source_quota_is_smaller_than_the_partition_count() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock, source=Rate(msgs=1))
    partitions = [P0, P1, P2, P3]
    served = []
    for _ in range(4):
        admissions = quota.plan([demand(p, backlog=10) for p in partitions]).admissions
        assert sum(entries(admissions)) == 1  # exactly the quota, every period
        served += [a.partition for a in admissions if a.entries]
        clock.advance(1)
    assert sorted(served) == partitions


def test_one_entry_minimum_at_source_level_only_while_source_quota_remains() -> None:
    # 10 msgs per entry, source quota 15: the first partition gets one entry by share
    # (10 <= 15), the second one by the one-entry minimum (5 left), the others nothing.
    quota = engine(FakeClock(), source=Rate(msgs=15), mode="precise")
    admissions = quota.plan([demand(p, msgs_per_entry=10) for p in (P0, P1, P2)]).admissions
    assert entries(admissions) == [1, 1, 0]
    assert admissions[2].held_back == "source-wide quota exhausted (msgs, debt 5)"


# --- relative to publish rate (PIP-52) ---------------------------------------------------


def test_relative_rate_is_publish_rate_times_period_plus_value_and_falls_gradually() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock)
    topic = Rate(msgs=10, relative_to_publish_rate=True)

    def admit(publish: float, polls: int = 1) -> list[int]:
        got = [
            quota.plan([demand(topic=topic, publish_msgs=publish)]).admissions[0].entries for _ in range(polls)
        ]
        clock.advance(1)
        return got

    assert admit(100.0) == [110]
    assert admit(200.0) == [210]  # an increase takes effect at once
    assert admit(0.0, polls=5) == [190, 0, 0, 0, 0]  # 0.9*200 + 10; polls do not collapse it
    assert admit(0.0) == [172]  # 0.9*180 + 10


def test_relative_rate_with_a_longer_period() -> None:
    quota = engine(FakeClock(1000.0))
    topic = Rate(msgs=5, period_s=5, relative_to_publish_rate=True)
    assert entries(quota.plan([demand(topic=topic, publish_msgs=10.0)]).admissions) == [55]


def test_relative_source_rate_uses_the_sum_of_publish_rates() -> None:
    quota = engine(FakeClock(1000.0), source=Rate(msgs=10, relative_to_publish_rate=True))
    admissions = quota.plan([demand(P0, publish_msgs=30.0), demand(P1, publish_msgs=60.0)]).admissions
    assert entries(admissions) == [50, 50]  # (30 + 60) + 10 = 100, split by equal backlog


def test_relative_byte_rate_and_unlimited_unit_stays_unlimited() -> None:
    quota = engine(FakeClock(1000.0))
    topic = Rate(bytes=1000, relative_to_publish_rate=True)  # msgs -1: unlimited
    [admission] = quota.plan([demand(topic=topic, publish_msgs=1e9, publish_bytes=4000.0)]).admissions
    assert admission.entries == 50  # (4000 + 1000) bytes / 100 bytes per entry


# --- when throttling does not apply ------------------------------------------------------


def test_backlog_aware_auto_off_and_its_return() -> None:
    clock = FakeClock(1000.0)
    store = MemoryQuotaStore()
    quota = engine(clock, store, throttle_non_backlog=False, non_backlog_threshold_entries=5)
    topic = Rate(msgs=2)

    [small] = quota.plan([demand(backlog=3, topic=topic)]).admissions
    assert (small.entries, small.unthrottled) == (3, "auto-off: backlog 3 <= threshold 5")
    clock.advance(1)  # used 3 -> 1 after one window's quota of 2
    [large] = quota.plan([demand(backlog=8, topic=topic)]).admissions
    assert (large.entries, large.unthrottled) == (1, None)  # throttled again, and charged
    assert large.held_back == "topic quota exhausted (msgs)"
    clock.advance(1)
    [small_again] = quota.plan([demand(backlog=4, topic=topic)]).admissions
    assert (small_again.entries, small_again.unthrottled) == (
        4,
        "auto-off: backlog 4 <= threshold 5",
    )


def test_auto_off_is_disabled_by_default() -> None:
    quota = engine(FakeClock(), non_backlog_threshold_entries=5)
    [admission] = quota.plan([demand(backlog=3, topic=Rate(msgs=2))]).admissions
    assert (admission.entries, admission.unthrottled) == (2, None)


def test_read_all_available_admits_everything_and_still_charges() -> None:
    clock = FakeClock(1000.0)
    quota = engine(clock)
    topic = Rate(msgs=10)
    [admission] = quota.plan([demand(backlog=100, topic=topic)], unthrottled=True).admissions
    assert (admission.entries, admission.unthrottled, admission.held_back) == (
        100,
        "ReadAllAvailable",
        None,
    )
    clock.advance(9)  # 100 - 9 * 10 = 10 still owed
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [0]
    clock.advance(1)
    assert entries(quota.plan([demand(topic=topic)]).admissions) == [10]


def test_no_quota_admits_everything_without_charging() -> None:
    store = MemoryQuotaStore()
    quota = engine(FakeClock(), store)
    [admission] = quota.plan([demand(backlog=123, topic=Rate(msgs=-1, bytes=-1))]).admissions
    assert (admission.entries, admission.unthrottled) == (123, "no quota")
    assert stored_keys(store) == []


def test_rate_and_config_validation() -> None:
    assert Rate().is_unlimited()
    assert Rate(msgs=0).is_unlimited()  # as in the broker, 0 disables a limit
    assert not Rate(bytes=5).is_unlimited()
    with pytest.raises(ValueError, match="period_s"):
        Rate(msgs=1, period_s=0)
    with pytest.raises(ValueError, match="mode"):
        QuotaConfig(source=Rate(), mode="both")  # type: ignore[arg-type]


# --- reporting and the sqlite store ------------------------------------------------------


def test_summary_names_held_back_partitions_and_the_level() -> None:
    quota = engine(FakeClock(), source=Rate(msgs=100))
    plan = quota.plan([demand(P0, topic=Rate(msgs=5)), demand(P1, backlog=0), demand(P2)])
    assert entries(plan.admissions) == [5, 0, 95]
    line = quota.summary(plan)
    assert "admitted 100 entries, 100 msgs" in line
    assert "on 2/2 partitions with backlog" in line
    assert "source-wide: charged 100 msgs" in line
    assert "used 100/100 msgs" in line
    assert "topic: charged 5 msgs, 500 B on 1 bucket, held back 1" in line
    assert f"{P0} (topic quota exhausted (msgs))" in line
    assert f"{P2} (source-wide quota exhausted (msgs))" in line
    assert "\n" not in line


def test_engines_share_buckets_through_a_sqlite_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "quota" / "buckets.sqlite")
    clock = FakeClock(1000.0)
    topic = Rate(msgs=10)
    first = engine(clock, SqliteQuotaStore(path), query_id="a")
    second = engine(clock, SqliteQuotaStore(path), query_id="b")
    assert entries(first.plan([demand(backlog=7, topic=topic)]).admissions) == [7]
    assert entries(second.plan([demand(topic=topic, subscription_name="other")]).admissions) == [3]
    assert entries(first.plan([demand(topic=topic)]).admissions) == [0]
    clock.advance(1)
    assert entries(engine(clock, SqliteQuotaStore(path)).plan([demand(topic=topic)]).admissions) == [10]


# --- the shared store's upkeep -------------------------------------------------------------------


def test_buckets_unused_for_a_day_are_purged_once_an_hour(tmp_path) -> None:
    import sqlite3

    from pulsar_throttled_source.throttling.engine import PURGE_EVERY_S, STALE_BUCKET_S

    path = tmp_path / "quota.sqlite"
    store = SqliteQuotaStore(str(path))
    clock = FakeClock(1000.0)
    engine(clock, store, query_id="old").plan([demand(partition="persistent://public/default/gone-partition-0",
                                                      topic=Rate(msgs=10))])
    with sqlite3.connect(path) as conn:  # that query stopped a day ago
        conn.execute("UPDATE buckets SET updated_at = updated_at - ?", (STALE_BUCKET_S + 60,))
    quota = engine(clock, store)
    quota.plan([demand(topic=Rate(msgs=10))])
    assert not [key for key in stored_keys(store) if "gone" in key] and stored_keys(store)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE buckets SET updated_at = updated_at - ?", (STALE_BUCKET_S + 60,))
    clock.advance(PURGE_EVERY_S - 1)
    quota.plan([demand(backlog=0, topic=Rate(msgs=10))])  # nothing charged, and not the hour yet
    assert stored_keys(store)
    clock.advance(1)
    quota.plan([demand(backlog=0, topic=Rate(msgs=10))])
    assert stored_keys(store) == []
