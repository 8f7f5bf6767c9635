"""adaptiveThrottling for writes: the write quotas (publishThrottlingRate*) are ceilings, scaled by the multiplier m of
the cluster's congestion controller (throttling.controller), as a read's dispatch quotas are.

A write has no driver-side planner to run the controller (Spark makes a stream's writer afresh for each micro-batch, and
a batch write has no driver call while its tasks run), so each worker process runs one controller for its write
tasks, the first of them to take permits in a controller window deciding for that window. The decision is applied to
the cluster's shared record in the quota store (keyed by admin.url), so a worker's decrease reaches every other worker,
and every read query, naming the same store and cluster, as several read planners share one m.

The stress signals a write causes: the bookies' pending adds on the partitions this worker writes to (internal stats,
read once per controller window) and, with adaptiveThrottlingMetricsUrl, the broker's publish latency. A read's other
signals (lookup latency, other subscriptions throttled, batch duration) measure reading and are not used.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..metadata.admin import PulsarAdmin
from ..metadata.stress_readings import pending_adds
from ..throttling.congestion import window_of
from ..throttling.controller import CongestionController, StressSignal
from ..throttling.signals import PendingAddsSignal, PublishLatencySignal
from ..throttling.store import QuotaStore
from ..topics import TopicName
from .write_options import WriteOptions
from .write_quota import PublishPermits, store_for

log = logging.getLogger(__name__)


class WriteCongestion:
    """One worker's controller for its writes to one cluster: the m its write tasks scale their quotas by."""

    def __init__(self, options: WriteOptions, store: QuotaStore, clock: Callable[[], float] = time.time) -> None:
        assert options.adaptive is not None
        self._config = options.adaptive
        self._admin = PulsarAdmin.at(options.admin)  # kept for the worker's life: stats and the metrics page
        self._clock = clock
        self._lock = threading.Lock()
        self._destinations: set[str] = set()  # partitions (or unpartitioned topics) this worker has written to
        self._pending = PendingAddsSignal()
        signals: list[StressSignal] = [self._pending]
        if self._config.metrics_url is not None:
            admin, url, credentials = self._admin, self._config.metrics_url, self._config.metrics_credentials
            signals.append(PublishLatencySignal(lambda: admin.get_text(url, "reading the broker's publish latency", credentials),
                                                factor=self._config.publish_latency_ratio))
        self.controller = CongestionController(self._config, options.admin_url, store, signals, clock)

    def multiplier(self, destination: str) -> float:
        """The m for a grant of permits to `destination` (decided at the first grant of each controller window)."""
        with self._lock:
            self._destinations.add(destination)
            last = self.controller.last
            if last is None or window_of(self._clock(), self._config) > last.window_ms:
                self._read_pending_adds()
            return self.controller.multiplier()

    def _read_pending_adds(self) -> None:
        """The pending adds of the partitions written to, summed, for this window's decision: one request per topic
        (a partitioned topic's partitions in one answer). A topic whose stats cannot be read is left out (the signal
        sees the others); none read leaves the window without a reading."""
        by_topic: dict[TopicName, list[str]] = {}
        for destination in sorted(self._destinations):
            name = TopicName.parse(destination)
            by_topic.setdefault(name.base, []).append(destination)
        total, read = 0, 0
        for topic, written in by_topic.items():
            try:
                if written == [str(topic)]:  # not partitioned
                    stats = {str(topic): self._admin.internal_stats(topic)}
                else:
                    stats = self._admin.partitioned_internal_stats(topic)
            except Exception as e:  # a stats outage is no congestion, and never fails a write
                log.debug("adaptiveThrottling: no internal stats of %s: %s", topic, e)
                continue
            for destination in written:
                if destination in stats:
                    total += pending_adds(stats[destination])
                    read += 1
        if read:
            self._pending.observe_total(self._clock(), total)

    def close(self) -> None:
        self._admin.close()


_CONTROLLERS: dict[tuple[str, object, object, str], WriteCongestion] = {}
_LOCK = threading.Lock()


def congestion_for(options: WriteOptions) -> WriteCongestion:
    """The worker's controller for these options' cluster, knobs and quota store (built once per process)."""
    quota = options.quota
    key = (options.admin_url, options.adaptive, quota.store_url, quota.sqlite_path)
    with _LOCK:
        if key not in _CONTROLLERS:
            _CONTROLLERS[key] = WriteCongestion(options, store_for(quota))
        return _CONTROLLERS[key]


def permits_for(options: WriteOptions, sleep: Callable[[float], None] = time.sleep) -> PublishPermits | None:
    """A write task's permits under the write quotas (scaled by the cluster's m with adaptiveThrottling), or None."""
    if not options.quota.limited:
        return None
    multiplier = congestion_for(options).multiplier if options.adaptive is not None else None
    return PublishPermits(options.quota, store_for(options.quota), sleep=sleep, multiplier=multiplier)
