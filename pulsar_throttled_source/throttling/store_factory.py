"""The quota store a query's options name. Apart from the stores, so that sqlite_store.py and redis_store.py
(each built on store.py's protocol and states) do not import each other."""

from __future__ import annotations

from ..admin_endpoint import QuotaStoreEndpoint
from .sqlite_store import SqliteQuotaStore
from .store import QuotaStore


def open_quota_store(redis: QuotaStoreEndpoint | None, sqlite_path: str) -> QuotaStore:
    """The store a query's options name: a Redis server (quotaStore) or the host's SQLite file."""
    if redis is not None:
        from .redis_store import RedisQuotaStore  # redis is only imported by queries that use it

        return RedisQuotaStore(redis)
    return SqliteQuotaStore(sqlite_path)
