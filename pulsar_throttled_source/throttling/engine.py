"""QuotaEngine: plans one micro-batch's admissions against the quota buckets.

Each plan() call estimates, picks the buckets every demand charges, then loads, admits and
charges them in one store transaction, so concurrent planners on a host cannot over-admit; it answers
a QuotaPlan, what it admitted and what it charged per level (nothing of a plan is kept for a caller to read after).
What the engine touches outside itself is given to it: the store, the clock, and each demand's
callbacks (bytes_for, learn_backlog, estimate_backlog), which may ask the broker about entries
(metadata.backlog_sizes); tests give it a fake clock and fake callbacks. One engine belongs to one query; it is not meant to be called from two threads
at once. With adaptiveThrottling, ``multiplier`` (a controller.CongestionController's) scales every quota of a plan:
the quotas are ceilings, and a window admits at most m x each of them (debt repays at m x the quota too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..backlog_values import LearnedBacklog
from ..quota_settings import QuotaConfig
from .allocation import RotatingCursor, admit
from .buckets import BucketSpec, ChargedQuota, bucket_spec, partition_specs, roll_forward, scaled, source_key
from .demands import SOURCE_LEVEL, Admission, PartitionDemand
from .headroom import ESTIMATE_ABOVE, estimates_far_from_quota
from .partition_plan import new_plan
from .publish_rates import SmoothedPublishRates
from .report import LevelReport, level_reports, summary_line
from .store import BucketState, QuotaStore

log = logging.getLogger(__name__)

# Buckets of queries and topics no longer read are dropped from the shared store. A day without a
# charge leaves nothing to keep: windows last seconds, and only a debt over a day's quota (a
# Trigger.Once read of a huge backlog) would be forgotten.
STALE_BUCKET_S = 24 * 3600
PURGE_EVERY_S = 3600


@dataclass(frozen=True)
class QuotaPlan:
    """What one plan() decided: each demand's admission (in the demands' order), and per quota level what it
    found and charged (the query progress and the summary line report them). Empty when `accept` refused the
    batch: nothing was charged."""

    admissions: tuple[Admission, ...] = ()
    levels: tuple[LevelReport, ...] = ()


class QuotaEngine:
    def __init__(
        self, config: QuotaConfig, store: QuotaStore, clock: Callable[[], float] = time.time,
        multiplier: Callable[[], float] | None = None, multiplier_note: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        self._store = store
        self._clock = clock
        self._multiplier = multiplier  # None: the quotas as configured (adaptiveThrottling off)
        self._multiplier_note = multiplier_note  # what the summary line says of m (which signal fired)
        self._publish_rates = SmoothedPublishRates()  # relative rates
        self._cursor = RotatingCursor()
        # What this engine last charged each bucket against (pays back a relative quota).
        self._charged_quota: dict[str, ChargedQuota] = {}
        self._next_purge = 0.0
        self._last_states: dict[str, BucketState] = {}  # large plans' buckets as last charged (see headroom)

    def plan(
        self, demands: Sequence[PartitionDemand], unthrottled: bool = False,
        accept: Callable[[int], bool] | None = None,
    ) -> QuotaPlan:
        """Decide how many backlog entries each partition may advance now, and charge all
        applicable buckets atomically (one store transaction).

        `accept` sees the total entries admitted, inside the transaction: when it says no (the
        trigger floor holds the batch back), nothing is charged and an empty QuotaPlan is returned, so a
        trigger that runs no batch leaves the store, and this engine's memory of its charges, unchanged."""
        now = self._clock()
        if now >= self._next_purge:
            self._next_purge = now + PURGE_EVERY_S
            purged = self._store.purge_older_than(STALE_BUCKET_S)
            if purged:
                log.info("Dropped %d quota buckets unused for %d hours from the quota store", purged, STALE_BUCKET_S // 3600)
        self._cursor.next_call()
        # Everything that does not need the buckets is computed before the transaction,
        # so the store lock is held only for the arithmetic.
        m = self._multiplier() if self._multiplier is not None else 1.0
        source_spec = self._source_spec(demands, now)
        if source_spec is not None:
            source_spec = scaled(source_spec, m)
        def publish_rate(demand: PartitionDemand, period_s: int) -> tuple[float, float]:
            return self._publish_rates.rate(demand, period_s, now)

        # The source-wide spec is scaled already (shared by every demand); each demand's own levels are scaled here.
        specs = [[spec if spec is source_spec else scaled(spec, m) for spec in partition_specs(demand, source_spec, publish_rate)]
                 for demand in demands]
        estimates: list[LearnedBacklog | None] = [None] * len(demands)
        if len(demands) > ESTIMATE_ABOVE and not unthrottled:
            estimates = estimates_far_from_quota(demands, specs, self._remaining_after_last_plans(specs, now),
                                                 precise=self.config.mode == "precise")
        plans = [new_plan(demand, index, demand_specs, self.config, unthrottled, estimate)
                 for index, (demand, demand_specs, estimate) in enumerate(zip(demands, specs, estimates, strict=True))]
        specs_by_key: dict[str, BucketSpec] = {}
        for plan in plans:
            for spec in plan.specs:
                specs_by_key.setdefault(spec.key, spec)

        if unthrottled and specs_by_key:
            log.warning(
                "query %s: ReadAllAvailable (Trigger.Once) reads all available data; "
                "configured quotas are charged but not enforced",
                self.config.query_id,
            )

        with self._store.transaction() as tx:
            states = tx.get_many(list(specs_by_key))
            buckets = {
                key: roll_forward(spec, states[key], now, self._charged_quota.get(key))
                for key, spec in specs_by_key.items()
            }
            for plan in plans:
                plan.buckets = [buckets[spec.key] for spec in plan.specs]
            source = buckets.get(source_key(self.config.query_id))
            admit(plans, source, self._cursor, precise=self.config.mode == "precise")
            if accept is not None and not accept(sum(plan.entries for plan in plans)):
                return QuotaPlan()
            charged = {key: bucket for key, bucket in buckets.items() if bucket.charged_msgs or bucket.charged_bytes}
            tx.put_many({key: bucket.state() for key, bucket in charged.items()})
            for key, bucket in charged.items():
                self._charged_quota[key] = bucket.charged_quota()
        self._last_states.update((key, bucket.state()) for key, bucket in buckets.items())

        self._cursor.record(plans)
        admissions = tuple(plan.admission() for plan in plans)
        log.debug("query %s plan: %s", self.config.query_id, admissions)
        return QuotaPlan(admissions, tuple(level_reports(buckets.values())))

    def _remaining_after_last_plans(self, specs: Sequence[Sequence[BucketSpec]], now: float) -> dict[str, tuple[float, float]]:
        """What each bucket had left after this engine's last plan with it, rolled forward to now: read
        from memory, not the store (the plan's transaction reads the store and admits by it; another
        planner's charges since then are missed here, which the HEADROOM margin absorbs)."""
        remaining: dict[str, tuple[float, float]] = {}
        for demand_specs in specs:
            for spec in demand_specs:
                if spec.key not in remaining and spec.key in self._last_states:
                    bucket = roll_forward(spec, self._last_states[spec.key], now, self._charged_quota.get(spec.key))
                    remaining[spec.key] = bucket.remaining()
        return remaining

    def summary(self, plan: QuotaPlan) -> str:
        """One human log line of `plan`: per level what was admitted and charged, and why partitions were held back
        (with adaptiveThrottling, what the multiplier's signals said)."""
        line = summary_line(self.config, plan.admissions, plan.levels)
        note = self._multiplier_note() if self._multiplier_note is not None else ""
        return f"{line}; {note}" if note else line

    def _source_spec(self, demands: Sequence[PartitionDemand], now: float) -> BucketSpec | None:
        source = self.config.source
        if source.is_unlimited():
            return None
        publish = (0.0, 0.0)
        if source.relative_to_publish_rate:
            # The source-wide bucket serves all partitions: relative to their summed rates.
            publish = self._publish_rates.total(demands, source.period_s, now)
        return bucket_spec(source_key(self.config.query_id), SOURCE_LEVEL, "options", source, publish)
