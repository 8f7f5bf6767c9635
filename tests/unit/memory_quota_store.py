"""Quota buckets in one process's memory (store.QuotaStore), for unit tests: no query opens it (a query's store is
the host's SQLite file or Redis, throttling.store_factory)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pulsar_throttled_source.throttling.store import BucketState, MultiplierState, QuotaTransaction


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
