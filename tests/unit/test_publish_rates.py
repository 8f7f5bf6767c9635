"""Publish rates from the broker's live counters (throttling/publish_rates.py), on made-up snapshots."""

from __future__ import annotations

from pulsar_throttled_source.metadata.catalog import CatalogSnapshot, PublishStats
from pulsar_throttled_source.throttling.publish_rates import PublishRateTracker

P = "persistent://public/default/t"


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
