"""The quota store a query's options name. Apart from the stores, so that store.py (the protocol, the
in-memory and SQLite stores) and redis_store.py (which builds on store.py's types) do not import each other."""

from __future__ import annotations

from .store import QuotaStore, SqliteQuotaStore


def open_quota_store(url: str | None, sqlite_path: str) -> QuotaStore:
    """The store a query's options name: a Redis server (quotaStore) or the host's SQLite file."""
    if url:
        from .redis_store import RedisQuotaStore  # redis is only imported by queries that use it

        return RedisQuotaStore(url)
    return SqliteQuotaStore(sqlite_path)
