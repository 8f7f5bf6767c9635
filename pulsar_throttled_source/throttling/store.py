"""Where quota buckets live, so that every process on one host charges the same buckets.

A bucket is a few numbers (what was admitted in its current window); next to the buckets, each broker
cluster's congestion multiplier (adaptiveThrottling: ``MultiplierState``, moved by throttling.congestion). The quota engine
reads and charges several buckets in one *transaction*; the store guarantees that no other
process or thread interleaves with it, which is what keeps concurrent micro-batch planners
from over-admitting (the "get remaining -> load -> deduct" race the Pulsar docs describe).

Stores:
- ``MemoryQuotaStore``: one process, for unit tests and single-query use.
- ``SqliteQuotaStore``: one sqlite file per host, shared by every process that opens it.
- ``redis_store.RedisQuotaStore``: a Redis server, shared by planners on any host (quotaStore).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol


@dataclass(slots=True)
class BucketState:
    """What one bucket has admitted.

    ``window`` is the epoch-aligned window index (``floor(now / period)``) at which
    ``used_msgs`` / ``used_bytes`` were last valid; the engine rolls them forward.
    """

    window: int
    used_msgs: float
    used_bytes: float


@dataclass(slots=True)
class MultiplierState:
    """One cluster's congestion multiplier m (throttling.congestion): its last decided window (epoch-aligned
    start, ms), the m that window started from, the most cautious verdict reached in it, and the m that gave."""

    window_ms: int
    base: float
    verdict: str  # "increase", "hold" or "decrease"
    m: float


class QuotaTransaction(Protocol):
    """Reads and writes inside one atomic transaction."""

    def get(self, key: str) -> BucketState | None: ...

    def put(self, key: str, state: BucketState) -> None: ...

    # A plan reads and charges a bucket per partition: at 1,000 partitions one round trip each was
    # most of the plan's time, so the engine asks for all of them at once.
    def get_many(self, keys: Sequence[str]) -> dict[str, BucketState | None]: ...

    def put_many(self, states: Mapping[str, BucketState]) -> None: ...

    # The shared multiplier of a cluster, read and written in the same atomic transaction as buckets are.
    def get_multiplier(self, cluster: str) -> MultiplierState | None: ...

    def put_multiplier(self, cluster: str, state: MultiplierState) -> None: ...


class QuotaStore(Protocol):
    """A place to keep buckets; ``transaction()`` is atomic against other users."""

    def transaction(self) -> AbstractContextManager[QuotaTransaction]: ...

    def purge_older_than(self, seconds: float) -> int: ...


# ---------------------------------------------------------------------------------------
# In memory


class _MemoryTransaction:
    def __init__(self, rows: dict[str, tuple[BucketState, float]], multipliers: dict[str, tuple[MultiplierState, float]]) -> None:
        self._rows = rows
        self._multipliers = multipliers
        self._staged: dict[str, BucketState] = {}
        self._staged_multipliers: dict[str, MultiplierState] = {}

    def get(self, key: str) -> BucketState | None:
        if key in self._staged:
            return replace(self._staged[key])
        row = self._rows.get(key)
        # Copies, so a caller mutating a state cannot change the store behind our back.
        return replace(row[0]) if row else None

    def put(self, key: str, state: BucketState) -> None:
        self._staged[key] = replace(state)

    def get_many(self, keys: Sequence[str]) -> dict[str, BucketState | None]:
        return {key: self.get(key) for key in keys}

    def put_many(self, states: Mapping[str, BucketState]) -> None:
        for key, state in states.items():
            self.put(key, state)

    def get_multiplier(self, cluster: str) -> MultiplierState | None:
        if cluster in self._staged_multipliers:
            return replace(self._staged_multipliers[cluster])
        row = self._multipliers.get(cluster)
        return replace(row[0]) if row else None

    def put_multiplier(self, cluster: str, state: MultiplierState) -> None:
        self._staged_multipliers[cluster] = replace(state)


class MemoryQuotaStore:
    """Buckets in a dict, one lock for atomicity. Thread-safe, not shared between processes."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[BucketState, float]] = {}  # key -> (state, updated_at)
        self._multipliers: dict[str, tuple[MultiplierState, float]] = {}  # cluster -> (state, updated_at)
        self._lock = threading.Lock()

    @contextmanager
    def transaction(self) -> Iterator[QuotaTransaction]:
        with self._lock:
            tx = _MemoryTransaction(self._rows, self._multipliers)
            yield tx
            # Only reached without an exception: writes apply all together or not at all.
            now = time.time()
            for key, state in tx._staged.items():
                self._rows[key] = (state, now)
            for cluster, multiplier in tx._staged_multipliers.items():
                self._multipliers[cluster] = (multiplier, now)

    def purge_older_than(self, seconds: float) -> int:
        """Drop buckets not written for ``seconds``; returns how many were dropped."""
        cutoff = time.time() - seconds
        with self._lock:
            stale = [key for key, (_, updated_at) in self._rows.items() if updated_at < cutoff]
            for key in stale:
                del self._rows[key]
            for cluster in [c for c, (_, updated_at) in self._multipliers.items() if updated_at < cutoff]:
                del self._multipliers[cluster]
        return len(stale)

    # A lock cannot be pickled; a copy gets its own lock (and its own buckets).
    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"_rows": dict(self._rows), "_multipliers": dict(self._multipliers)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._rows = state["_rows"]
        self._multipliers = state.get("_multipliers", {})
        self._lock = threading.Lock()


# ---------------------------------------------------------------------------------------
# sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (
    key TEXT PRIMARY KEY,
    "window" INTEGER NOT NULL,
    used_msgs REAL NOT NULL,
    used_bytes REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS multipliers (
    cluster TEXT PRIMARY KEY,
    window_ms INTEGER NOT NULL,
    base REAL NOT NULL,
    verdict TEXT NOT NULL,
    m REAL NOT NULL,
    updated_at REAL NOT NULL
)
"""


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
        row = self._conn.execute("SELECT window_ms, base, verdict, m FROM multipliers WHERE cluster = ?", (cluster,)).fetchone()
        return MultiplierState(int(row[0]), float(row[1]), str(row[2]), float(row[3])) if row else None

    def put_multiplier(self, cluster: str, state: MultiplierState) -> None:
        self._conn.execute(
            "INSERT INTO multipliers (cluster, window_ms, base, verdict, m, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(cluster) DO UPDATE SET window_ms = excluded.window_ms, base = excluded.base, "
            "verdict = excluded.verdict, m = excluded.m, updated_at = excluded.updated_at",
            (cluster, int(state.window_ms), float(state.base), state.verdict, float(state.m), time.time()))


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
            conn.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            conn.execute("PRAGMA synchronous=NORMAL")  # quota counters need no fsync per commit
            conn.executescript(_SCHEMA)
            return conn
        except (OSError, sqlite3.Error) as exc:
            if conn is not None:
                conn.close()
            raise ValueError(f"cannot open quota store at {self.path!r} (option 'quotaStatePath'): {exc}") from exc

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
