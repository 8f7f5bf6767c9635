"""Unit tests of the admission passes (allocation) and of the plans they advance (partition_plan), on hand-built
buckets (no store, no clock)."""

from __future__ import annotations

import math
from dataclasses import replace

from pulsar_throttled_source.backlog_values import BacklogValues, LearnedBacklog
from pulsar_throttled_source.quota_settings import QuotaConfig, Rate
from pulsar_throttled_source.throttling.allocation import (
    FIRST_READ_REASON,
    SHARE_REASON,
    RotatingCursor,
    admit,
    fit,
    proportional_shares,
)
from pulsar_throttled_source.throttling.buckets import Bucket, BucketSpec
from pulsar_throttled_source.throttling.demands import SOURCE_LEVEL, TOPIC_LEVEL, PartitionDemand
from pulsar_throttled_source.throttling.partition_plan import PartitionPlan, new_plan

TOPIC = "persistent://public/default/t"


def bucket(level: str = TOPIC_LEVEL, msgs: float = math.inf, bytes_: float = math.inf, used: float = 0.0) -> Bucket:
    label = level
    return Bucket(BucketSpec(f"{level}:{msgs}:{bytes_}", level, label, 1, msgs, bytes_), 1000, used, 0.0)


def plan(
    index: int = 0,
    backlog: int = 100,
    buckets: list[Bucket] | None = None,
    entry_bytes: float = 10.0,
    msgs_per_entry: float = 1.0,
    max_entries: int | None = None,
    unthrottled: str | None = None,
) -> PartitionPlan:
    demand = PartitionDemand(
        partition=f"{TOPIC}-partition-{index}",
        subscription="sub",
        backlog_entries=backlog,
        bytes_for=lambda k: k * entry_bytes,
        learn_backlog=None,
    )
    p = PartitionPlan(
        demand=demand,
        index=index,
        specs=[b.spec for b in buckets or []],
        msgs_per_entry=msgs_per_entry,
        max_entries=backlog if max_entries is None else max_entries,
        unthrottled=unthrottled,
    )
    p.buckets = list(buckets or [])
    return p


# --- new_plan: whether throttling applies ------------------------------------------------


def _spec(msgs: float, size: float = math.inf) -> BucketSpec:
    return BucketSpec("k", TOPIC_LEVEL, "topic", 1, msgs, size)


def test_new_plan_reasons_for_not_throttling() -> None:
    config = QuotaConfig(source=Rate(), mode="batch", throttle_non_backlog=False, non_backlog_threshold_entries=5)
    d = plan(backlog=5).demand
    assert new_plan(d, 0, [_spec(10)], config, unthrottled=True).unthrottled == "ReadAllAvailable"
    assert new_plan(d, 0, [], config, unthrottled=False).unthrottled == "no quota"
    assert new_plan(d, 0, [_spec(10)], config, False).unthrottled == "auto-off: backlog 5 <= threshold 5"
    assert new_plan(plan(backlog=6).demand, 0, [_spec(10)], config, False).unthrottled is None


def test_new_plan_prices_entries_and_caps_a_precise_first_read() -> None:
    batch = QuotaConfig(source=Rate(), mode="batch")
    precise = QuotaConfig(source=Rate(), mode="precise")
    asked: list[float] = []

    def seven_each(msgs: float, size: float) -> LearnedBacklog:
        asked.append(msgs)
        return LearnedBacklog(BacklogValues((7,) * 3))

    d = plan(backlog=50).demand
    known_demand = replace(d, learn_backlog=seven_each)
    assert new_plan(known_demand, 0, [_spec(10)], batch, False).msgs_per_entry == 1.0 and asked == []
    first = new_plan(d, 0, [_spec(10)], precise, False)
    assert (first.msgs_per_entry, first.max_entries) == (1.0, 1)
    known = new_plan(known_demand, 0, [_spec(10), _spec(30)], precise, False)
    assert (known.msgs_per_entry, known.max_entries, known.msgs(2), known.msgs(4)) == (7.0, 50, 14.0, 28.0)
    assert asked == [10]  # the entries the tightest quota could admit
    # Only a message limit needs to know the entries; a byte-only quota reads on.
    assert new_plan(d, 0, [_spec(math.inf)], precise, False).max_entries == 50


def test_new_plan_admits_no_further_than_the_entries_known_before_one_still_looked_up() -> None:
    precise = QuotaConfig(source=Rate(), mode="precise")
    batch = QuotaConfig(source=Rate(), mode="batch")
    d = plan(backlog=50).demand
    for reach, cap in ((3, 3), (0, 1)):  # at least one entry, as when nothing is known
        late = replace(d, learn_backlog=lambda m, s, r=reach: LearnedBacklog(BacklogValues((7,) * 3), reach=r))
        assert new_plan(late, 0, [_spec(1_000)], precise, False).max_entries == cap
        assert new_plan(late, 0, [_spec(math.inf, 10_000)], batch, False).max_entries == cap  # bytes too
        assert new_plan(late, 0, [_spec(1_000)], precise, True).max_entries == 50  # unthrottled: not capped



def test_a_byte_quota_in_precise_mode_charges_and_reports_the_messages_its_entries_hold() -> None:
    """The entries a byte quota looked up also say their messages: a plan of 10-message entries is
    not reported (nor charged) as one message per entry."""
    precise = QuotaConfig(source=Rate(), mode="precise")
    batch = QuotaConfig(source=Rate(), mode="batch")
    d = replace(plan(backlog=50).demand, learn_backlog=lambda m, s: LearnedBacklog(BacklogValues((10,) * 3), BacklogValues((1_100,) * 3)))
    by_bytes = new_plan(d, 0, [_spec(math.inf, 40_000)], precise, False)
    assert (by_bytes.msgs(7), by_bytes.max_entries) == (70.0, 50)
    assert new_plan(d, 0, [_spec(math.inf, 40_000)], batch, False).msgs(7) == 7.0  # batch mode: an entry is a message

# --- rotating order ----------------------------------------------------------------------


def test_rotating_cursor_puts_partitions_served_longest_ago_first() -> None:
    cursor = RotatingCursor()
    plans = [plan(i) for i in range(3)]
    cursor.next_call()
    assert [p.index for p in cursor.order(plans)] == [0, 1, 2]  # never served: caller's order
    plans[0].entries = 1
    cursor.record(plans)
    cursor.next_call()
    plans[0].entries, plans[1].entries = 0, 1
    cursor.record(plans)
    assert [p.index for p in cursor.order(plans)] == [2, 0, 1]


# --- proportional shares -----------------------------------------------------------------


def test_proportional_shares_split_the_source_remainder_by_weight() -> None:
    source = bucket(SOURCE_LEVEL, msgs=100, bytes_=1000, used=20)
    a, b = plan(0, backlog=300), plan(1, backlog=100)
    shares = proportional_shares([a, b], source, lambda p: p.backlog)
    assert shares == {id(a): (60.0, 750.0), id(b): (20.0, 250.0)}
    assert proportional_shares([a, b], None, lambda p: p.backlog) == {}
    assert proportional_shares([], source, lambda p: p.backlog) == {}
    assert proportional_shares([a, b], source, lambda p: 0) == {}


# --- fit ---------------------------------------------------------------------------------


def test_fit_stops_at_the_tightest_cap_and_names_it() -> None:
    topic = bucket(msgs=30)
    p = plan(buckets=[topic])
    fit(p, (50.0, math.inf), precise=False, one_entry_minimum=True)
    assert (p.entries, p.held_back, p.limited_by_share) == (30, "topic quota exhausted (msgs)", False)
    assert topic.used_msgs == 30.0 and topic.charged_bytes == 300.0


def test_fit_held_back_by_its_share_may_get_more_later() -> None:
    p = plan(buckets=[bucket(SOURCE_LEVEL, msgs=100)])
    fit(p, (40.0, math.inf), precise=False, one_entry_minimum=True)
    assert (p.entries, p.held_back, p.limited_by_share) == (40, SHARE_REASON, True)
    fit(p, None, precise=False, one_entry_minimum=False, most=1)  # a pass-3 round
    assert (p.entries, p.limited_by_share) == (41, True)


def test_fit_on_an_exhausted_bucket_admits_nothing() -> None:
    p = plan(buckets=[bucket(msgs=10, used=12)])
    fit(p, None, precise=False, one_entry_minimum=True)
    assert (p.entries, p.held_back) == (0, "topic quota exhausted (msgs, debt 2)")


def test_fit_one_entry_minimum_and_a_quota_too_small_for_the_next_entry() -> None:
    # 10-byte quota, 25-byte entries: one entry by the minimum (its excess becomes debt)...
    first = plan(buckets=[bucket(bytes_=10)], entry_bytes=25)
    fit(first, None, precise=False, one_entry_minimum=True)
    assert (first.entries, first.held_back) == (1, "topic quota exhausted (bytes, debt 15)")
    # ...but not in the later passes, which say how much is left instead.
    later = plan(buckets=[bucket(bytes_=10)], entry_bytes=25)
    fit(later, None, precise=False, one_entry_minimum=False)
    assert (later.entries, later.held_back) == (0, "topic quota too small for the next entry (bytes, 10 left)")


def test_fit_precise_mode_admits_up_to_half_an_entry_over_the_message_quota() -> None:
    precise = plan(buckets=[bucket(msgs=499)], msgs_per_entry=10.0)
    fit(precise, None, precise=True, one_entry_minimum=True)
    assert precise.entries == 50  # 500 msgs: 1 over, less than half an entry
    batch = plan(buckets=[bucket(msgs=499)], msgs_per_entry=10.0)
    fit(batch, None, precise=False, one_entry_minimum=True)
    assert batch.entries == 49


def test_fit_first_read_without_an_estimate() -> None:
    p = plan(buckets=[bucket(msgs=500)], max_entries=1)
    fit(p, None, precise=True, one_entry_minimum=True)
    assert (p.entries, p.held_back) == (1, FIRST_READ_REASON)


# --- the passes together -----------------------------------------------------------------


def test_admit_unthrottled_first_then_the_others_see_its_charge() -> None:
    topic = bucket(msgs=10)
    free = plan(0, backlog=8, buckets=[topic], unthrottled="ReadAllAvailable")
    throttled = plan(1, backlog=8, buckets=[topic])
    admit([throttled, free], None, RotatingCursor(), precise=False)
    assert (free.entries, free.held_back) == (8, None)
    assert (throttled.entries, throttled.held_back) == (2, "topic quota exhausted (msgs)")


def test_admit_second_pass_hands_on_what_a_capped_partition_left() -> None:
    source = bucket(SOURCE_LEVEL, msgs=100)
    capped = plan(0, backlog=300, buckets=[source, bucket(msgs=30)])
    other = plan(1, backlog=100, buckets=[source])
    admit([capped, other], source, RotatingCursor(), precise=False)
    assert (capped.entries, other.entries) == (30, 70)
    # The shares used the source bucket up: held back by it, not by "its share".
    assert other.held_back == "source-wide quota exhausted (msgs)"


def test_admit_third_pass_spreads_a_rounding_rest_one_entry_each() -> None:
    source = bucket(SOURCE_LEVEL, msgs=50)
    plans = [plan(i, buckets=[source]) for i in range(3)]
    admit(plans, source, RotatingCursor(), precise=False)
    assert [p.entries for p in plans] == [17, 17, 16]
    assert source.used_msgs == 50.0


def test_admit_serves_in_rotating_order_when_the_quota_is_one_entry() -> None:
    cursor = RotatingCursor()
    served = []
    for _ in range(3):
        cursor.next_call()
        source = bucket(SOURCE_LEVEL, msgs=1)
        plans = [plan(i, backlog=10, buckets=[source]) for i in range(3)]
        admit(plans, source, cursor, precise=False)
        cursor.record(plans)
        served += [p.index for p in plans if p.entries]
    assert served == [0, 1, 2]
