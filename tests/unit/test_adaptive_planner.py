"""adaptiveThrottling wired into the driver's planner (no stress signals yet): the quotas are scaled by the m the
cluster's record in the quota store holds, the same file another Spark application on the host writes."""

from __future__ import annotations

from builders import P0, layout, positions, reader, unlimited
from fakes import FakeCatalog, FakeClock

from pulsar_throttled_source.throttling.congestion import cluster_key
from pulsar_throttled_source.throttling.store import MultiplierState, SqliteQuotaStore

ADMIN = "http://127.0.0.1:8080"
QUOTA = {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": 10, "admin.url": ADMIN}


def test_with_no_signals_the_quotas_apply_as_configured_and_m_is_recorded(tmp_path):
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock, adaptiveThrottling="true", **QUOTA)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 9)}  # as test_planner's test_batch_quota_per_window_with_a_fake_clock
    with SqliteQuotaStore(str(tmp_path / "quota.sqlite")).transaction() as tx:
        assert tx.get_multiplier(cluster_key(ADMIN)) == MultiplierState(2_000_000, 1.0, "increase", 1.0)


def test_a_backed_off_cluster_admits_m_times_the_quota(tmp_path):
    with SqliteQuotaStore(str(tmp_path / "quota.sqlite")).transaction() as tx:  # another application backed off
        tx.put_multiplier(cluster_key(ADMIN), MultiplierState(1_990_000, 1.0, "decrease", 0.5))
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock, adaptiveThrottling="true", **QUOTA)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 4)}  # 0.55 x 10 (one increase from 0.5): 5 entries, then held
    clock.now = 2_000.9
    assert r.latestOffset(first, unlimited()) == first
