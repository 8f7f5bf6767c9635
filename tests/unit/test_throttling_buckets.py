"""Unit tests of bucket arithmetic: keys, effective quotas, windows and pay-back."""

from __future__ import annotations

import math

import pytest

from pulsar_throttled_source.throttling.buckets import (
    Bucket,
    BucketSpec,
    ChargedQuota,
    bucket_spec,
    partition_specs,
    pay_back,
    roll_forward,
    source_key,
)
from pulsar_throttled_source.throttling.demands import (
    SOURCE_LEVEL,
    SUBSCRIPTION_LEVEL,
    TOPIC_LEVEL,
    PartitionDemand,
    Rate,
)
from pulsar_throttled_source.throttling.store import BucketState

P0 = "persistent://public/default/t-partition-0"


def spec(msgs: float = 10.0, bytes_: float = math.inf, period_s: int = 1) -> BucketSpec:
    return BucketSpec("topic:options:p", TOPIC_LEVEL, "topic", period_s, msgs, bytes_)


def demand(**kwargs: object) -> PartitionDemand:
    defaults: dict[str, object] = dict(
        partition=P0,
        subscription="sub",
        backlog_entries=10,
        bytes_for=lambda k: float(k),
        learn_backlog=None,
    )
    return PartitionDemand(**{**defaults, **kwargs})  # type: ignore[arg-type]


# --- effective quotas --------------------------------------------------------------------


def test_bucket_spec_unlimited_unit_is_infinite_and_labels_name_the_origin() -> None:
    topic = bucket_spec("k", TOPIC_LEVEL, "options", Rate(msgs=10, period_s=5), (0.0, 0.0))
    assert (topic.label, topic.period_s, topic.quota_msgs, topic.quota_bytes) == (
        "topic",
        5,
        10.0,
        math.inf,
    )
    broker = bucket_spec("k", SUBSCRIPTION_LEVEL, "broker", Rate(bytes=0), (0.0, 0.0))
    assert broker.label == "broker subscription"
    assert broker.quota_bytes == math.inf  # 0 disables a limit, as in the broker
    source = bucket_spec("k", SOURCE_LEVEL, "whatever", Rate(msgs=1), (0.0, 0.0))
    assert source.label == SOURCE_LEVEL


def test_bucket_spec_relative_rate_adds_publish_rate_times_period() -> None:
    rate = Rate(msgs=5, bytes=-1, period_s=5, relative_to_publish_rate=True)
    relative = bucket_spec("k", TOPIC_LEVEL, "options", rate, (10.0, 1e9))
    assert relative.quota_msgs == 55.0  # 10 msgs/s x 5 s + 5
    assert relative.quota_bytes == math.inf  # unlimited stays unlimited, relative or not
    absolute = bucket_spec("k", TOPIC_LEVEL, "options", Rate(msgs=5), (10.0, 0.0))
    assert absolute.quota_msgs == 5.0  # publish rate ignored unless relative


def test_partition_specs_keys_order_and_unlimited_rates_skipped() -> None:
    source = bucket_spec(source_key("q"), SOURCE_LEVEL, "options", Rate(msgs=100), (0.0, 0.0))
    asked: list[int] = []

    def publish_rate(d: PartitionDemand, period_s: int) -> tuple[float, float]:
        asked.append(period_s)
        return 2.0, 0.0

    d = demand(
        topic_rates=(("options", Rate(msgs=10)), ("broker", Rate())),
        subscription_rates=(("broker", Rate(msgs=1, period_s=3, relative_to_publish_rate=True)),),
    )
    specs = partition_specs(d, source, publish_rate)
    assert [s.key for s in specs] == [
        "source:q",
        f"topic:options:{P0}",
        f"subscription:broker:sub:{P0}",
    ]
    assert specs[2].quota_msgs == 7.0  # 2 msgs/s x 3 s + 1
    assert asked == [3]  # only relative rates ask for the publish rate
    assert partition_specs(demand(), None, publish_rate) == []


# --- windows and pay-back ----------------------------------------------------------------


def test_roll_forward_new_bucket_starts_empty_in_the_current_window() -> None:
    bucket = roll_forward(spec(period_s=5), None, 1004.9, None)
    assert (bucket.window, bucket.used_msgs, bucket.used_bytes) == (200, 0.0, 0.0)


def test_roll_forward_same_window_keeps_usage() -> None:
    bucket = roll_forward(spec(), BucketState(1000, 7.0, 70.0), 1000.9, None)
    assert (bucket.window, bucket.used_msgs, bucket.used_bytes) == (1000, 7.0, 70.0)


def test_roll_forward_pays_back_one_quota_per_window_and_loses_unused_quota() -> None:
    debt = BucketState(1000, 30.0, 0.0)
    assert roll_forward(spec(msgs=10), debt, 1001.0, None).used_msgs == 20.0
    assert roll_forward(spec(msgs=10), debt, 1003.0, None).used_msgs == 0.0
    assert roll_forward(spec(msgs=10), debt, 1009.0, None).used_msgs == 0.0  # not negative
    # An unlimited unit is paid back at once.
    assert roll_forward(spec(msgs=10), BucketState(1000, 0.0, 5e9), 1001.0, None).used_bytes == 0


def test_a_plan_30_windows_after_the_last_admits_one_windows_quota() -> None:
    """What docs/concepts/quotas.md ("Match the window to the trigger") tells users: windows between two triggers are
    not saved up, so a 30 s trigger with a 1 s window reads one second's quota per trigger; a 30 s window reads 30x."""
    spent = BucketState(1000, 10.0, 0.0)  # the last plan used its whole window
    assert roll_forward(spec(msgs=10), spent, 1030.0, None).remaining()[0] == 10.0
    assert roll_forward(spec(msgs=300, period_s=30), BucketState(33, 300.0, 0.0), 1020.0, None).remaining()[0] == 300.0


def test_roll_forward_keeps_a_newer_window_from_a_clock_ahead() -> None:
    bucket = roll_forward(spec(), BucketState(1001, 10.0, 0.0), 1000.5, None)
    assert (bucket.window, bucket.used_msgs) == (1001, 10.0)


def test_roll_forward_first_window_pays_back_the_quota_it_was_charged_against() -> None:
    # A relative quota was 200 when charged and is 110 now: the charged window repays 200.
    state = BucketState(1000, 200.0, 0.0)
    charged = ChargedQuota(1000, 200.0, math.inf)
    assert roll_forward(spec(msgs=110), state, 1001.0, charged).used_msgs == 0.0
    assert roll_forward(spec(msgs=110), state, 1001.0, None).used_msgs == 90.0
    stale = ChargedQuota(999, 200.0, math.inf)  # charged in another window: not used
    assert roll_forward(spec(msgs=110), state, 1001.0, stale).used_msgs == 90.0
    # Two windows: the first repays the charged 200, the second today's 110.
    assert roll_forward(spec(msgs=110), BucketState(1000, 400.0, 0.0), 1002.0, charged).used_msgs == 90.0


@pytest.mark.parametrize(
    ("used", "first", "quota", "windows", "expected"),
    [
        (30.0, 10.0, 10.0, 1, 20.0),
        (30.0, 10.0, 10.0, 2, 10.0),
        (30.0, 25.0, 10.0, 1, 5.0),
        (30.0, 25.0, 10.0, 2, 0.0),
        (5.0, math.inf, 10.0, 1, 0.0),
        (5.0, 10.0, math.inf, 2, 0.0),
    ],
)
def test_pay_back(used: float, first: float, quota: float, windows: int, expected: float) -> None:
    assert pay_back(used, first, quota, windows) == expected


def test_bucket_charge_remaining_and_exhaustion_with_float_slack() -> None:
    bucket = Bucket(spec(msgs=1.0, bytes_=100.0), 1000, 0.0, 0.0)
    for _ in range(10):
        bucket.charge(0.1, 1.0)
    assert bucket.exhausted_unit() == "msgs"  # 10 x 0.1 uses 1.0 up despite rounding
    assert (bucket.charged_msgs, bucket.charged_bytes) == pytest.approx((1.0, 10.0))
    assert bucket.remaining()[1] == pytest.approx(90.0)
    bytes_only = Bucket(spec(msgs=math.inf, bytes_=100.0), 1000, 0.0, 100.0)
    assert bytes_only.exhausted_unit() == "bytes"
    assert bytes_only.state() == BucketState(1000, 0.0, 100.0)
    assert bytes_only.charged_quota() == ChargedQuota(1000, math.inf, 100.0)
