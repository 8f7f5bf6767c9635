"""adaptiveThrottling's stress signals (throttling/signals.py) on fake readings and a fake clock: each fires on its
stress and only then, holds (unknown) where its reading cannot be made, and never takes a broker restart for
congestion; fed to the real controller they move m as the contract says, and two planners sharing a SQLite file
back off together on one planner's signal."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fakes import FakeClock
from memory_quota_store import MemoryQuotaStore

from pulsar_throttled_source.metadata.catalog import CatalogSnapshot
from pulsar_throttled_source.metadata.stress_readings import (
    THROTTLED_COUNTERS,
    BrokerStress,
    LatencySamples,
    pending_adds,
    throttled_events,
)
from pulsar_throttled_source.quota_settings import AdaptiveConfig
from pulsar_throttled_source.throttling.controller import CongestionController
from pulsar_throttled_source.throttling.signals import (
    BatchDurationSignal,
    LookupLatencySignal,
    OthersThrottledSignal,
    PendingAddsSignal,
)
from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore

P0, P1 = "persistent://public/default/t-partition-0", "persistent://public/default/t-partition-1"
# m_min 0.1, decrease 50 %, increase 5 points, 10 s windows; AIMD from the ceiling (slow start: test_congestion.py)
CONFIG = AdaptiveConfig(slow_start=False)
ADMIN = "http://broker:8080"


def snap(at: float, pending: dict[str, int], throttled: dict[str, int | None] | None = None,
         stats_at: float | None = None) -> CatalogSnapshot:
    stress = {p: BrokerStress(n, (throttled or {}).get(p)) for p, n in pending.items()}
    return CatalogSnapshot(at, {}, {}, {}, at if stats_at is None else stats_at, stress)


def states(*readings) -> list[str]:
    return [r.state for r in readings]


# -- what the metadata layer reads ----------------------------------------------------------------
def test_throttled_events_sum_the_other_durable_subscriptions_counters():
    counters = dict.fromkeys(THROTTLED_COUNTERS, 2)  # six counters of 2 each
    stats = {"subscriptions": {"billing": {"durable": True, **counters},
                               "orders-ingest": {"durable": True, **counters},  # the query's own
                               "reader-1a2b": {"durable": False, **counters},  # a reader (the source's, or anyone's)
                               "audit": {"durable": True}}}  # a 3.x broker's subscription: no counters
    assert throttled_events(stats, "orders-ingest") == 12
    assert throttled_events({"subscriptions": {"audit": {"durable": True}}}, None) is None  # before Pulsar 4.0
    assert throttled_events({}, None) is None
    assert pending_adds({"pendingAddEntriesCount": 7}) == 7 and pending_adds({}) == 0


def test_latency_samples_drain_what_was_recorded_since_the_last_drain():
    samples = LatencySamples()
    samples.record(0.01)
    samples.failed()
    assert samples.drain() == ([0.01], 1)
    assert samples.drain() == ([], 0)


# -- each signal ------------------------------------------------------------------------------------
def test_lookup_latency_fires_at_three_times_its_running_minimum_and_holds_on_failures():
    samples = LatencySamples()
    signal = LookupLatencySignal(samples)

    def window(*durations: float, failures: int = 0):
        for d in durations:
            samples.record(d)
        for _ in range(failures):
            samples.failed()
        return signal.read()

    assert states(window(), window(0.010, 0.012, 0.011)) == ["clear", "clear"]  # no lookups; the baseline
    assert window(0.020, 0.025, 0.022).state == "clear"  # 2x, and only 11 ms above: noise
    fired = window(0.040, 0.050, 0.045)  # 4x the 11 ms minimum, 34 ms above it
    assert fired.state == "fired" and "running minimum 11 ms" in fired.detail
    assert window(0.030, failures=1).state == "unknown"  # a lookup failed: an outage or a restart, not congestion
    assert window(0.012).state == "clear"


def test_pending_adds_fires_on_the_most_seen_in_the_window():
    signal = PendingAddsSignal()
    signal.observe(snap(1.0, {P0: 0, P1: 1}))
    assert signal.read().state == "clear"
    assert signal.read().state == "clear"  # no refresh in the window: clear, not a repeat of the last one
    for at, pending in ((2.0, {P0: 1, P1: 0}), (3.0, {P0: 5, P1: 6}), (4.0, {P0: 0, P1: 0})):
        signal.observe(snap(at, pending))
    signal.observe(snap(4.0, {P0: 50, P1: 50}))  # the same refresh again (an idle poll): not counted twice
    fired = signal.read()
    assert fired.state == "fired" and fired.detail.startswith("11 entries waiting")
    signal.observe(snap(5.0, {P0: 3, P1: 2}))
    assert signal.read().state == "clear"  # under the floor of 8


def test_pending_adds_compares_with_its_running_minimum():
    signal = PendingAddsSignal()
    signal.observe(snap(1.0, {P0: 10}))  # a broker that always has some writes in flight
    assert signal.read().state == "fired"  # no minimum known yet: 10 >= the floor of 8
    signal.observe(snap(2.0, {P0: 12}))
    assert signal.read().state == "clear"  # 12 < 2 x its minimum of 10
    signal.observe(snap(3.0, {P0: 25}))
    assert signal.read().state == "fired"


def test_others_throttled_fires_on_growth_and_a_restart_is_not_congestion():
    signal = OthersThrottledSignal()
    signal.observe(snap(1.0, {P0: 0, P1: 0}, {P0: 5, P1: 0}))
    assert signal.read().state == "clear"  # the first counters are a baseline, whatever their value
    signal.observe(snap(2.0, {P0: 0, P1: 0}, {P0: 5, P1: 3}))
    fired = signal.read()
    assert fired.state == "fired" and "3 times" in fired.detail
    signal.observe(snap(3.0, {P0: 0, P1: 0}, {P0: 0, P1: 0}))  # the broker restarted: counters start again
    assert signal.read().state == "unknown"
    signal.observe(snap(4.0, {P0: 0, P1: 0}, {P0: 0, P1: 0}))
    assert signal.read().state == "clear"
    signal.observe(snap(5.0, {P0: 0}, {P0: 1}, stats_at=4.0))  # newer layouts, the same stats: not counted
    assert signal.read().state == "clear"


def test_others_throttled_is_clear_on_a_broker_that_does_not_report_the_counters():
    signal = OthersThrottledSignal()
    for at in (1.0, 2.0):
        signal.observe(snap(at, {P0: 0}, {P0: None}))
    reading = signal.read()
    assert reading.state == "clear" and "before 4.0" in reading.detail


def test_batch_duration_fires_when_the_median_batch_overruns_the_trigger():
    clock = FakeClock(0.0)
    signal = BatchDurationSignal(2.0, clock)
    assert signal.read().state == "clear"  # no batch yet

    def batches(*durations: float):
        for d in durations:
            signal.plan_started()
            signal.batch_planned()
            clock.now += d
        signal.plan_started()  # the next plan ends the last batch
        return signal.read()

    assert batches(2.0, 2.1, 2.4).state == "clear"  # a ProcessingTime(2 s) trigger on time
    assert batches(2.0, 3.0, 3.5).state == "fired"  # the median batch 3 s > 2.5 s
    clock.now += 60  # idle polls plan no batch: nothing is measured
    signal.plan_started()
    assert signal.read().state == "clear"


# -- fed to the controller ----------------------------------------------------------------------------
def test_the_controller_backs_off_under_pending_adds_and_climbs_back_without(tmp_path: Path):
    clock = FakeClock(1_000_000.0)
    pending, throttled = PendingAddsSignal(), OthersThrottledSignal()
    ctl = CongestionController(CONFIG, ADMIN, SqliteQuotaStore(str(tmp_path / "q.sqlite")), [pending, throttled], clock)
    seen = []
    for window in range(30):
        clock.now += 10.0
        load = 40 if 3 <= window < 8 else 0  # producers' writes wait for five windows
        pending.observe(snap(clock.now, {P0: load}, {P0: 0}))
        seen.append(ctl.multiplier())
    assert seen[:3] == [1.0, 1.0, 1.0]
    assert seen[3:8] == [0.5, 0.25, 0.125, 0.1, 0.1]  # 4 windows to the floor, never below it
    assert seen[8] == 0.15 and seen[-1] == 1.0 and max(seen) == 1.0  # +5 points a window, never above the ceiling
    assert seen.index(1.0, 8) == 8 + 17  # back at the ceiling in 18 windows (recovery_windows)
    assert ctl.last is not None and ctl.last.fired() == []


def test_a_broker_restart_holds_m_with_one_warning(caplog: pytest.LogCaptureFixture):
    clock = FakeClock(1_000_000.0)
    samples = LatencySamples()
    ctl = CongestionController(CONFIG, ADMIN, MemoryQuotaStore(), [LookupLatencySignal(samples)], clock)
    samples.record(0.01)
    clock.now += 10
    assert ctl.multiplier() == 1.0
    samples.record(0.2)  # 20x: fired
    clock.now += 10
    assert ctl.multiplier() == 0.5
    caplog.set_level(logging.WARNING)
    for _ in range(3):  # the broker restarts: lookups fail for three windows
        samples.failed()
        clock.now += 10
        assert ctl.multiplier() == 0.5
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    samples.record(0.01)
    clock.now += 10
    assert ctl.multiplier() == 0.55


def test_two_planners_back_off_together_on_one_planners_signal(tmp_path: Path):
    """Two queries (two Spark applications) on one host: only the first sees its batches overrun; both apply the
    cluster's m, through the SQLite file, from the next window on."""
    clock = FakeClock(2_000_000.0)
    path = str(tmp_path / "shared.sqlite")
    late, on_time = BatchDurationSignal(1.0, clock), BatchDurationSignal(1.0, clock)
    first = CongestionController(CONFIG, ADMIN, SqliteQuotaStore(path), [late], clock)
    second = CongestionController(CONFIG, ADMIN, SqliteQuotaStore(path), [on_time], clock)
    for signal, duration in ((late, 5.0), (on_time, 0.5)):
        signal.batch_planned()
        clock.now += duration
        signal.plan_started()
    clock.now = 2_000_010.0  # the next window
    assert (first.multiplier(), second.multiplier()) == (0.5, 0.5)
    assert second.last is not None and second.last.verdict == "increase"  # its own verdict; the record's decrease won
    clock.now += 10
    assert (second.multiplier(), first.multiplier()) == (0.55, 0.55)


def metrics_page(*periods: dict[str, float]) -> str:
    """A broker's Prometheus page with two topics' write latency buckets (each topic gets `counts`)."""
    lines = ["# TYPE pulsar_storage_write_latency_le_0_5 gauge"]
    for topic in ("a", "b"):
        for bucket, count in periods[0].items():
            lines.append(f'pulsar_storage_write_latency_le_{bucket}{{cluster="standalone",topic="persistent://public/default/{topic}"}} {count}')
    lines.append('pulsar_topics_count{cluster="standalone"} 2')
    return "\n".join(lines) + "\n"


def test_write_latency_sums_the_buckets_of_every_topic():
    from pulsar_throttled_source.metadata.broker_metrics import write_latency

    latency = write_latency(metrics_page({"1": 90, "5": 8, "50": 2}))
    assert latency is not None and latency.writes == 200
    assert latency.quantile_bound(0.5) == 1.0 and latency.quantile_bound(0.99) == 50.0
    assert write_latency('pulsar_topics_count{cluster="standalone"} 2\n') is None


def test_publish_latency_fires_once_per_slow_stats_period_and_holds_when_unreadable():
    from pulsar_throttled_source.throttling.signals import PublishLatencySignal

    page = [metrics_page({"1": 99, "5": 1})]

    def fetch() -> str:
        if isinstance(page[0], Exception):
            raise page[0]
        return page[0]
    signal = PublishLatencySignal(fetch)
    assert signal.read().state == "clear"  # the first period: its p99 (5 ms) is the baseline
    page[0] = metrics_page({"1": 90, "5": 5, "50": 5})  # a period whose p99 write took up to 50 ms
    fired = signal.read()
    assert fired.state == "fired" and "50 ms" in fired.detail
    assert signal.read().state == "waiting"  # the same period read again: no new evidence, m holds
    page[0] = metrics_page({"1": 95, "5": 4, "10": 1})
    assert signal.read().state == "clear"  # 10 ms: 2x 5 ms, not over it
    clock = FakeClock(1_000_000.0)
    ctl = CongestionController(CONFIG, ADMIN, MemoryQuotaStore(), [signal], clock)
    page[0] = ConnectionError("metrics endpoint down")
    clock.now += 10
    assert ctl.multiplier() == 1.0 and ctl.last is not None and ctl.last.verdict == "hold"


def summary_page(p99: float | str, p50: float | str = 2.0, buckets: dict[str, float] | None = None) -> str:
    """A broker's page with its publish latency summary (quantiles in ms; 'NaN' for a period without writes) and,
    optionally, write latency buckets."""
    lines = [metrics_page(buckets).rstrip("\n")] if buckets else []
    lines += ["# TYPE pulsar_broker_publish_latency summary"]
    for q, value in (("0.0", 0.2), ("0.5", p50), ("0.99", p99), ("1.0", "+Inf" if p99 == "NaN" else 300.0)):
        lines.append(f'pulsar_broker_publish_latency{{cluster="standalone",quantile="{q}"}} {value}')
    lines += ['pulsar_broker_publish_latency_count{cluster="standalone"} 108426.0',
              'pulsar_broker_publish_latency_sum{cluster="standalone"} 5111878.0']
    return "\n".join(lines) + "\n"


def test_publish_latency_fires_at_the_ratio_the_user_allows_and_only_over_5_ms():
    from pulsar_throttled_source.throttling.signals import PublishLatencySignal

    page = [summary_page(4.6)]
    signal = PublishLatencySignal(lambda: page[0], factor=1.5)  # adaptiveThrottlingPublishLatencyPercent=50
    assert signal.read().state == "clear"  # the baseline
    page[0] = summary_page(6.8)  # under 1.5 x 4.6 = 6.9 ms
    assert signal.read().state == "clear"
    page[0] = summary_page(7.6)  # over it (a static quota at half the ceiling, run E)
    assert signal.read().state == "fired"
    low = [summary_page(2.0)]
    quiet = PublishLatencySignal(lambda: low[0], factor=1.5)
    assert quiet.read().state == "clear"
    low[0] = summary_page(4.9)  # 2.5x, but a 5 ms p99 is a broker at ease
    assert quiet.read().state == "clear"


def test_broker_latency_reads_the_publish_summary_beside_the_buckets():
    from pulsar_throttled_source.metadata.broker_metrics import broker_latency

    publish, write = broker_latency(summary_page(47.3, buckets={"1": 90, "5": 10}))
    assert publish is not None and publish.at(0.99) == 47.3 and publish.at(0.5) == 2.0 and publish.at(0.95) is None
    assert write is not None and write.writes == 200
    publish, write = broker_latency(summary_page("NaN", "NaN"))  # a period without writes: no quantile, no bucket
    assert publish is not None and publish.at(0.99) is None and write is None
    assert broker_latency('pulsar_topics_count{cluster="standalone"} 2\n') == (None, None)


def test_publish_latency_prefers_the_fine_summary_and_falls_back_to_the_buckets():
    from pulsar_throttled_source.throttling.signals import PublishLatencySignal

    page = [summary_page(6.0, buckets={"5": 99, "10": 1})]
    signal = PublishLatencySignal(lambda: page[0])
    assert signal.read().state == "clear"  # the first period: 6 ms is the summary's baseline
    page[0] = summary_page(11.5, buckets={"5": 99, "10": 1})  # under 2x 6 ms: the buckets (same p99 bound) would not tell
    assert signal.read().state == "clear"
    page[0] = summary_page(12.5, buckets={"5": 99, "10": 1})  # 12.5 ms > 2 x 6 ms and > 10 ms
    fired = signal.read()
    assert fired.state == "fired" and "12.5 ms" in fired.detail and "summary" in fired.detail
    assert signal.read().state == "waiting"  # the same period read again: no new evidence
    page[0] = summary_page("NaN", "NaN", buckets={"5": 99, "10": 1})  # no summary: the buckets, own baseline (10 ms)
    assert signal.read().state == "clear"
    page[0] = summary_page("NaN", "NaN", buckets={"5": 90, "50": 10})
    fired = signal.read()
    assert fired.state == "fired" and "50 ms" in fired.detail and "buckets" in fired.detail
    page[0] = summary_page("NaN", "NaN")  # nothing written in the period
    assert signal.read().state == "clear"


def test_publish_latency_slower_than_the_window_decreases_once_per_period_and_increases_only_on_a_clear_one(
        caplog: pytest.LogCaptureFixture):
    """The broker rolls its summary every 5 s, the controller decides every 2 s (bench/adaptive_backfill.py's set-up):
    a slow period decreases m once; the windows until the next period hold it (no increase that the next period has
    not judged, no second decrease for the same period, no WARN: nothing is down); each clear period allows one step up."""
    from pulsar_throttled_source.throttling.signals import PublishLatencySignal

    config = AdaptiveConfig(window_ms=2_000, increase=0.1, slow_start=False)
    clock = FakeClock(1_000_000.0)
    periods = {0: 5.0, 1: 5.2, 2: 14.0, 3: 5.5, 4: 5.4, 5: 5.6}  # the broker's p99 (ms) of each 5 s period
    signal = PublishLatencySignal(lambda: summary_page(periods[min(5, int((clock.now - 1_000_000.0) // 5))]))
    ctl = CongestionController(config, ADMIN, MemoryQuotaStore(), [signal], clock)
    caplog.set_level(logging.WARNING)
    seen = []
    for _ in range(15):  # 30 s of 2 s windows: periods 0..5, each read in 2 or 3 windows
        seen.append((int((clock.now - 1_000_000.0) // 5), ctl.multiplier(), ctl.last.verdict if ctl.last else None))
        clock.now += 2.0
    by_period: dict[int, list[tuple[float, str | None]]] = {}
    for period, m, verdict in seen:
        by_period.setdefault(period, []).append((m, verdict))
    assert [len(by_period[p]) for p in range(6)] == [3, 2, 3, 2, 3, 2]  # windows at 0, 2, 4 ... s; periods of 5 s
    assert [v for _, v in by_period[2]] == ["decrease", "hold", "hold"]  # the 14 ms period (> 2 x 5 ms, > 10 ms): once
    assert {m for m, _ in by_period[2]} == {0.5}
    for period, m in ((3, 0.6), (4, 0.7), (5, 0.8)):  # each clear period: one step up, then hold until the next
        assert by_period[period] == [(m, "increase")] + [(m, "hold")] * (len(by_period[period]) - 1)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
