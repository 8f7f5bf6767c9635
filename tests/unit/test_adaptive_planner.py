"""adaptiveThrottling wired into the driver's planner: the quotas are scaled by the m the cluster's record in the quota
store holds, the same file another Spark application on the host writes; the stress signals see each plan's catalog
snapshot and each planned batch; the progress report and the planner's log line say m, what fired and the ceiling."""

from __future__ import annotations

import logging

from builders import P0, layout, positions, reader, unlimited
from fakes import FakeCatalog, FakeClock

from pulsar_throttled_source.metadata.catalog import CatalogSnapshot
from pulsar_throttled_source.metadata.stress_readings import BrokerStress
from pulsar_throttled_source.throttling.congestion import cluster_key
from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
from pulsar_throttled_source.throttling.store import MultiplierState

ADMIN = "http://127.0.0.1:8080"
QUOTA = {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": 10, "admin.url": ADMIN,
         "adaptiveThrottlingSlowStart": "false"}  # m starts at the ceiling (the default slow start: test_congestion.py)


def test_with_no_signals_the_quotas_apply_as_configured_and_m_is_recorded(tmp_path):
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock, adaptiveThrottling="true", **QUOTA)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 9)}  # as test_planner's test_batch_quota_per_window_with_a_fake_clock
    with SqliteQuotaStore(str(tmp_path / "quota.sqlite")).transaction() as tx:
        assert tx.get_multiplier(cluster_key(ADMIN)) == MultiplierState(2_000_000, 1.0, "increase", 1.0)


def test_by_default_a_new_cluster_starts_at_the_floor_and_doubles_each_clear_window(tmp_path):
    clock = FakeClock(2_000.1)
    quota = {k: v for k, v in QUOTA.items() if k != "adaptiveThrottlingSlowStart"}
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 40)])), clock, adaptiveThrottling="true", **quota)
    start, ends = r.initialOffset(), []
    for window in range(4):  # 10 s controller windows: m 0.2, 0.4, 0.8, 1.0 of 10 entries a second
        clock.now = 2_000.1 + 10 * window
        start = r.latestOffset(start, unlimited())
        ends.append(positions(start)[P0][1])
    assert ends == [1, 5, 13, 23]  # 2, 4, 8 and 10 entries
    with SqliteQuotaStore(str(tmp_path / "quota.sqlite")).transaction() as tx:
        assert tx.get_multiplier(cluster_key(ADMIN)) == MultiplierState(2_030_000, 0.8, "increase", 1.0, slow_start=True)


def test_a_backed_off_cluster_admits_m_times_the_quota(tmp_path):
    with SqliteQuotaStore(str(tmp_path / "quota.sqlite")).transaction() as tx:  # another application backed off
        tx.put_multiplier(cluster_key(ADMIN), MultiplierState(1_990_000, 1.0, "decrease", 0.5))
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock, adaptiveThrottling="true", **QUOTA)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 4)}  # 0.55 x 10 (one increase from 0.5): 5 entries, then held
    clock.now = 2_000.9
    assert r.latestOffset(first, unlimited()) == first


def stressed(catalog: FakeCatalog, at: float, pending: int) -> None:
    """The catalog's next refresh: the same layouts, `pending` entries waiting for the bookies."""
    old = catalog.snap
    catalog.snap = CatalogSnapshot(at, old.layouts, {}, {}, at, {P0: BrokerStress(pending, None)})


def test_pending_adds_in_the_plans_snapshots_lower_m_and_the_report_says_so(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pulsar_throttled_source")
    clock = FakeClock(2_000.1)
    catalog = FakeCatalog(layout(P0, [(5, 100)]))
    r = reader(tmp_path, catalog, clock, adaptiveThrottling="true", **QUOTA)
    stressed(catalog, 2_000.0, 40)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 4)}  # m 0.5 x 10
    adaptive = r.reportLatestOffset()["adaptive"]
    assert adaptive == {"multiplier": 0.5, "verdict": "decrease", "fired": ["pendingAdds"], "unreadable": [],
                        "waiting": [],
                        "windowStartMs": 2_000_000,
                        "ceiling": {"topic": {"messages": 10, "bytes": None, "periodSeconds": 1,
                                              "relativeToPublishRate": False}, "brokerPolicies": False}}
    assert any("adaptive m=0.500 of the ceilings (decrease: pendingAdds fired)" in rec.getMessage() for rec in caplog.records)
    stressed(catalog, 2_010.0, 0)  # the bookies caught up
    clock.now = 2_010.1
    second = r.latestOffset(first, unlimited())
    assert positions(second) == {P0: (5, 9)}  # m 0.55: 5 entries
    assert r.reportLatestOffset()["adaptive"]["verdict"] == "increase"


def test_batches_overrunning_the_trigger_interval_lower_m(tmp_path):
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 100)])), clock, adaptiveThrottling="true",
               adaptiveThrottlingTriggerInterval="1s", **QUOTA)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(end) == {P0: (5, 9)}  # m 1
    for _ in range(3):  # batches of 3 s under a 1 s trigger, in the same controller window
        clock.now += 3.0
        end = r.latestOffset(end, unlimited())
    clock.now = 2_010.1
    r.latestOffset(end, unlimited())
    report = r.reportLatestOffset()["adaptive"]
    assert (report["multiplier"], report["fired"]) == (0.5, ["batchDuration"])


def test_the_reader_pickles_without_its_planner(tmp_path):
    """Spark pickles the reader into the planner process and into read tasks: the planner (the signals with their
    lock, the admin session, the quota store) stays behind; an unpickled reader builds its own where it plans."""
    import pickle

    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 100)])), FakeClock(2_000.1), adaptiveThrottling="true", **QUOTA)
    r.latestOffset(r.initialOffset(), unlimited())
    copy = pickle.loads(pickle.dumps(r))
    assert r._planner is not None and copy._planner is None and copy.options == r.options
