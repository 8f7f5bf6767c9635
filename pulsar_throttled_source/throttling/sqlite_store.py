"""Quota buckets in one sqlite file per host (store.QuotaStore), shared by every process on the host
that opens the same path (quotaStatePath): a transaction holds sqlite's write lock."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .store import BucketState, MultiplierState, QuotaTransaction

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS buckets (
    key TEXT PRIMARY KEY,
    "window" INTEGER NOT NULL,
    used_msgs REAL NOT NULL,
    used_bytes REAL NOT NULL,
    updated_at REAL NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS multipliers (
    cluster TEXT PRIMARY KEY,
    window_ms INTEGER NOT NULL,
    base REAL NOT NULL,
    verdict TEXT NOT NULL,
    m REAL NOT NULL,
    updated_at REAL NOT NULL,
    slow_start INTEGER NOT NULL DEFAULT 0
)""",
)


_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
SQLITE_KEYS_PER_QUERY = 500  # below SQLite's oldest limit of 999 bound parameters


class _SqliteTransaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def get(self, key: str) -> BucketState | None:
        return self.get_many([key])[key]

    def put(self, key: str, state: BucketState) -> None:
        self.put_many({key: state})

    def get_many(self, keys: Sequence[str]) -> dict[str, BucketState | None]:
        found: dict[str, BucketState | None] = dict.fromkeys(keys)
        unique = list(found)
        for i in range(0, len(unique), SQLITE_KEYS_PER_QUERY):
            chunk = unique[i:i + SQLITE_KEYS_PER_QUERY]
            rows = self._conn.execute(
                f'SELECT key, "window", used_msgs, used_bytes FROM buckets WHERE key IN ({",".join("?" * len(chunk))})',
                chunk).fetchall()
            for key, window, msgs, size in rows:
                found[key] = BucketState(window=int(window), used_msgs=float(msgs), used_bytes=float(size))
        return found

    def put_many(self, states: Mapping[str, BucketState]) -> None:
        now = time.time()
        self._conn.executemany(
            'INSERT INTO buckets (key, "window", used_msgs, used_bytes, updated_at) VALUES (?, ?, ?, ?, ?) '
            'ON CONFLICT(key) DO UPDATE SET "window" = excluded."window", used_msgs = excluded.used_msgs, '
            "used_bytes = excluded.used_bytes, updated_at = excluded.updated_at",
            [(key, int(s.window), float(s.used_msgs), float(s.used_bytes), now) for key, s in states.items()])

    def get_multiplier(self, cluster: str) -> MultiplierState | None:
        row = self._conn.execute("SELECT window_ms, base, verdict, m, slow_start FROM multipliers WHERE cluster = ?",
                                 (cluster,)).fetchone()
        return MultiplierState(int(row[0]), float(row[1]), str(row[2]), float(row[3]), bool(row[4])) if row else None

    def put_multiplier(self, cluster: str, state: MultiplierState) -> None:
        self._conn.execute(
            "INSERT INTO multipliers (cluster, window_ms, base, verdict, m, updated_at, slow_start) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(cluster) DO UPDATE SET window_ms = excluded.window_ms, base = excluded.base, "
            "verdict = excluded.verdict, m = excluded.m, updated_at = excluded.updated_at, slow_start = excluded.slow_start",
            (cluster, int(state.window_ms), float(state.base), state.verdict, float(state.m), time.time(),
             int(state.slow_start)))


def _add_slow_start_column(conn: sqlite3.Connection) -> None:
    """A file written before slow start existed (0.1.0's multipliers table) gains its column: its records read as
    out of slow start, as they were."""
    if any(row[1] == "slow_start" for row in conn.execute("PRAGMA table_info(multipliers)")):
        return
    try:
        conn.execute("ALTER TABLE multipliers ADD COLUMN slow_start INTEGER NOT NULL DEFAULT 0")
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):  # another process added it first
            raise


def _retry_while_busy(step: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _BUSY_CODES  # extended codes carry it low
            if not busy or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)  # another process holds the lock for a few statements: a short wait, growing
            pause = min(pause * 2, 0.1)


class SqliteQuotaStore:
    """Buckets in one sqlite file, shared by all processes on a host that use the same path.

    Safe to construct from a path in any process and to pickle: connections are opened
    lazily, one per thread and process, and are never carried across fork or pickle.
    Concurrent writers wait (up to ``timeout_s``) instead of failing.
    """

    def __init__(self, path: str, timeout_s: float = 30.0) -> None:
        self.path = os.fspath(path)
        self.timeout_s = timeout_s
        self._reset_connections()
        # Fail now, with the path in the message, rather than at the first micro-batch.
        self._open().close()

    # --- connections -------------------------------------------------------------------

    def _reset_connections(self) -> None:
        self._pid = os.getpid()
        self._local = threading.local()
        # Connections inherited through fork: kept referenced, never used or closed, so
        # the child cannot disturb the parent's sqlite state (see sqlite "howtocorrupt").
        self._inherited: list[threading.local] = []

    def _open(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, mode=0o700, exist_ok=True)  # a new folder is private to its user
            # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
            # timeout: sqlite's busy handler makes a second writer wait for the first.
            conn = sqlite3.connect(
                self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False
            )
            self._initialise(conn)
            return conn
        except (OSError, sqlite3.Error) as exc:
            if conn is not None:
                conn.close()
            raise ValueError(f"cannot open quota store at {self.path!r} (option 'quotaStatePath'): {exc}") from exc

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """WAL mode and the tables, safe when many processes open a new file at once (tasks of one query do).

        Switching to WAL takes an exclusive lock and sqlite answers busy without calling its busy handler
        when that could deadlock, so the switch is retried until ``timeout_s``; the tables are made inside
        BEGIN IMMEDIATE, which waits for the write lock, where autocommit statements that read the schema
        and then write could be refused for the same reason ("database is locked" at open, found in CI)."""
        _retry_while_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"), self.timeout_s)  # readers never block the writer
        conn.execute("PRAGMA synchronous=NORMAL")  # quota counters need no fsync per commit
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            _add_slow_start_column(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _connection(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            # We are in a forked child: start fresh, keep the parent's connections alive.
            inherited = self._inherited + [self._local]
            self._reset_connections()
            self._inherited = inherited
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (another use reopens it)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._pid == os.getpid():
            conn.close()
            self._local.conn = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.timeout_s = state["timeout_s"]
        self._reset_connections()

    def __repr__(self) -> str:
        return f"SqliteQuotaStore({self.path!r})"

    # --- store API ---------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[QuotaTransaction]:
        conn = self._connection()
        # IMMEDIATE takes the write lock up front, so read-modify-write cannot interleave
        # with another process (a deferred BEGIN would fail on upgrade instead of waiting).
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _SqliteTransaction(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def purge_older_than(self, seconds: float) -> int:
        """Drop buckets not written for ``seconds``; returns how many were dropped."""
        conn = self._connection()
        cutoff = time.time() - seconds
        conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = conn.execute("DELETE FROM buckets WHERE updated_at < ?", (cutoff,))
            conn.execute("DELETE FROM multipliers WHERE updated_at < ?", (cutoff,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return cursor.rowcount
