"""The cluster's congestion multiplier in the quota store: atomic read-modify-write in the store's transaction, kept
across a restart, purged with stale buckets; two planners (two store objects, as two Spark applications) deciding
in the same window apply one decision. The Redis store's twin is tests/integration/test_redis_multiplier.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_quota_store import MemoryQuotaStore
from multiplier_checks import CLUSTER, W, apply, shared_store_checks

from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
from pulsar_throttled_source.throttling.store import MultiplierState, QuotaStore


def test_two_planners_on_one_sqlite_file_decide_once_per_window(tmp_path: Path):
    shared_store_checks(lambda: SqliteQuotaStore(str(tmp_path / "quota.sqlite")))


def test_threads_sharing_a_memory_store_decide_once_per_window():
    store = MemoryQuotaStore()
    shared_store_checks(lambda: store)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_multiplier_round_trips_and_a_failed_transaction_writes_nothing(tmp_path: Path, kind: str):
    store: QuotaStore = MemoryQuotaStore() if kind == "memory" else SqliteQuotaStore(str(tmp_path / "q.sqlite"))
    with store.transaction() as tx:
        assert tx.get_multiplier(CLUSTER) is None
        tx.put_multiplier(CLUSTER, MultiplierState(W, 1.0, "decrease", 0.5))
        assert tx.get_multiplier(CLUSTER) == MultiplierState(W, 1.0, "decrease", 0.5)  # its own write, before commit
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.put_multiplier(CLUSTER, MultiplierState(2 * W, 0.5, "decrease", 0.25))
        raise RuntimeError("planning failed")
    with store.transaction() as tx:
        assert tx.get_multiplier(CLUSTER) == MultiplierState(W, 1.0, "decrease", 0.5)
        assert tx.get_multiplier("http://other:8080") is None  # one record per cluster


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_slow_start_is_kept_with_the_multiplier(tmp_path: Path, kind: str):
    store: QuotaStore = MemoryQuotaStore() if kind == "memory" else SqliteQuotaStore(str(tmp_path / "q.sqlite"))
    with store.transaction() as tx:
        tx.put_multiplier(CLUSTER, MultiplierState(W, 0.2, "increase", 0.4, slow_start=True))
    with store.transaction() as tx:
        assert tx.get_multiplier(CLUSTER) == MultiplierState(W, 0.2, "increase", 0.4, slow_start=True)


def test_a_quota_file_from_before_slow_start_gains_the_column_and_its_record_reads_out_of_slow_start(tmp_path: Path):
    import sqlite3

    path = tmp_path / "quota.sqlite"
    old = sqlite3.connect(path)  # 0.1.0's multipliers table, with a record in it
    old.executescript("CREATE TABLE multipliers (cluster TEXT PRIMARY KEY, window_ms INTEGER NOT NULL, base REAL NOT NULL, "
                      "verdict TEXT NOT NULL, m REAL NOT NULL, updated_at REAL NOT NULL);")
    old.execute("INSERT INTO multipliers VALUES (?, ?, 1.0, 'decrease', 0.5, ?)", (CLUSTER, W, 1e12))
    old.commit()
    old.close()
    store = SqliteQuotaStore(str(path))
    with store.transaction() as tx:
        assert tx.get_multiplier(CLUSTER) == MultiplierState(W, 1.0, "decrease", 0.5, slow_start=False)
    SqliteQuotaStore(str(path))  # opened again (another process): the column is there already


def test_a_restarted_query_resumes_from_the_stored_multiplier(tmp_path: Path):
    path = str(tmp_path / "quota.sqlite")
    apply(SqliteQuotaStore(path), W, "decrease")
    reopened = SqliteQuotaStore(path)  # a new process: nothing in memory
    assert apply(reopened, 2 * W, "increase").m == 0.55


def test_a_multiplier_no_one_wrote_for_a_day_is_purged(tmp_path: Path):
    store = SqliteQuotaStore(str(tmp_path / "quota.sqlite"))
    apply(store, W, "decrease")
    store.purge_older_than(3600)
    assert apply(store, 2 * W, "hold").m == 0.5  # recent: kept
    store.purge_older_than(-1)  # everything is older than the future
    with store.transaction() as tx:
        assert tx.get_multiplier(CLUSTER) is None
