"""The stress signals behind CongestionController's seam (adaptiveThrottling, issue 40): each turns what the
metadata layer read (metadata/stress_readings.py) or what the query itself saw into one verdict per controller
window: "fired", "clear", "waiting" (nothing new since its last verdict) or "unknown" (SignalReading). The controller reads each once per window, at the window's
first plan; the snapshot-fed ones are shown every plan's catalog snapshot in between (``observe``), so a window's
verdict covers every refresh the window saw, not one sample at its start.

Each compares with a baseline of the query's own (a running minimum) or a bound the user gave, never with an absolute
figure that depends on the hardware, except for floors that keep noise of a few milliseconds or a few entries from
firing. None of them reads the broker itself: they cost the planner nothing beyond what it reads already.

Faults: a reading that cannot be made (lookups failing, counters that went back after a broker restart or a topic's
move to another broker) answers "unknown", which holds m; it is never "fired": a broker restart is not congestion.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from ..metadata.broker_metrics import broker_latency
from ..metadata.catalog import CatalogSnapshot
from ..metadata.stress_readings import LatencySamples
from .congestion import SignalReading

LOOKUP_LATENCY, PENDING_ADDS, OTHERS_THROTTLED, BATCH_DURATION = "lookupLatency", "pendingAdds", "othersThrottled", "batchDuration"
PUBLISH_LATENCY = "publishLatency"

LATENCY_FACTOR = 3.0  # lookupLatency fires when a window's median is this many times the running minimum ...
LATENCY_FLOOR_S = 0.02  # ... and at least this much above it (a 2 ms lookup taking 6 ms is noise, not a busy bookie)
PENDING_ADDS_FLOOR = 8  # pendingAdds fires at this many entries waiting for the bookies, summed over partitions ...
PENDING_ADDS_FACTOR = 2.0  # ... and this many times the running minimum (0 on a broker that keeps up)
BATCH_TOLERANCE = 0.25  # batchDuration fires when the window's median batch takes 25 % longer than the trigger
PUBLISH_FACTOR = 2.0  # publishLatency fires when a stats period's p99 is over 2x its running minimum (by default:
# adaptiveThrottlingPublishLatencyPercent) ...
# (on a quiet 2-core machine, bench/README.md run D, the broker's p99 per 5 s period was 5.1 ms idle, 5.4-6.1 under
# the static quotas that kept a producer within 1.5x its idle p99, and 11.8 under the one that did not: 2.3x)
PUBLISH_FLOOR_MS = 5.0  # ... and over 5 ms (a p99 moving from 1 ms to 3 ms is a broker at ease)
# (10 ms until run E: the broker's p99 under an adaptive backfill that doubled a producer's p99 was 9.9 ms median)


class LookupLatencySignal:
    """The latency of the source's own requests for cold entries (precise mode's entry lookups) against its running
    minimum: lookups that take several times their best mean bookies or the broker's cache under load. A window with
    no lookup (batch mode, nothing new) is clear; one where a lookup failed is unknown (an outage, a restart)."""

    name = LOOKUP_LATENCY

    def __init__(self, samples: LatencySamples, factor: float = LATENCY_FACTOR, floor_s: float = LATENCY_FLOOR_S) -> None:
        self._samples = samples
        self._factor = factor
        self._floor_s = floor_s
        self._baseline: float | None = None  # the lowest window median seen

    def read(self) -> SignalReading:
        durations, failures = self._samples.drain()
        if failures:
            return SignalReading(self.name, "unknown", f"{failures} of {failures + len(durations)} entry lookups failed")
        if not durations:
            return SignalReading(self.name, "clear", "no entry lookups in the window")
        median = statistics.median(durations)
        baseline = self._baseline
        self._baseline = median if baseline is None else min(baseline, median)
        if baseline is not None and median > max(self._factor * baseline, baseline + self._floor_s):
            return SignalReading(self.name, "fired", f"median entry lookup {median * 1000:.0f} ms over {len(durations)} "
                                                     f"lookups, its running minimum {baseline * 1000:.0f} ms")
        return SignalReading(self.name, "clear")


class PendingAddsSignal:
    """Producers' pain as the broker shows it: entries sent to the bookies and not yet acknowledged
    (``pendingAddEntriesCount`` of the partitions the query reads), the most seen in any refresh of the window,
    against its running minimum. A window with no refresh seen is clear (no plan: the query loads nothing)."""

    name = PENDING_ADDS

    def __init__(self, floor: int = PENDING_ADDS_FLOOR, factor: float = PENDING_ADDS_FACTOR) -> None:
        self._floor = floor
        self._factor = factor
        self._seen_at: float | None = None
        self._most: int | None = None  # the most and the fewest pending adds in a refresh seen in this window
        self._fewest: int | None = None
        self._baseline: int | None = None  # the fewest in any earlier window

    def observe(self, snap: CatalogSnapshot) -> None:
        if snap.stress:
            self.observe_total(snap.fetched_at, sum(s.pending_adds for s in snap.stress.values()))

    def observe_total(self, fetched_at: float, total: int) -> None:
        """One refresh's pending adds, summed over the partitions (a write's own reading: writing/write_congestion.py)."""
        if fetched_at == self._seen_at:
            return
        self._seen_at = fetched_at
        self._most = total if self._most is None else max(self._most, total)
        self._fewest = total if self._fewest is None else min(self._fewest, total)

    def read(self) -> SignalReading:
        most, fewest, baseline = self._most, self._fewest, self._baseline
        self._most = self._fewest = None
        if most is None or fewest is None:
            return SignalReading(self.name, "clear", "no catalog refresh in the window")
        self._baseline = fewest if baseline is None else min(baseline, fewest)
        if most >= max(self._floor, self._factor * (baseline or 0)):
            return SignalReading(self.name, "fired", f"{most} entries waiting for the bookies (running minimum "
                                                     f"{baseline if baseline is not None else 'not known yet'})")
        return SignalReading(self.name, "clear")


class OthersThrottledSignal:
    """Other subscriptions being throttled by the broker: the growth of their ``dispatchThrottled*`` counters
    (Pulsar 4.0+) between the topic stats the catalog fetched. Counters that went back (a broker restart, the topic
    moved to another broker) answer unknown for that window and are counted afresh; a broker that reports none of them
    is clear (no evidence either way, and none will come)."""

    name = OTHERS_THROTTLED

    def __init__(self) -> None:
        self._stats_at: float | None = None
        self._last: dict[str, int] = {}
        self._events = 0
        self._reset = False
        self._reported = False

    def observe(self, snap: CatalogSnapshot) -> None:
        if snap.stats_at == self._stats_at or not snap.stress:
            return
        self._stats_at = snap.stats_at
        for partition, stress in snap.stress.items():
            count = stress.throttled_events
            if count is None:
                continue
            self._reported = True
            last = self._last.get(partition)
            if last is not None and count < last:
                self._reset = True
            elif last is not None:
                self._events += count - last
            self._last[partition] = count

    def read(self) -> SignalReading:
        events, reset = self._events, self._reset
        self._events, self._reset = 0, False
        if events:
            return SignalReading(self.name, "fired", f"the broker throttled other subscriptions {events} times")
        if reset:
            return SignalReading(self.name, "unknown", "throttling counters went back (a broker restart or a topic's move)")
        return SignalReading(self.name, "clear", "" if self._reported else "not reported by this broker (before 4.0)")


class BatchDurationSignal:
    """The query's own batches against its trigger interval (adaptiveThrottlingTriggerInterval): a batch's duration
    is the time from the end of the planning call that planned it to the next planning call (Spark plans the next
    batch, and commits this one, only once it ran; with a ProcessingTime trigger, at the next tick after it ran). Fires
    when the window's median batch took BATCH_TOLERANCE longer than the interval: the cluster (or Spark) cannot serve
    m x the ceilings in a trigger. A window without a finished batch is clear."""

    name = BATCH_DURATION

    def __init__(self, trigger_s: float, clock: Callable[[], float], tolerance: float = BATCH_TOLERANCE) -> None:
        self._trigger_s = trigger_s
        self._clock = clock
        self._tolerance = tolerance
        self._planned_at: float | None = None
        self._durations: list[float] = []

    def plan_started(self) -> None:
        if self._planned_at is not None:
            self._durations.append(max(0.0, self._clock() - self._planned_at))
            self._planned_at = None

    def batch_planned(self) -> None:
        self._planned_at = self._clock()

    def read(self) -> SignalReading:
        durations, self._durations = self._durations, []
        if not durations:
            return SignalReading(self.name, "clear", "no batch finished in the window")
        median = statistics.median(durations)
        if median > self._trigger_s * (1 + self._tolerance):
            return SignalReading(self.name, "fired", f"median batch {median:.2f} s over {len(durations)} batches, "
                                                     f"the trigger interval {self._trigger_s:g} s")
        return SignalReading(self.name, "clear")


class PublishLatencySignal:
    """Producers' publish latency as the broker measures it (adaptiveThrottlingMetricsUrl): the p99 of the broker's
    last stats period, from its ``pulsar_broker_publish_latency`` summary (or, where the broker has none, the bucket the
    p99 write of ``pulsar_storage_write_latency_le_*`` falls in), against the running minimum of earlier periods. The
    figures change once per stats period (60 s by default; metadata/broker_metrics.py says which broker settings): a
    window that reads the same figures again is "waiting" (no new evidence), which holds m, so a slow period
    decreases m once, not once per window, and m increases once per period judged clear, not in every window between
    two periods (which would undo a decrease before the next period could judge it). An endpoint that cannot be read
    is unknown (the controller holds m and WARNs once)."""

    name = PUBLISH_LATENCY

    def __init__(self, fetch: Callable[[], str], factor: float = PUBLISH_FACTOR, floor_ms: float = PUBLISH_FLOOR_MS) -> None:
        self._fetch = fetch  # the metrics page; raises when it cannot be read
        self._factor = factor
        self._floor_ms = floor_ms
        self._last: object = None  # the figures of the last period judged
        self._baselines: dict[str, float] = {}  # per view (summary, buckets): the lowest p99 of earlier periods

    def read(self) -> SignalReading:
        publish, write = broker_latency(self._fetch())
        summary_p99 = publish.at(0.99) if publish is not None else None
        if summary_p99 is not None and publish is not None:
            return self._judge("summary", publish.quantiles, summary_p99, "the broker's publish latency summary")
        if write is None or not write.writes:
            return SignalReading(self.name, "clear", "no writes in the broker's last stats period")
        return self._judge("buckets", write.buckets, write.quantile_bound(0.99),
                           f"its write latency buckets, {write.writes:.0f} writes")

    def _judge(self, view: str, figures: object, p99: float, source: str) -> SignalReading:
        if (view, figures) == self._last:
            return SignalReading(self.name, "waiting", "no new stats period")
        self._last = (view, figures)
        baseline = self._baselines.get(view)
        self._baselines[view] = p99 if baseline is None else min(baseline, p99)
        if baseline is not None and p99 > max(self._factor * baseline, self._floor_ms):
            return SignalReading(self.name, "fired", f"p99 publish latency {p99:g} ms ({source}), its running minimum "
                                                     f"{baseline:g} ms")
        return SignalReading(self.name, "clear")
