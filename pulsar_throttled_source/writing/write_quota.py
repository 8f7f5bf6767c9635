"""Write quotas: messages and bytes per partition topic and window (publishThrottlingRateInMsg,
publishThrottlingRateInByte, named after Pulsar's publish-rate policy), held by every task of every write that
names the same quota store (the reader's: the host's SQLite file at quotaStatePath, or a Redis server, quotaStore).

A task takes permits for a partition from its bucket (`publish:<partition>`) before it sends there, a share of the
window's quota at a time (at most a tenth, so several tasks share a window), and waits for the next window when
the bucket is spent. The buckets are the reader's (throttling.buckets: epoch-aligned windows; over-admission is
debt the next windows repay, unused quota is lost), in the same store, under their own keys.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..admin_endpoint import QuotaStoreEndpoint
from ..throttling.buckets import BucketSpec, roll_forward, scaled
from ..throttling.model import TOPIC_LEVEL
from ..throttling.store import QuotaStore
from ..throttling.store_factory import open_quota_store

GRANT_SHARE = 10  # a task takes at most 1/GRANT_SHARE of a window's quota at a time


@dataclass(frozen=True)
class WriteQuota:
    """publishThrottlingRateInMsg / ...InByte per partition topic and window (-1: none), and where the buckets live."""

    msgs: int = -1
    bytes: int = -1
    period_s: int = 1
    store_url: QuotaStoreEndpoint | None = None
    sqlite_path: str = ""

    @property
    def limited(self) -> bool:
        return self.msgs > 0 or self.bytes > 0

    def spec(self, destination: str) -> BucketSpec:
        return BucketSpec(f"publish:{destination}", TOPIC_LEVEL, "publish", self.period_s,
                          float(self.msgs) if self.msgs > 0 else math.inf, float(self.bytes) if self.bytes > 0 else math.inf)


_STORES: dict[tuple[QuotaStoreEndpoint | None, str], QuotaStore] = {}
_LOCK = threading.Lock()


def store_for(quota: WriteQuota) -> QuotaStore:
    """The worker's store for these options (opened once per process)."""
    key = (quota.store_url, quota.sqlite_path)
    with _LOCK:
        if key not in _STORES:
            _STORES[key] = open_quota_store(quota.store_url, quota.sqlite_path)
        return _STORES[key]


class PublishPermits:
    """One task's permits, per destination: messages and bytes granted by the shared bucket and not yet sent."""

    def __init__(self, quota: WriteQuota, store: QuotaStore, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, multiplier: Callable[[str], float] | None = None) -> None:
        self.quota = quota
        self._store = store
        self._multiplier = multiplier  # adaptiveThrottling: m for a destination's grant (writing.write_congestion)
        self._clock = clock
        self._sleep = sleep
        self._held: dict[str, tuple[int, float, float]] = {}  # destination -> (window, messages, bytes) granted, unsent
        self.waited_s = 0.0

    def take(self, destination: str, size: int) -> None:
        """Wait until one message of `size` bytes may be sent to `destination` in the current window, and count it."""
        while True:
            window = math.floor(self._clock() / self.quota.period_s)
            held_window, msgs, bytes_ = self._held.get(destination, (window, 0.0, 0.0))
            if held_window != window:  # what a past window granted and this task did not use is lost, as in the bucket
                msgs, bytes_ = 0.0, 0.0
            if msgs < 1 or bytes_ < size:
                more_msgs, more_bytes = self._grant(destination, window, size, msgs, bytes_)
                msgs, bytes_ = msgs + more_msgs, bytes_ + more_bytes
            if msgs >= 1 and bytes_ >= size:
                self._held[destination] = (window, msgs - 1, bytes_ - size)
                return
            self._held[destination] = (window, msgs, bytes_)
            pause = (window + 1) * self.quota.period_s - self._clock()
            self.waited_s += max(pause, 0.0)
            self._sleep(max(pause, 0.001))  # the bucket is spent: the next window

    def _grant(self, destination: str, window: int, size: int, held_msgs: float, held_bytes: float) -> tuple[float, float]:
        """Take a share of the window's quota from the bucket (what is missing for one message at least)."""
        spec = self.quota.spec(destination)
        if self._multiplier is not None:  # the quotas are ceilings: this window's share is m x each
            spec = scaled(spec, self._multiplier(destination))
        want_msgs = max(1.0, _share(spec.quota_msgs)) if held_msgs < 1 else 0.0
        want_bytes = max(float(size), _share(spec.quota_bytes)) if held_bytes < size else 0.0
        with self._store.transaction() as txn:
            bucket = roll_forward(spec, txn.get(spec.key), window * self.quota.period_s, None)
            left_msgs, left_bytes = bucket.remaining()
            # A message larger than a window's byte quota is let through alone at a window's start (it becomes debt).
            if want_bytes > spec.quota_bytes and bucket.used_bytes <= 0:
                left_bytes = want_bytes
            got_msgs = min(want_msgs, max(left_msgs, 0.0))
            got_bytes = min(want_bytes, max(left_bytes, 0.0))
            if (want_msgs and got_msgs < 1) or (want_bytes and got_bytes < size - held_bytes):
                return 0.0, 0.0  # not enough for one message: take nothing, wait for the next window
            bucket.charge(got_msgs, got_bytes)
            txn.put(spec.key, bucket.state())
        return got_msgs, got_bytes


def _share(quota: float) -> float:
    return 1.0 if math.isinf(quota) else max(1.0, math.floor(quota / GRANT_SHARE))
