"""The congestion controller (throttling.controller) with a fake clock and fake stress signals, alone and scaling the
quota engine's ceilings: decrease on a signal, increase without, hold when a signal cannot be read (one WARN per
outage), bounds, convergence times, state shared through the store and kept across a restart, and every quota
window within m x its ceiling, caught-up partitions still exempt."""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path

import pytest
from builders import P0, P1, demand, entries
from fakes import FakeClock
from memory_quota_store import MemoryQuotaStore

from pulsar_throttled_source.quota_settings import AdaptiveConfig, QuotaConfig, Rate
from pulsar_throttled_source.throttling.congestion import SignalReading, SignalState, backoff_windows, recovery_windows
from pulsar_throttled_source.throttling.controller import CongestionController
from pulsar_throttled_source.throttling.engine import QuotaEngine
from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
from pulsar_throttled_source.throttling.store import QuotaStore

# m_min 0.1, decrease 50 %, increase 5 points, 10 s windows; AIMD from the ceiling (slow start: test_congestion.py)
CONFIG = AdaptiveConfig(slow_start=False)
WINDOW_S = CONFIG.window_ms / 1000
ADMIN = "http://broker:8080"


class FakeSignal:
    """A stress signal whose next readings the test sets; counts how often it was read."""

    def __init__(self, name: str = "fake", state: SignalState = "clear") -> None:
        self.name = name
        self.state: SignalState | Exception = state
        self.reads = 0

    def read(self) -> SignalReading:
        self.reads += 1
        if isinstance(self.state, Exception):
            raise self.state
        return SignalReading(self.name, self.state, "set by the test")


def controller(clock: FakeClock, store: QuotaStore | None = None, *signals: FakeSignal,
               config: AdaptiveConfig = CONFIG) -> CongestionController:
    return CongestionController(config, ADMIN, store if store is not None else MemoryQuotaStore(), signals, clock)


def windows(ctl: CongestionController, clock: FakeClock, count: int) -> list[float]:
    """m at the first plan of each of the next `count` windows."""
    seen = []
    for _ in range(count):
        clock.advance(WINDOW_S)
        seen.append(ctl.multiplier())
    return seen


def test_decrease_on_a_fired_signal_and_increase_without(caplog: pytest.LogCaptureFixture) -> None:
    clock, signal = FakeClock(1000.0), FakeSignal()
    ctl = controller(clock, None, signal)
    assert ctl.multiplier() == 1.0  # first window: the ceiling, and nothing fired
    signal.state = "fired"
    with caplog.at_level(logging.INFO, logger="pulsar_throttled_source.throttling.controller"):
        assert windows(ctl, clock, 2) == [0.5, 0.25]
    assert "m=0.500 of the quotas (decrease: fake fired)" in caplog.text
    assert ctl.last is not None and ctl.last.fired() == ["fake"]
    signal.state = "clear"
    assert windows(ctl, clock, 3) == [0.3, 0.35, 0.4]


def test_one_decision_per_window_the_other_plans_reuse_it() -> None:
    clock, signal = FakeClock(1000.0), FakeSignal(state="fired")
    ctl = controller(clock, None, signal)
    assert [ctl.multiplier() for _ in range(5)] == [0.5] * 5 and signal.reads == 1
    clock.advance(WINDOW_S - 0.01)  # 1009.99: the same window
    assert ctl.multiplier() == 0.5 and signal.reads == 1
    clock.advance(0.01)
    assert ctl.multiplier() == 0.25 and signal.reads == 2
    clock.advance(-3 * WINDOW_S)  # the clock went back: keep the last m, decide nothing
    assert ctl.multiplier() == 0.25 and signal.reads == 2


def test_bounds_and_convergence_times() -> None:
    clock, signal = FakeClock(1000.0), FakeSignal(state="fired")
    ctl = controller(clock, None, signal)
    down = [ctl.multiplier()] + windows(ctl, clock, 20)  # the first window decreases already: 0.5
    assert 1 + down.index(0.1) == backoff_windows(CONFIG) == 4 and min(down) == 0.1  # never below m_min
    signal.state = "clear"
    up = windows(ctl, clock, 30)
    assert 1 + up.index(1.0) == recovery_windows(CONFIG) == 18 and max(up) == 1.0  # never above 1
    assert all(b - a == pytest.approx(0.05) for a, b in zip(up[:18], up[1:18], strict=False))


def test_an_unreadable_signal_holds_m_and_warns_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    clock, metrics, latency = FakeClock(1000.0), FakeSignal("metrics", "fired"), FakeSignal("latency")
    ctl = controller(clock, None, metrics, latency)
    assert ctl.multiplier() == 0.5
    metrics.state = ConnectionError("metrics endpoint down")
    with caplog.at_level(logging.INFO, logger="pulsar_throttled_source.throttling.controller"):
        assert windows(ctl, clock, 5) == [0.5] * 5  # neither faster than the last m, nor stalled
        latency.state = "fired"
        assert windows(ctl, clock, 1) == [0.25]  # a signal that did fire still counts
        latency.state = "clear"
        metrics.state = "clear"
        assert windows(ctl, clock, 1) == [0.3]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "metrics cannot be read (ConnectionError: metrics endpoint down)" in warnings[0].getMessage()
    assert "stress signal metrics reads again" in caplog.text
    metrics.state = "unknown"  # a second outage: a second WARN
    with caplog.at_level(logging.WARNING, logger="pulsar_throttled_source.throttling.controller"):
        caplog.clear()
        windows(ctl, clock, 3)
    assert len(caplog.records) == 1


def test_no_signals_is_a_static_quota_at_its_ceiling() -> None:
    clock = FakeClock(1000.0)
    ctl = controller(clock)
    assert [ctl.multiplier()] + windows(ctl, clock, 3) == [1.0] * 4


def test_a_restarted_query_resumes_from_the_stored_m_after_an_idle_period(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    clock, signal = FakeClock(1000.0), FakeSignal(state="fired")
    ctl = controller(clock, SqliteQuotaStore(path), signal)
    ctl.multiplier()
    assert windows(ctl, clock, 2) == [0.25, 0.125]
    clock.advance(3600)  # an hour without a plan: not evidence either way
    restarted = controller(clock, SqliteQuotaStore(path), FakeSignal())  # a new process on the same store
    assert restarted.multiplier() == 0.175  # one step up from where it was, not a jump back to 1


def test_two_planners_sharing_a_store_back_off_together(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    clock = FakeClock(1000.0)
    calm, stressed = FakeSignal("a"), FakeSignal("b", "fired")
    a = controller(clock, SqliteQuotaStore(path), calm)
    b = controller(clock, SqliteQuotaStore(path), stressed)
    assert a.multiplier() == 1.0  # a decides first in the window: nothing it saw fired
    assert b.multiplier() == 0.5  # b's decrease is not lost to a's increase
    clock.advance(WINDOW_S)
    stressed.state = "clear"
    assert b.multiplier() == 0.55 and a.multiplier() == 0.55  # a starts from the m the window ended with
    other_cluster = CongestionController(CONFIG, "http://other-cluster:8080", SqliteQuotaStore(path), (), clock)
    assert other_cluster.multiplier() == 1.0  # m is per cluster


# --- the controller scaling the engine's ceilings ----------------------------------------------------------------

TOPIC_QUOTA = Rate(msgs=100)
PLANS_PER_SECOND = 4


def run(quota_engine: QuotaEngine, ctl: CongestionController, clock: FakeClock, seconds: int,
        admitted: dict[int, int], m_of: dict[int, float], **demand_args: object) -> None:
    """Plan PLANS_PER_SECOND times a second; sum what each 1 s quota window admitted and note m in it."""
    for _ in range(seconds * PLANS_PER_SECOND):
        second = math.floor(clock())
        admitted[second] += sum(entries(quota_engine.plan([demand(backlog=10_000, **demand_args)]).admissions))  # type: ignore[arg-type]
        m_of[second] = ctl.last.multiplier if ctl.last else 1.0
        clock.advance(1 / PLANS_PER_SECOND)


def test_every_window_admits_at_most_m_times_its_ceiling() -> None:
    clock, signal = FakeClock(1000.0), FakeSignal()
    store = MemoryQuotaStore()
    ctl = controller(clock, store, signal)
    quota_engine = QuotaEngine(QuotaConfig(source=Rate(msgs=300), mode="batch"), store, clock, multiplier=ctl.multiplier)
    admitted: dict[int, int] = defaultdict(int)
    m_of: dict[int, float] = {}
    run(quota_engine, ctl, clock, 20, admitted, m_of, topic=TOPIC_QUOTA)  # two calm windows
    signal.state = "fired"
    run(quota_engine, ctl, clock, 50, admitted, m_of, topic=TOPIC_QUOTA)  # five windows of stress
    signal.state = "clear"
    run(quota_engine, ctl, clock, 200, admitted, m_of, topic=TOPIC_QUOTA)  # recovery
    for second, count in admitted.items():
        # Whole messages: 12 of 12.5, with no entry over it (what the one-entry minimum would add to a fractional rest).
        assert count == math.floor(m_of[second] * TOPIC_QUOTA.msgs + 1e-6) <= m_of[second] * TOPIC_QUOTA.msgs + 1e-6
    assert sorted(set(m_of.values()))[:3] == [0.1, 0.125, 0.15] and m_of[max(m_of)] == 1.0
    assert [admitted[t] for t in (1000, 1025, 1035, 1045, 1065, 1075)] == [100, 50, 25, 12, 10, 15]
    # Back at the ceiling in recovery_windows windows from the first calm one (1070 s), as documented.
    assert min(t for t, m in m_of.items() if t >= 1070 and m == 1.0) == 1070 + WINDOW_S * (recovery_windows(CONFIG) - 1)


def test_a_small_ceiling_times_a_small_m_still_admits_one_entry() -> None:
    clock = FakeClock(1000.0)
    quota_engine = QuotaEngine(QuotaConfig(source=Rate(), mode="batch"), MemoryQuotaStore(), clock, multiplier=lambda: 0.1)
    assert entries(quota_engine.plan([demand(P0, topic=Rate(msgs=5))]).admissions) == [1]  # 0.5 of a message: 1, never a stall


def test_source_wide_and_byte_ceilings_are_scaled_too() -> None:
    clock = FakeClock(1000.0)
    store = MemoryQuotaStore()
    quota_engine = QuotaEngine(QuotaConfig(source=Rate(msgs=40), mode="batch"), store, clock, multiplier=lambda: 0.25)
    assert entries(quota_engine.plan([demand(P0), demand(P1)]).admissions) == [5, 5]  # 0.25 x 40, split by backlog
    clock.advance(1)
    quota_engine = QuotaEngine(QuotaConfig(source=Rate(), mode="batch"), store, clock, multiplier=lambda: 0.5)
    assert entries(quota_engine.plan([demand(P0, topic=Rate(bytes=1000), entry_bytes=100)]).admissions) == [5]


def test_caught_up_partitions_stay_exempt() -> None:
    clock = FakeClock(1000.0)
    quota_engine = QuotaEngine(QuotaConfig(source=Rate(), mode="batch", throttle_non_backlog=False,
                                           non_backlog_threshold_entries=50), MemoryQuotaStore(), clock, multiplier=lambda: 0.1)
    caught_up, behind = quota_engine.plan([demand(P0, backlog=40, topic=TOPIC_QUOTA), demand(P1, topic=TOPIC_QUOTA)]).admissions
    assert caught_up.entries == 40 and caught_up.unthrottled is not None
    assert behind.entries == 10


def test_without_a_controller_the_engine_is_unchanged() -> None:
    results = []
    for multiplier in (None, lambda: 1.0):
        clock = FakeClock(1000.0)
        quota_engine = QuotaEngine(QuotaConfig(source=Rate(msgs=25), mode="batch"), MemoryQuotaStore(), clock, multiplier=multiplier)
        results.append([entries(quota_engine.plan([demand(P0, topic=TOPIC_QUOTA), demand(P1)]).admissions) for _ in range(3)])
    assert results[0] == results[1] == [[13, 12], [0, 0], [0, 0]]
