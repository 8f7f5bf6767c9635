"""Where quota buckets live, so that every process on one host charges the same buckets.

A bucket is a few numbers (what was admitted in its current window); next to the buckets, each broker
cluster's congestion multiplier (adaptiveThrottling: ``MultiplierState``, moved by throttling.congestion). The quota engine
reads and charges several buckets in one *transaction*; the store guarantees that no other
process or thread interleaves with it, which is what keeps concurrent micro-batch planners
from over-admitting (the "get remaining -> load -> deduct" race the Pulsar docs describe).

This module holds what every store shares: the states and the protocol. The stores:
- ``sqlite_store.SqliteQuotaStore``: one sqlite file per host, shared by every process that opens it.
- ``redis_store.RedisQuotaStore``: a Redis server, shared by planners on any host (quotaStore).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol


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
    start, ms), the m that window started from, the most cautious verdict reached in it, the m that gave, and
    whether m is still in slow start (no decrease decided yet: an increase doubles m)."""

    window_ms: int
    base: float
    verdict: str  # "increase", "hold" or "decrease"
    m: float
    slow_start: bool = False  # a record written before slow start existed had started at 1: additive from there


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
