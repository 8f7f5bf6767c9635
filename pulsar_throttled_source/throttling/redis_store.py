"""Quota buckets in a Redis server (option quotaStore=redis://...), so that topic and subscription
quotas hold across queries on different hosts: Databricks jobs each with their own driver, Spark
applications on several clusters reading one topic, as Pulsar's topic quota is shared by every
subscription of the topic.

The engine's transaction (read the buckets, admit, charge) runs under one lock in Redis, the way
the SQLite store takes its write lock: the redis-py lock (a key with a token and a time-to-live,
released by a server-side script). The charges are then written in one MULTI/EXEC that only
applies while this planner still holds the lock, so a planner that lost it (planning longer than
the lock's life) charges nothing and fails instead of racing another. Each cluster's congestion
multiplier (adaptiveThrottling) is read and written the same way, under the same lock. Buckets and
multipliers expire a day after their last write, which is the purge. The password (quotaStorePassword) travels beside
the URL, never in it, and appears in no repr, log or error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ..admin_endpoint import QuotaStoreEndpoint
from ..credentials import scrub
from .store import BucketState, MultiplierState, QuotaTransaction

KEY_PREFIX = "pulsar-throttled:"
LOCK_TTL_S = 10.0  # longer than any planning step holds it
LOCK_WAIT_S = 30.0  # as long as the SQLite store waits for its lock
BUCKET_TTL_S = 24 * 3600
OPTION_HINT = "option 'quotaStore'"


class QuotaStoreError(RuntimeError):
    pass


class _RedisTransaction:
    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self.staged: dict[str, BucketState] = {}
        self.staged_multipliers: dict[str, MultiplierState] = {}

    def get(self, key: str) -> BucketState | None:
        if key in self.staged:
            return replace(self.staged[key])
        return _state(self._client.hgetall(self._prefix + "bucket:" + key))

    def put(self, key: str, state: BucketState) -> None:
        self.staged[key] = replace(state)

    def get_many(self, keys: Sequence[str]) -> dict[str, BucketState | None]:
        asked = [key for key in dict.fromkeys(keys) if key not in self.staged]
        with self._client.pipeline(transaction=False) as pipe:  # one round trip for all of them
            for key in asked:
                pipe.hgetall(self._prefix + "bucket:" + key)
            rows = pipe.execute()
        found = {key: _state(row) for key, row in zip(asked, rows, strict=True)}
        return {key: replace(self.staged[key]) if key in self.staged else found[key] for key in keys}

    def put_many(self, states: Mapping[str, BucketState]) -> None:
        for key, state in states.items():
            self.put(key, state)

    def get_multiplier(self, cluster: str) -> MultiplierState | None:
        if cluster in self.staged_multipliers:
            return replace(self.staged_multipliers[cluster])
        row = self._client.hgetall(self._prefix + "multiplier:" + cluster)
        if not row:
            return None
        return MultiplierState(int(row[b"window_ms"]), float(row[b"base"]), row[b"verdict"].decode(), float(row[b"m"]),
                               row.get(b"slow_start", b"0") == b"1")  # a record from before slow start: out of it

    def put_multiplier(self, cluster: str, state: MultiplierState) -> None:
        self.staged_multipliers[cluster] = replace(state)


def _state(row: dict[bytes, bytes]) -> BucketState | None:
    if not row:
        return None
    return BucketState(window=int(row[b"window"]), used_msgs=float(row[b"used_msgs"]), used_bytes=float(row[b"used_bytes"]))


class RedisQuotaStore:
    """Buckets in Redis under `prefix`, shared by every planner that uses the same server and prefix."""

    def __init__(self, endpoint: QuotaStoreEndpoint, prefix: str = KEY_PREFIX) -> None:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        self._endpoint = endpoint
        self._shown = endpoint.url  # never holds user-info (options.values.quota_store)
        self._prefix = prefix
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError,)
        # A short network blip is retried by redis-py itself; a store that stays away fails planning.
        self._client = redis.Redis.from_url(endpoint.url, username=endpoint.username, password=endpoint.password,
                                            socket_timeout=5, socket_connect_timeout=5,
                                            retry=Retry(ExponentialBackoff(cap=2.0, base=0.2), 3),
                                            retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError])
        try:
            self._client.ping()  # fail now, naming the option, rather than at the first micro-batch
        except self._errors as e:
            raise self._error("cannot reach the quota store", e) from None

    def __repr__(self) -> str:
        return f"RedisQuotaStore({self._shown!r})"

    def _error(self, what: str, error: BaseException) -> QuotaStoreError:
        detail = scrub(str(error), self._endpoint)
        return QuotaStoreError(f"{what} at {self._shown} ({OPTION_HINT}): {type(error).__name__}: {detail}. Nothing was "
                               "admitted or charged; check that the Redis server is up and reachable from the driver.")

    @contextmanager
    def transaction(self) -> Iterator[QuotaTransaction]:
        try:
            lock = self._client.lock(self._prefix + "lock", timeout=LOCK_TTL_S, blocking_timeout=LOCK_WAIT_S)
            if not lock.acquire():
                raise QuotaStoreError(f"could not take the quota store's lock at {self._shown} ({OPTION_HINT}) within "
                                      f"{LOCK_WAIT_S:.0f} s: another planner holds it")
        except self._errors as e:
            raise self._error("cannot take the quota store's lock", e) from None
        try:
            tx = _RedisTransaction(self._client, self._prefix)
            try:
                yield tx
            except self._errors as e:
                raise self._error("cannot read the quota buckets", e) from None
            self._commit(tx, lock)
        finally:
            try:
                lock.release()
            except self._errors:  # expired or the server is away: nothing left to release
                pass

    def _commit(self, tx: _RedisTransaction, lock: Any) -> None:
        import redis

        now = time.time()
        try:
            with self._client.pipeline() as pipe:
                pipe.watch(lock.name)  # EXEC fails if the lock changed hands meanwhile
                if pipe.get(lock.name) != lock.local.token:
                    raise QuotaStoreError(f"lost the quota store's lock at {self._shown} ({OPTION_HINT}): planning held it "
                                          f"longer than {LOCK_TTL_S:.0f} s; nothing was charged")
                pipe.multi()
                for key, state in tx.staged.items():
                    name = self._prefix + "bucket:" + key
                    pipe.hset(name, mapping={"window": int(state.window), "used_msgs": float(state.used_msgs),
                                             "used_bytes": float(state.used_bytes), "updated_at": now})
                    pipe.expire(name, BUCKET_TTL_S)
                for cluster, m in tx.staged_multipliers.items():
                    name = self._prefix + "multiplier:" + cluster
                    pipe.hset(name, mapping={"window_ms": int(m.window_ms), "base": float(m.base), "verdict": m.verdict,
                                             "m": float(m.m), "slow_start": int(m.slow_start), "updated_at": now})
                    pipe.expire(name, BUCKET_TTL_S)
                pipe.execute()
        except redis.exceptions.WatchError:
            raise QuotaStoreError(f"lost the quota store's lock at {self._shown} ({OPTION_HINT}) while charging; "
                                  "nothing was charged") from None
        except self._errors as e:
            raise self._error("cannot charge the quota buckets", e) from None

    def purge_older_than(self, seconds: float) -> int:
        """Buckets expire BUCKET_TTL_S after their last charge: Redis purges them itself."""
        return 0

    def close(self) -> None:
        self._client.close()
