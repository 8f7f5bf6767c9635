"""The trigger floor (minEntriesPerTrigger, maxTriggerDelay): the pure decision on a fake clock, then the
planner around it: a held-back trigger returns the previous end and charges no quota, the delay releases a
small batch, Trigger.AvailableNow's last batch may be under the floor, Trigger.Once ignores it."""

from __future__ import annotations

import sqlite3

import pytest
from builders import P0, P1, PLANNER_START, URLS, layout, positions, reader, stored_keys, unlimited
from builders import demand as engine_demand
from fakes import FakeCatalog, FakeClock
from memory_quota_store import MemoryQuotaStore
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planning.trigger_floor import TriggerFloor
from pulsar_throttled_source.quota_settings import QuotaConfig, Rate
from pulsar_throttled_source.throttling.engine import QuotaEngine, QuotaPlan


# --- the decision alone -------------------------------------------------------------------------------------
def test_under_the_floor_waits_until_the_delay_counted_from_the_first_trigger():
    clock = FakeClock(100.0)
    floor = TriggerFloor(10, 5_000, clock)
    assert not floor.verdict(9).run
    clock.now = 104.9
    assert not floor.verdict(9).run
    clock.now = 105.0
    assert floor.verdict(1).run  # the delay has passed since the first trigger


def test_the_floor_runs_at_once_and_each_batch_restarts_the_delay():
    clock = FakeClock(100.0)
    floor = TriggerFloor(10, 5_000, clock)
    assert floor.verdict(10).run
    clock.now = 103.0
    floor.batch_planned()
    clock.now = 107.9
    assert not floor.verdict(3).run  # 4.9 s since the last batch
    clock.now = 108.0
    assert floor.verdict(3).run


def test_nothing_admitted_never_runs_even_after_the_delay():
    clock = FakeClock(100.0)
    floor = TriggerFloor(10, 1_000, clock)
    clock.now = 1_000.0
    assert not floor.verdict(0).run


# --- the planner --------------------------------------------------------------------------------------------
def test_a_trigger_under_the_floor_returns_the_previous_end_then_runs_once_the_backlog_reaches_it(tmp_path):
    clock, catalog = FakeClock(1_000.25), FakeCatalog(layout(P0, [(5, 3)]), layout(P1, [(6, 1)]))
    r = reader(tmp_path, catalog, clock, minEntriesPerTrigger=6, maxTriggerDelay="10s")
    start = r.initialOffset()
    assert r.latestOffset(start, unlimited()) == start  # 4 entries < 6: no batch
    catalog.set(layout(P0, [(5, 4)]), layout(P1, [(6, 2)]))  # 6 entries summed over the partitions
    end = r.latestOffset(start, unlimited())
    assert positions(end) == {P0: (5, 3), P1: (6, 1)}


def test_max_trigger_delay_releases_a_batch_under_the_floor(tmp_path):
    clock, catalog = FakeClock(1_000.25), FakeCatalog(layout(P0, [(5, 12)]))
    r = reader(tmp_path, catalog, clock, minEntriesPerTrigger=10, maxTriggerDelay=30_000)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 11)}
    catalog.set(layout(P0, [(5, 14)]))
    clock.now = 1_029.0
    assert r.latestOffset(first, unlimited()) == first  # 2 entries, 28.75 s after the last batch
    clock.now = 1_030.3
    assert positions(r.latestOffset(first, unlimited())) == {P0: (5, 13)}


def test_a_held_back_trigger_charges_no_quota(tmp_path):
    clock, catalog = FakeClock(2_000.1), FakeCatalog(layout(P0, [(5, 3)]))
    r = reader(tmp_path, catalog, clock, minEntriesPerTrigger=5, throttlingMode="batch",
               dispatchThrottlingRatePerTopicInMsg=10)
    start = r.initialOffset()
    assert r.latestOffset(start, unlimited()) == start
    with sqlite3.connect(tmp_path / "quota.sqlite") as db:
        assert db.execute("SELECT count(*) FROM buckets").fetchone() == (0,)  # nothing charged, nothing stored
    catalog.set(layout(P0, [(5, 30)]))
    clock.now = 2_000.5  # the same window: its whole quota is still there
    assert positions(r.latestOffset(start, unlimited())) == {P0: (5, 9)}


def test_the_floor_never_lets_a_batch_over_the_quota(tmp_path):
    clock, catalog = FakeClock(2_000.1), FakeCatalog(layout(P0, [(5, 100)]))
    r = reader(tmp_path, catalog, clock, minEntriesPerTrigger=8, throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg=10)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 9)}  # the quota's 10, not the backlog's 100
    clock.now = 2_000.6
    assert r.latestOffset(first, unlimited()) == first  # the window is spent: nothing admitted


def test_per_partition_quotas_that_can_never_reach_the_floor_fail_at_the_first_trigger(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 100)]), layout(P1, [(6, 100)])), FakeClock(PLANNER_START),
               minEntriesPerTrigger=25, throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg=10)
    with pytest.raises(ValueError, match=r"'minEntriesPerTrigger' \(25\) and 'dispatchThrottlingRatePerTopicInMsg' "
                                         r"\(20 = 10 messages per window x 2 partitions\) do not fit"):
        r.latestOffset(r.initialOffset(), unlimited())


def test_available_now_runs_its_last_batch_under_the_floor(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 13)]))
    r = reader(tmp_path, catalog, FakeClock(PLANNER_START), minEntriesPerTrigger=5, maxEntriesPerTrigger=5)
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    ends = [start]
    for _ in range(4):
        ends.append(r.latestOffset(ends[-1], ReadMaxRows(5)))
    assert [positions(e)[P0][1] for e in ends[1:]] == [4, 9, 12, 12]  # 5, 5, then the last 3; then no batch


def test_available_now_never_holds_a_batch_the_quota_cut_short(tmp_path):
    clock = FakeClock(2_000.1)
    quota = dict(throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg=3)
    other = reader(tmp_path, FakeCatalog(layout(P0, [(5, 2)])), clock, **quota)  # shares the topic buckets (same file)
    assert positions(other.latestOffset(other.initialOffset(), unlimited())) == {P0: (5, 1)}  # 2 of P0's 3 this window
    catalog = FakeCatalog(layout(P0, [(5, 20)]), layout(P1, [(6, 20)]))
    held = reader(tmp_path, catalog, clock, minEntriesPerTrigger=5, **quota)
    start = held.initialOffset()
    assert held.latestOffset(start, unlimited()) == start  # 1 + 3 < 5: a processing-time trigger waits
    available_now = reader(tmp_path, catalog, clock, minEntriesPerTrigger=5, **quota)
    start = available_now.initialOffset()
    available_now.prepareForTriggerAvailableNow()
    assert positions(available_now.latestOffset(start, unlimited())) == {P0: (5, 0), P1: (6, 2)}  # runs: 1 + 3


def test_trigger_once_reads_everything_whatever_the_floor(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 3)])), FakeClock(PLANNER_START), minEntriesPerTrigger=50)
    assert positions(r.latestOffset(r.initialOffset(), ReadAllAvailable())) == {P0: (5, 2)}


def test_the_engine_refusing_inside_the_transaction_leaves_the_store_unchanged():
    store = MemoryQuotaStore()
    engine = QuotaEngine(QuotaConfig(source=Rate(msgs=10), mode="batch", query_id="q"), store, FakeClock(3_000.0))
    demand = engine_demand(partition=P0, backlog=4)
    seen: list[int] = []
    assert engine.plan([demand], accept=lambda n: seen.append(n) or False) == QuotaPlan()  # nothing admitted or charged
    assert seen == [4] and stored_keys(store) == []
    assert [a.entries for a in engine.plan([demand]).admissions] == [4]
    assert stored_keys(store) != []


def test_pyspark_4_0_and_4_1_refuse_the_floor_at_load(monkeypatch):
    from pulsar_throttled_source import datasource
    from pulsar_throttled_source.stream_spark40 import LatestOffsetStreamReader

    message = r"'minEntriesPerTrigger' needs PySpark 4.2 or newer.*Trigger.AvailableNow"
    with pytest.raises(ValueError, match=message):
        LatestOffsetStreamReader(parse_options({**URLS, "topic": "t", "minentriespertrigger": "5"}))
    monkeypatch.setattr(datasource, "has_admission_control", lambda: False)
    with pytest.raises(ValueError, match=message):
        assert datasource.PulsarThrottledDataSource({**URLS, "topic": "t", "minEntriesPerTrigger": "5"}).parsed  # what load() parses
    assert datasource.PulsarThrottledDataSource({**URLS, "topic": "t"}).parsed  # without the floor, 4.0/4.1 load as before


def test_a_batch_query_refuses_the_floor():
    from pulsar_throttled_source.batch import PulsarBatchReader

    with pytest.raises(ValueError, match="minEntriesPerTrigger throttle a stream's micro-batches"):
        PulsarBatchReader(parse_options({**URLS, "topic": "t", "minentriespertrigger": "5"}))


def test_a_batch_query_refuses_a_task_limit_per_trigger():
    from pulsar_throttled_source.batch import PulsarBatchReader

    with pytest.raises(ValueError, match=r"'maxTasksPerTrigger' applies to streams \(spark.readStream\) only"):
        PulsarBatchReader(parse_options({**URLS, "topic": "t", "maxTasksPerTrigger": "2"}))
    PulsarBatchReader(parse_options({**URLS, "topic": "t", "maxTasksPerTrigger": "0"}))  # the default: nothing to refuse


@pytest.mark.parametrize("text,ms", [("30000", 30_000), ("250ms", 250), ("30s", 30_000), ("15m", 900_000),
                                     ("2min", 120_000), ("1h", 3_600_000), ("1d", 86_400_000), (" 45 S ", 45_000)])
def test_max_trigger_delay_takes_milliseconds_or_sparks_time_strings(text, ms):
    o = parse_options({**URLS, "topic": "t", "minentriespertrigger": "5", "maxtriggerdelay": text})
    assert o.max_trigger_delay_ms == ms
    assert parse_options({**URLS, "topic": "t", "minentriespertrigger": "5"}).max_trigger_delay_ms == 900_000  # Kafka's 15m
