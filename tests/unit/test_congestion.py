"""The congestion controller's rule (throttling.congestion): slow start, then AIMD steps within [m_min, 1], the verdict
of a window's signals, the time constants, and the shared record's semantics (one decision per window per cluster)."""

from __future__ import annotations

import pytest

from pulsar_throttled_source.quota_settings import AdaptiveConfig
from pulsar_throttled_source.throttling.congestion import (
    SignalReading,
    backoff_windows,
    cluster_key,
    decide,
    recovery_windows,
    slow_start_windows,
    step,
    verdict_of,
    window_of,
)
from pulsar_throttled_source.throttling.store import MultiplierState

DEFAULTS = AdaptiveConfig()  # slow start from m_min 0.1, decrease 50 %, increase 5 points, 10 s windows
AIMD = AdaptiveConfig(slow_start=False)  # m starts at the ceiling
W = DEFAULTS.window_ms


def reading(name: str, state: str) -> SignalReading:
    return SignalReading(name, state)  # type: ignore[arg-type]


def test_any_fired_signal_decreases_an_unreadable_or_waiting_one_holds_else_increase():
    assert verdict_of([reading("a", "clear"), reading("b", "fired")]) == "decrease"
    assert verdict_of([reading("a", "unknown"), reading("b", "fired")]) == "decrease"  # the stress seen is evidence
    assert verdict_of([reading("a", "clear"), reading("b", "unknown")]) == "hold"
    assert verdict_of([reading("a", "clear"), reading("b", "waiting")]) == "hold"  # no fresh all-clear: no increase
    assert verdict_of([reading("a", "waiting"), reading("b", "fired")]) == "decrease"
    assert verdict_of([reading("a", "clear"), reading("b", "clear")]) == "increase"
    assert verdict_of([]) == "increase"  # no signals: m climbs to the ceiling, a static quota


def test_steps_stay_within_the_floor_and_the_ceiling():
    assert step(1.0, "decrease", DEFAULTS) == 0.5
    assert step(0.15, "decrease", DEFAULTS) == 0.1  # never below m_min
    assert step(0.1, "decrease", DEFAULTS) == 0.1
    assert step(0.5, "increase", DEFAULTS) == 0.55
    assert step(0.98, "increase", DEFAULTS) == 1.0  # never above 1
    assert step(0.37, "hold", DEFAULTS) == 0.37
    m = 1.0
    for verdict in ["decrease"] * 10 + ["increase"] * 30 + ["decrease", "hold", "increase"] * 10:
        m = step(m, verdict, DEFAULTS)  # type: ignore[arg-type]
        assert 0.1 <= m <= 1.0


@pytest.mark.parametrize("config,backoff,recovery", [
    (DEFAULTS, 4, 18),  # 1 -> 0.5 -> 0.25 -> 0.125 -> 0.1; 0.1 + 18 x 0.05 = 1
    (AdaptiveConfig(min_multiplier=0.25, decrease=0.3, increase=0.1), 4, 8),
    (AdaptiveConfig(min_multiplier=1.0), 0, 0),  # a floor of 100 %: a static quota
])
def test_time_constants(config, backoff, recovery):
    assert backoff_windows(config) == backoff and recovery_windows(config) == recovery
    assert slow_start_windows(config) == {0.1: 4, 0.25: 2, 1.0: 0}[config.min_multiplier]  # doublings from m_min to 1
    m = 1.0
    for _ in range(backoff):
        m = step(m, "decrease", config)
    assert m == config.min_multiplier
    for _ in range(recovery):
        m = step(m, "increase", config)
    assert m == 1.0  # exactly: no 0.9999999999999999 that would take one more window


def test_windows_are_aligned_to_the_epoch():
    assert window_of(1000.0, DEFAULTS) == window_of(1009.999, DEFAULTS) == 1_000_000
    assert window_of(1010.0, DEFAULTS) == 1_010_000


def test_without_slow_start_the_first_window_starts_from_the_ceiling():
    assert decide(None, W, "increase", AIMD) == MultiplierState(W, 1.0, "increase", 1.0)
    assert decide(None, W, "decrease", AIMD) == MultiplierState(W, 1.0, "decrease", 0.5)


def test_slow_start_begins_at_the_floor_and_doubles_until_the_first_decrease():
    assert decide(None, W, "increase", DEFAULTS) == MultiplierState(W, 0.1, "increase", 0.2, slow_start=True)
    assert decide(None, W, "hold", DEFAULTS) == MultiplierState(W, 0.1, "hold", 0.1, slow_start=True)
    assert decide(None, W, "decrease", DEFAULTS) == MultiplierState(W, 0.1, "decrease", 0.1, slow_start=False)
    record, seen = None, []
    for window, verdict in enumerate(["increase", "increase", "hold", "increase", "decrease", "increase", "increase"], 1):
        record = decide(record, window * W, verdict, DEFAULTS)  # type: ignore[arg-type]
        seen.append((record.m, record.slow_start))
    # Doubling (a hold keeps m and slow start), halved by the first stress, then additive steps of 5 points.
    assert seen == [(0.2, True), (0.4, True), (0.4, True), (0.8, True), (0.4, False), (0.45, False), (0.5, False)]


def test_slow_start_reaches_the_ceiling_and_stays_there_without_stress():
    record = None
    for window in range(1, slow_start_windows(DEFAULTS) + 3):
        record = decide(record, window * W, "increase", DEFAULTS)
        assert record.m == min(1.0, 0.1 * 2 ** window)
    assert record is not None and record.m == 1.0 and record.slow_start  # no decrease yet: a later one ends it
    assert decide(record, 100 * W, "decrease", DEFAULTS) == MultiplierState(100 * W, 1.0, "decrease", 0.5)


@pytest.mark.parametrize("first,second,m,slow", [
    ("increase", "decrease", 0.2, False),  # the window's decrease ends slow start, from the window's base
    ("decrease", "increase", 0.2, False),
    ("increase", "hold", 0.4, True),  # a hold neither doubles nor ends slow start
    ("increase", "increase", 0.8, True),  # one doubling, not two
])
def test_planners_merging_a_slow_start_window_apply_its_most_cautious_verdict_once(first, second, m, slow):
    start = MultiplierState(W, 0.2, "increase", 0.4, slow_start=True)
    record = decide(decide(start, 2 * W, first, DEFAULTS), 2 * W, second, DEFAULTS)
    assert (record.base, record.m, record.slow_start) == (0.4, m, slow)


def test_one_decrease_per_window_however_many_planners_saw_stress():
    record = decide(None, W, "decrease", AIMD)
    assert decide(record, W, "decrease", AIMD) == record  # a second planner in the same window: no second decrease
    nxt = decide(record, 2 * W, "decrease", AIMD)
    assert nxt == MultiplierState(2 * W, 0.5, "decrease", 0.25)


@pytest.mark.parametrize("first,second,m", [
    ("increase", "decrease", 0.25),  # the decrease is not lost: it moves the window's base, not the increased m
    ("decrease", "increase", 0.25),  # nor undone
    ("increase", "hold", 0.5),  # a planner that could not read its signals holds the window
    ("hold", "increase", 0.5),
    ("hold", "decrease", 0.25),
    ("increase", "increase", 0.55),  # one increase, not two
])
def test_the_most_cautious_verdict_of_a_window_wins_in_any_order(first, second, m):
    start = MultiplierState(W, 1.0, "decrease", 0.5)
    record = decide(decide(start, 2 * W, first, DEFAULTS), 2 * W, second, DEFAULTS)
    assert record.window_ms == 2 * W and record.base == 0.5 and record.m == m


def test_after_an_idle_period_m_moves_one_step_from_where_it_was():
    record = MultiplierState(W, 0.5, "decrease", 0.25)
    assert decide(record, 1000 * W, "increase", DEFAULTS) == MultiplierState(1000 * W, 0.25, "increase", 0.3)


def test_a_planner_whose_clock_is_behind_merges_into_the_newer_window():
    record = MultiplierState(5 * W, 0.5, "increase", 0.55)
    assert decide(record, 4 * W, "decrease", DEFAULTS) == MultiplierState(5 * W, 0.5, "decrease", 0.25)
    assert decide(record, 4 * W, "increase", DEFAULTS) == record


def test_the_cluster_is_the_admin_url_as_every_query_spells_it():
    key = cluster_key("http://broker-1:8080")
    assert key == cluster_key("HTTP://Broker-1:8080/") == cluster_key("http://user:pw@broker-1:8080")
    assert cluster_key("https://pulsar.example.com") == "https://pulsar.example.com:443"
    assert key != cluster_key("http://broker-2:8080")
