"""Unit tests of the bucket stores: atomic read-modify-write, across threads and processes."""

from __future__ import annotations

import multiprocessing
import pickle
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from builders import stored_keys
from memory_quota_store import MemoryQuotaStore

from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
from pulsar_throttled_source.throttling.store import BucketState


def increment(store: MemoryQuotaStore | SqliteQuotaStore, key: str, times: int) -> None:
    """Read-modify-write in a transaction; a yield in the middle invites a lost update."""
    for _ in range(times):
        with store.transaction() as tx:
            state = tx.get(key) or BucketState(window=0, used_msgs=0.0, used_bytes=0.0)
            time.sleep(0)
            state.used_msgs += 1
            state.used_bytes += 10
            tx.put(key, state)


def used(store: MemoryQuotaStore | SqliteQuotaStore, key: str) -> BucketState | None:
    with store.transaction() as tx:
        return tx.get(key)


def _increment_in_child(path: str, key: str, times: int) -> None:
    increment(SqliteQuotaStore(path), key, times)


# --- memory ------------------------------------------------------------------------------


def test_memory_store_round_trip_and_copies() -> None:
    store = MemoryQuotaStore()
    assert used(store, "k") is None
    state = BucketState(window=7, used_msgs=1.5, used_bytes=20.0)
    with store.transaction() as tx:
        tx.put("k", state)
        assert tx.get("k") == state  # a transaction sees its own writes
    state.used_msgs = 99  # the caller's object is not the stored one
    assert used(store, "k") == BucketState(7, 1.5, 20.0)


def test_memory_store_discards_writes_of_a_failed_transaction() -> None:
    store = MemoryQuotaStore()
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            tx.put("k", BucketState(1, 1.0, 1.0))
            raise RuntimeError("boom")
    assert used(store, "k") is None


def test_memory_store_loses_no_increments_across_threads() -> None:
    store = MemoryQuotaStore()
    threads = [threading.Thread(target=increment, args=(store, "k", 500)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert used(store, "k") == BucketState(0, 1000.0, 10000.0)


def test_memory_store_purge_and_pickle() -> None:
    store = MemoryQuotaStore()
    with store.transaction() as tx:
        tx.put("old", BucketState(1, 1.0, 1.0))
    copy = pickle.loads(pickle.dumps(store))
    assert stored_keys(copy) == ["old"]
    assert store.purge_older_than(3600) == 0
    assert store.purge_older_than(-1) == 1  # everything is older than "one second ahead"
    assert stored_keys(store) == []


# --- sqlite ------------------------------------------------------------------------------


def test_sqlite_creates_parent_dir_table_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "quota.sqlite"
    store = SqliteQuotaStore(str(path))
    assert path.exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = [row[1] for row in conn.execute("PRAGMA table_info(buckets)")]
    assert columns == ["key", "window", "used_msgs", "used_bytes", "updated_at"]
    assert stored_keys(store) == []


def test_sqlite_two_instances_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    first, second = SqliteQuotaStore(path), SqliteQuotaStore(path)
    with first.transaction() as tx:
        tx.put("topic:options:p0", BucketState(window=5, used_msgs=3.0, used_bytes=300.0))
    assert used(second, "topic:options:p0") == BucketState(5, 3.0, 300.0)
    with second.transaction() as tx:
        tx.put("topic:options:p0", BucketState(window=6, used_msgs=1.0, used_bytes=100.0))
    assert used(first, "topic:options:p0") == BucketState(6, 1.0, 100.0)


def test_sqlite_rolls_back_a_failed_transaction(tmp_path: Path) -> None:
    store = SqliteQuotaStore(str(tmp_path / "quota.sqlite"))
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            tx.put("k", BucketState(1, 1.0, 1.0))
            raise RuntimeError("boom")
    assert used(store, "k") is None
    increment(store, "k", 1)  # the connection is usable afterwards
    assert used(store, "k") == BucketState(0, 1.0, 10.0)


def test_sqlite_loses_no_increments_across_threads(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    shared = SqliteQuotaStore(path)
    # Two threads on one instance (a connection each) and one on its own instance.
    targets = [(shared, 100), (shared, 100), (SqliteQuotaStore(path), 100)]
    threads = [threading.Thread(target=increment, args=(store, "k", n)) for store, n in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert used(shared, "k") == BucketState(0, 300.0, 3000.0)


def test_sqlite_loses_no_increments_across_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    parent_store = SqliteQuotaStore(path)
    increment(parent_store, "k", 1)  # the parent has an open connection when it forks
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_increment_in_child, args=(path, "k", 50)) for _ in range(2)]
    # A forked copy of the parent's store must open its own connection.
    children.append(context.Process(target=increment, args=(parent_store, "k", 50)))
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    assert used(parent_store, "k") == BucketState(0, 151.0, 1510.0)


def _open_and_charge_at_once(path: str, start: object, key: str) -> None:
    start.wait()  # type: ignore[attr-defined]
    increment(SqliteQuotaStore(path), key, 1)


def test_sqlite_many_processes_opening_a_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """The tasks of one query open the same new quotaStatePath together: none may be refused with
    "database is locked" (sqlite answers busy without waiting when a switch to WAL or a schema read
    followed by a write races another process; CI failed on it once). 8 processes x 20 new files:
    the old open failed about one file in eight."""
    context = multiprocessing.get_context("fork")
    for round_ in range(20):
        path = str(tmp_path / f"quota{round_}.sqlite")
        start = context.Barrier(8)
        children = [context.Process(target=_open_and_charge_at_once, args=(path, start, "k")) for _ in range(8)]
        for child in children:
            child.start()
        for child in children:
            child.join(timeout=60)
        assert [child.exitcode for child in children] == [0] * 8, f"round {round_}"
        assert used(SqliteQuotaStore(path), "k") == BucketState(0, 8.0, 80.0)


def _uses_a_new_connection(store: SqliteQuotaStore, inherited: sqlite3.Connection) -> None:
    raise SystemExit(0 if store._connection() is not inherited else 1)


def test_sqlite_forked_child_does_not_reuse_the_parents_connection(tmp_path: Path) -> None:
    store = SqliteQuotaStore(str(tmp_path / "quota.sqlite"))
    inherited = store._connection()
    child = multiprocessing.get_context("fork").Process(
        target=_uses_a_new_connection, args=(store, inherited)
    )
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0
    assert store._connection() is inherited  # the parent keeps its own


def test_sqlite_a_second_writer_waits_for_the_first(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    holder, waiter = SqliteQuotaStore(path), SqliteQuotaStore(path, timeout_s=10)
    inside = threading.Event()

    def hold() -> None:
        with holder.transaction() as tx:
            tx.put("k", BucketState(1, 1.0, 1.0))
            inside.set()
            time.sleep(0.2)

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(5)
    started = time.monotonic()
    increment(waiter, "k", 1)  # blocks until the holder commits, then sees its write
    assert time.monotonic() - started >= 0.1
    thread.join()
    assert used(waiter, "k") == BucketState(1, 2.0, 11.0)


def test_sqlite_store_pickles_without_its_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    store = SqliteQuotaStore(path)
    increment(store, "k", 2)  # a live connection exists now
    copy = pickle.loads(pickle.dumps(store))
    assert copy.path == path
    assert used(copy, "k") == BucketState(0, 2.0, 20.0)


def test_sqlite_purge_older_than(tmp_path: Path) -> None:
    path = str(tmp_path / "quota.sqlite")
    store = SqliteQuotaStore(path)
    increment(store, "stale", 1)
    increment(store, "fresh", 1)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE buckets SET updated_at = updated_at - 7200 WHERE key = 'stale'")
    assert store.purge_older_than(3600) == 1
    assert stored_keys(store) == ["fresh"]


def test_sqlite_unopenable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    bad = str(blocker / "quota.sqlite")
    with pytest.raises(ValueError, match="cannot open quota store at") as error:
        SqliteQuotaStore(bad)
    assert bad in str(error.value)


def test_sqlite_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="garbage.sqlite"):
        SqliteQuotaStore(str(garbage))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_many_buckets_are_read_and_charged_in_one_call(kind: str, tmp_path: Path) -> None:
    # A plan at 1,000 partitions reads and charges a bucket each: more keys than one SQLite query binds.
    store = MemoryQuotaStore() if kind == "memory" else SqliteQuotaStore(str(tmp_path / "q.sqlite"))
    keys = [f"topic:{i}" for i in range(1_203)]
    with store.transaction() as tx:
        assert tx.get_many(keys) == dict.fromkeys(keys)
        tx.put_many({k: BucketState(i, float(i), 2.0 * i) for i, k in enumerate(keys) if i % 2})
        assert tx.get_many(["topic:1"]) == {"topic:1": BucketState(1, 1.0, 2.0)}  # its own writes
    with store.transaction() as tx:
        found = tx.get_many([*keys, "topic:3"])
    assert list(found) == keys
    assert all(found[k] == (BucketState(i, float(i), 2.0 * i) if i % 2 else None) for i, k in enumerate(keys))
    assert used(store, "topic:1201") == BucketState(1201, 1201.0, 2402.0)
