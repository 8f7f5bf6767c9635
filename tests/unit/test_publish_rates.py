"""Publish rates (throttling/publish_rates.py): measured from the broker's live counters, on made-up snapshots,
and smoothed for relative quotas."""

from __future__ import annotations

from pulsar_throttled_source.metadata.catalog import CatalogSnapshot, PublishStats
from pulsar_throttled_source.throttling.demands import PartitionDemand
from pulsar_throttled_source.throttling.publish_rates import PublishRateTracker, SmoothedPublishRates

P = "persistent://public/default/t"
P0 = "persistent://public/default/t-partition-0"
P1 = "persistent://public/default/t-partition-1"


def snap(at: float, msgs: int, rate_in: float = 0.0) -> CatalogSnapshot:
    return CatalogSnapshot(at, {}, {P: PublishStats(msgs, msgs * 10, rate_in, rate_in * 10)}, stats_at=at)


def test_a_rate_is_measured_over_a_second_not_one_fast_refresh():
    """100 msg/s, the counters read every 0.3 s with jitter (here: one read 0.1 s early): over one
    refresh that read 133/s, over a second it reads within a tenth of the true rate."""
    tracker = PublishRateTracker()
    tracker.update(snap(10.0, 1000, rate_in=95.0))
    assert tracker.rates[P] == (95.0, 950.0)  # nothing measured yet: the broker's own average
    tracker.update(snap(10.3, 1030))
    assert tracker.rates[P] == (95.0, 950.0)  # 0.3 s is too short a span
    for at, msgs in ((10.6, 1060), (10.9, 1090), (11.1, 1120), (11.5, 1150)):  # 11.1: read 0.1 s early
        tracker.update(snap(at, msgs))
        msgs_rate, _ = tracker.rates[P]
        assert 90.0 <= msgs_rate <= 110.0, (at, msgs_rate)


def test_the_same_stats_again_change_nothing_and_a_counter_reset_measures_again():
    tracker = PublishRateTracker()
    for at, msgs in ((0.0, 0), (1.0, 100), (2.0, 200)):
        tracker.update(snap(at, msgs))
    assert tracker.rates[P] == (100.0, 1000.0)
    tracker.update(snap(2.0, 999))  # a snapshot carrying the same (older) stats
    assert tracker.rates[P] == (100.0, 1000.0)
    tracker.update(snap(3.0, 5))  # the topic was reloaded: its counters start again
    assert tracker.rates[P] == (100.0, 1000.0)
    tracker.update(snap(4.0, 55))
    assert tracker.rates[P] == (50.0, 500.0)


def demand(partition: str = P0, msgs: float = 0.0, bytes_: float = 0.0) -> PartitionDemand:
    return PartitionDemand(partition, "sub", 10, lambda k: float(k), None, msgs, bytes_)


def test_smoothed_publish_rate_rises_at_once_and_falls_once_per_window() -> None:
    rates = SmoothedPublishRates()
    assert rates.rate(demand(msgs=100.0, bytes_=-5.0), 1, 1000.0) == (100.0, 0.0)
    assert rates.rate(demand(msgs=0.0), 1, 1000.5) == (100.0, 0.0)  # same window: kept
    assert rates.rate(demand(msgs=0.0), 1, 1001.0) == (90.0, 0.0)
    assert rates.rate(demand(msgs=0.0), 1, 1001.9) == (90.0, 0.0)
    assert rates.rate(demand(msgs=500.0), 1, 1001.9) == (500.0, 0.0)
    assert rates.rate(demand(msgs=7.0), 5, 1001.9) == (7.0, 0.0)  # each period its own state


def test_smoothed_publish_rate_total_counts_a_repeated_partition_once() -> None:
    rates = SmoothedPublishRates()
    total = rates.total([demand(P0, msgs=30.0), demand(P1, msgs=60.0, bytes_=5.0), demand(P0, msgs=30.0)], 1, 1000.0)
    assert total == (90.0, 5.0)
