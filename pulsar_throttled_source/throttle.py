"""The quota engine: how far each partition may advance in one micro-batch.

Pulsar's broker throttles dispatch *after* deciding what to read, with counters it fixes up
once it knows what an entry held. This engine applies the same model one step earlier,
when Spark plans a micro-batch: it decides how many backlog entries each partition may
advance and charges every quota bucket that applies, all in one store transaction.

The model (see THROTTLING.md):
- Levels: source-wide (one bucket per query), topic (one per partition, shared by every
  query on the host), subscription (one per subscription and partition). All levels, and
  messages and bytes within a level, must admit (logical AND).
- Windows are epoch aligned (``floor(now / period)``), so processes agree on them without
  talking. What a window over-admits is debt that the next windows pay back; what it leaves
  unused is lost.
- Entries are converted to messages exactly (batch mode: one entry is one message) or by a
  moving average of messages per entry (precise mode); bytes come from the ledger layout.

The engine is pure apart from the store and the clock it is given, so tests drive it with a
fake clock. One engine belongs to one query; it is not meant to be called from two threads
at once.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .quota_store import BucketState, QuotaStore, QuotaTransaction

log = logging.getLogger(__name__)

ThrottlingMode = Literal["precise", "batch"]

SOURCE_LEVEL = "source-wide"
TOPIC_LEVEL = "topic"
SUBSCRIPTION_LEVEL = "subscription"

# Moving-average weight of a new sample (Pulsar's avg = 0.9 * avg + 0.1 * new).
SAMPLE_WEIGHT = 0.1
# Float slack when comparing usage with a quota, so 10 x 0.1 still "fits" into 1.0.
_EPSILON = 1e-6


@dataclass(frozen=True)
class Rate:
    """One level's limit per period. -1 means unlimited for that unit.

    As in the Pulsar broker, any value <= 0 disables the limit for that unit (the broker
    config uses 0 for "disabled"); options parsing rejects an explicit 0 before we get here.
    """

    msgs: int = -1
    bytes: int = -1
    period_s: int = 1
    relative_to_publish_rate: bool = False

    def __post_init__(self) -> None:
        if self.period_s < 1:
            raise ValueError(f"period_s must be >= 1 second, got {self.period_s}")

    def is_unlimited(self) -> bool:
        return self.msgs <= 0 and self.bytes <= 0


@dataclass(frozen=True)
class QuotaConfig:
    source: Rate  # source-wide level (one bucket per query)
    mode: ThrottlingMode = "precise"
    throttle_non_backlog: bool = True  # dispatchThrottlingOnNonBacklogConsumerEnabled
    non_backlog_threshold_entries: int = 0
    query_id: str = "query"  # names the source-wide bucket

    def __post_init__(self) -> None:
        if self.mode not in ("precise", "batch"):
            raise ValueError(f"throttling mode must be 'precise' or 'batch', got {self.mode!r}")
        if self.non_backlog_threshold_entries < 0:
            raise ValueError(
                "non_backlog_threshold_entries must be >= 0, "
                f"got {self.non_backlog_threshold_entries}"
            )


@dataclass(frozen=True)
class PartitionDemand:
    partition: str  # full partition topic name, e.g. persistent://public/default/t-partition-0
    subscription: str
    backlog_entries: int  # entries available beyond the current start (>= 0)
    bytes_for: Callable[[int], float]  # bytes of the first k backlog entries (monotonic, 0 -> 0)
    msgs_per_entry_sample: float | None  # publish-side msgs per entry, None if unknown
    publish_rate_msgs: float = 0.0  # msgs/s published (for relative rates)
    publish_rate_bytes: float = 0.0  # bytes/s published
    topic_rates: tuple[tuple[str, Rate], ...] = ()  # (origin, rate) pairs, all ANDed
    subscription_rates: tuple[tuple[str, Rate], ...] = ()  # same for the subscription level


@dataclass(frozen=True)
class Admission:
    partition: str
    entries: int  # entries admitted for this planning call (0..backlog_entries)
    msgs: float  # messages admitted and charged (exact in batch mode, estimate in precise mode)
    bytes: float  # bytes admitted and charged
    held_back: str | None  # why entries < backlog_entries; None when all admitted or no backlog
    unthrottled: str | None  # why throttling did not apply, e.g. "no quota"


# ---------------------------------------------------------------------------------------
# Internal working state of one plan() call


@dataclass
class _BucketSpec:
    """A bucket as one demand sees it: where it lives and its effective quota now."""

    key: str
    level: str  # SOURCE_LEVEL, TOPIC_LEVEL or SUBSCRIPTION_LEVEL
    label: str  # for messages: "topic", or "broker topic" for a non-default origin
    period_s: int
    quota_msgs: float  # math.inf when that unit is unlimited
    quota_bytes: float


@dataclass
class _Bucket:
    """A bucket loaded from the store, rolled forward to the current window."""

    spec: _BucketSpec
    window: int
    used_msgs: float
    used_bytes: float
    charged_msgs: float = 0.0  # what this call added (for the summary)
    charged_bytes: float = 0.0

    def remaining(self) -> tuple[float, float]:
        return self.spec.quota_msgs - self.used_msgs, self.spec.quota_bytes - self.used_bytes

    def charge(self, msgs: float, bytes_: float) -> None:
        self.used_msgs += msgs
        self.used_bytes += bytes_
        self.charged_msgs += msgs
        self.charged_bytes += bytes_

    def exhausted_unit(self) -> str | None:
        remaining_msgs, remaining_bytes = self.remaining()
        if remaining_msgs <= _EPSILON:
            return "msgs"
        if remaining_bytes <= _EPSILON:
            return "bytes"
        return None

    def exhausted_reason(self, unit: str) -> str:
        used, quota = (
            (self.used_msgs, self.spec.quota_msgs)
            if unit == "msgs"
            else (self.used_bytes, self.spec.quota_bytes)
        )
        debt = used - quota
        if debt > _EPSILON:
            return f"{self.spec.label} quota exhausted ({unit}, debt {_number(debt)})"
        return f"{self.spec.label} quota exhausted ({unit})"


@dataclass
class _Cap:
    """An upper bound on what a partition may add in one fitting step."""

    msgs: float
    bytes: float
    bucket: _Bucket | None  # None for the partition's share of the source-wide bucket


@dataclass
class _PartitionPlan:
    demand: PartitionDemand
    index: int  # position in the caller's list, for a stable order
    specs: list[_BucketSpec]
    msgs_per_entry: float  # 1.0 in batch mode; the moving average (or 1.0) in precise mode
    max_entries: int  # backlog, or 1 on a precise-mode first read without an estimate
    unthrottled: str | None
    buckets: list[_Bucket] = field(default_factory=list)
    entries: int = 0
    held_back: str | None = None
    limited_by_share: bool = False
    _bytes_cache: dict[int, float] = field(default_factory=dict)

    @property
    def backlog(self) -> int:
        return max(0, self.demand.backlog_entries)

    def msgs(self, entries: int) -> float:
        return entries * self.msgs_per_entry

    def bytes(self, entries: int) -> float:
        # bytes_for may walk a ledger list; the binary search asks for the same k repeatedly.
        if entries not in self._bytes_cache:
            self._bytes_cache[entries] = float(self.demand.bytes_for(entries)) if entries else 0.0
        return self._bytes_cache[entries]

    def advance_to(self, entries: int) -> None:
        """Admit up to ``entries`` in total and charge the difference to every bucket."""
        add_msgs = self.msgs(entries) - self.msgs(self.entries)
        add_bytes = self.bytes(entries) - self.bytes(self.entries)
        for bucket in self.buckets:
            bucket.charge(add_msgs, add_bytes)
        self.entries = entries

    def admission(self) -> Admission:
        return Admission(
            partition=self.demand.partition,
            entries=self.entries,
            msgs=self.msgs(self.entries),
            bytes=self.bytes(self.entries),
            held_back=self.held_back if self.entries < self.backlog else None,
            unthrottled=self.unthrottled,
        )


@dataclass
class _SmoothedPublishRate:
    window: int
    msgs: float
    bytes: float


@dataclass(frozen=True)
class _LevelReport:
    """What one level charged in the last plan() call (for summary())."""

    label: str
    buckets: int
    charged_msgs: float
    charged_bytes: float
    used_msgs: float  # after charging; meaningful for the single source-wide bucket
    used_bytes: float
    quota_msgs: float
    quota_bytes: float


# ---------------------------------------------------------------------------------------


class QuotaEngine:
    def __init__(
        self, config: QuotaConfig, store: QuotaStore, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self._store = store
        self._clock = clock
        # Per-partition moving average of messages per entry (precise mode).
        self._msgs_per_entry: dict[str, float] = {}
        # Per (partition, period) publish rate that falls gradually (relative rates).
        self._publish_rates: dict[tuple[str, int], _SmoothedPublishRate] = {}
        # Plan call number at which a partition last got entries: the rotating cursor
        # that puts partitions which got nothing first, so none starves.
        self._last_served: dict[str, int] = {}
        self._calls = 0
        self._last_levels: list[_LevelReport] = []
        # bucket key -> (window, quota msgs, quota bytes) this engine last charged against.
        self._charged_quota: dict[str, tuple[int, float, float]] = {}

    # --- public API --------------------------------------------------------------------

    def plan(
        self, demands: Sequence[PartitionDemand], unthrottled: bool = False
    ) -> list[Admission]:
        """Decide how many backlog entries each partition may advance now, and charge all
        applicable buckets atomically (one store transaction)."""
        now = self._clock()
        self._calls += 1
        self._update_msgs_per_entry(demands)
        # Everything that does not need the buckets is computed before the transaction,
        # so the store lock is held only for the arithmetic.
        source_spec = self._source_spec(demands, now)
        plans = [
            self._prepare(demand, index, now, source_spec, unthrottled)
            for index, demand in enumerate(demands)
        ]
        specs: dict[str, _BucketSpec] = {}
        for plan in plans:
            for spec in plan.specs:
                specs.setdefault(spec.key, spec)

        if unthrottled and specs:
            log.warning(
                "query %s: ReadAllAvailable (Trigger.Once) reads all available data; "
                "configured quotas are charged but not enforced",
                self.config.query_id,
            )

        with self._store.transaction() as tx:
            buckets = {key: self._load(tx, spec, now) for key, spec in specs.items()}
            for plan in plans:
                plan.buckets = [buckets[spec.key] for spec in plan.specs]
            source = buckets.get(self._source_key())
            self._admit(plans, source)
            for key, bucket in buckets.items():
                if bucket.charged_msgs or bucket.charged_bytes:
                    tx.put(key, BucketState(bucket.window, bucket.used_msgs, bucket.used_bytes))
                    self._charged_quota[key] = (
                        bucket.window,
                        bucket.spec.quota_msgs,
                        bucket.spec.quota_bytes,
                    )

        for plan in plans:
            if plan.limited_by_share and source is not None:
                # The shares together used the source-wide quota up: say so plainly.
                unit = source.exhausted_unit()
                if unit is not None:
                    plan.held_back = source.exhausted_reason(unit)
            if plan.entries > 0:
                self._last_served[plan.demand.partition] = self._calls
        self._last_levels = _level_reports(buckets.values())
        admissions = [plan.admission() for plan in plans]
        log.debug("query %s plan: %s", self.config.query_id, admissions)
        return admissions

    def summary(self, admissions: Sequence[Admission]) -> str:
        """One human log line: per level what was admitted and why partitions were held back.

        Totals and reasons come from ``admissions``; the per-level charges describe the most
        recent ``plan()`` call.
        """
        with_backlog = [a for a in admissions if a.entries > 0 or a.held_back]
        served = [a for a in admissions if a.entries > 0]
        line = (
            f"query {self.config.query_id} quota plan ({self.config.mode}): admitted "
            f"{sum(a.entries for a in admissions)} entries, "
            f"{_number(sum(a.msgs for a in admissions))} msgs, "
            f"{_human_bytes(sum(a.bytes for a in admissions))} "
            f"on {len(served)}/{len(with_backlog)} partitions with backlog"
        )
        held = [a for a in admissions if a.held_back]
        parts = [line]
        for report in self._last_levels:
            text = (
                f"{report.label}: charged {_number(report.charged_msgs)} msgs, "
                f"{_human_bytes(report.charged_bytes)}"
            )
            if report.label == SOURCE_LEVEL:
                text += (
                    f" (used {_number(report.used_msgs)}/{_limit(report.quota_msgs)} msgs, "
                    f"{_human_bytes(report.used_bytes)}/{_limit(report.quota_bytes, True)})"
                )
            else:
                text += f" on {report.buckets} bucket{'s' if report.buckets != 1 else ''}"
            held_here = sum(1 for a in held if (a.held_back or "").startswith(report.label + " "))
            if held_here:
                text += f", held back {held_here}"
            parts.append(text)
        if held:
            parts.append("held back: " + _listing(f"{a.partition} ({a.held_back})" for a in held))
        else:
            parts.append("held back: none")
        free = [a for a in admissions if a.unthrottled]
        if free:
            parts.append(
                "unthrottled: " + _listing(f"{a.partition} ({a.unthrottled})" for a in free)
            )
        return "; ".join(parts)

    # --- before the transaction --------------------------------------------------------

    def _update_msgs_per_entry(self, demands: Sequence[PartitionDemand]) -> None:
        for demand in demands:
            sample = demand.msgs_per_entry_sample
            if sample is None or not math.isfinite(sample) or sample <= 0:
                continue  # no entries published yet: nothing to learn
            sample = max(1.0, sample)  # an entry holds at least one message
            previous = self._msgs_per_entry.get(demand.partition)
            self._msgs_per_entry[demand.partition] = (
                sample
                if previous is None
                else (1 - SAMPLE_WEIGHT) * previous + SAMPLE_WEIGHT * sample
            )

    def _smoothed_publish_rate(
        self, demand: PartitionDemand, period_s: int, now: float
    ) -> tuple[float, float]:
        """Publish rate (msgs/s, bytes/s) that rises at once and falls gradually.

        A decrease is applied at most once per window, so many polls within one window do
        not collapse it. Calling this twice in one window with the same input is harmless.
        """
        window = math.floor(now / period_s)
        new_msgs = max(0.0, demand.publish_rate_msgs)
        new_bytes = max(0.0, demand.publish_rate_bytes)
        key = (demand.partition, period_s)
        state = self._publish_rates.get(key)
        if state is None:
            state = _SmoothedPublishRate(window, new_msgs, new_bytes)
        else:
            new_window = window > state.window

            def smooth(old: float, new: float) -> float:
                if new >= old:
                    return new
                return (1 - SAMPLE_WEIGHT) * old + SAMPLE_WEIGHT * new if new_window else old

            state = _SmoothedPublishRate(
                max(window, state.window),
                smooth(state.msgs, new_msgs),
                smooth(state.bytes, new_bytes),
            )
        self._publish_rates[key] = state
        return state.msgs, state.bytes

    def _source_key(self) -> str:
        return f"source:{self.config.query_id}"

    def _source_spec(self, demands: Sequence[PartitionDemand], now: float) -> _BucketSpec | None:
        source = self.config.source
        if source.is_unlimited():
            return None
        publish = (0.0, 0.0)
        if source.relative_to_publish_rate:
            # The source-wide bucket serves all partitions: relative to their summed rates.
            by_partition = {
                demand.partition: self._smoothed_publish_rate(demand, source.period_s, now)
                for demand in demands
            }
            publish = (
                sum(rate[0] for rate in by_partition.values()),
                sum(rate[1] for rate in by_partition.values()),
            )
        return _spec(self._source_key(), SOURCE_LEVEL, "options", source, publish)

    def _prepare(
        self,
        demand: PartitionDemand,
        index: int,
        now: float,
        source_spec: _BucketSpec | None,
        unthrottled: bool,
    ) -> _PartitionPlan:
        specs: list[_BucketSpec] = [source_spec] if source_spec is not None else []
        for level, rates in (
            (TOPIC_LEVEL, demand.topic_rates),
            (SUBSCRIPTION_LEVEL, demand.subscription_rates),
        ):
            for origin, rate in rates:
                if rate.is_unlimited():
                    continue
                if level == TOPIC_LEVEL:
                    key = f"topic:{origin}:{demand.partition}"
                else:
                    key = f"subscription:{origin}:{demand.subscription}:{demand.partition}"
                publish = (0.0, 0.0)
                if rate.relative_to_publish_rate:
                    publish = self._smoothed_publish_rate(demand, rate.period_s, now)
                specs.append(_spec(key, level, origin, rate, publish))

        backlog = max(0, demand.backlog_entries)
        if unthrottled:
            reason: str | None = "ReadAllAvailable"
        elif not specs:
            reason = "no quota"
        elif (
            not self.config.throttle_non_backlog
            and backlog <= self.config.non_backlog_threshold_entries
        ):
            threshold = self.config.non_backlog_threshold_entries
            reason = f"auto-off: backlog {backlog} <= threshold {threshold}"
        else:
            reason = None

        max_entries = backlog
        if self.config.mode == "batch":
            msgs_per_entry = 1.0
        else:
            average = self._msgs_per_entry.get(demand.partition)
            msgs_per_entry = 1.0 if average is None else average
            limits_msgs = any(math.isfinite(spec.quota_msgs) for spec in specs)
            if average is None and limits_msgs and reason is None:
                # Like the broker's first read: without an estimate, read one entry.
                max_entries = min(1, backlog)
        return _PartitionPlan(
            demand=demand,
            index=index,
            specs=specs,
            msgs_per_entry=msgs_per_entry,
            max_entries=max_entries,
            unthrottled=reason,
        )

    # --- inside the transaction --------------------------------------------------------

    def _load(self, tx: QuotaTransaction, spec: _BucketSpec, now: float) -> _Bucket:
        window = math.floor(now / spec.period_s)
        state = tx.get(spec.key)
        if state is None:
            return _Bucket(spec, window, 0.0, 0.0)
        if window < state.window:
            # Another process's clock is ahead: keep its window rather than reset it.
            return _Bucket(spec, state.window, state.used_msgs, state.used_bytes)
        elapsed = window - state.window
        used_msgs, used_bytes = state.used_msgs, state.used_bytes
        if elapsed > 0:
            # Each window that passed pays back one quota; unused quota is lost (max 0).
            # A relative quota changes over time: the stored window pays back the quota it
            # was charged against (if this engine charged it), not today's smaller one.
            first_msgs, first_bytes = spec.quota_msgs, spec.quota_bytes
            charged = self._charged_quota.get(spec.key)
            if charged is not None and charged[0] == state.window:
                first_msgs, first_bytes = charged[1], charged[2]
            used_msgs = _pay_back(used_msgs, first_msgs, spec.quota_msgs, elapsed)
            used_bytes = _pay_back(used_bytes, first_bytes, spec.quota_bytes, elapsed)
        return _Bucket(spec, window, used_msgs, used_bytes)

    def _admit(self, plans: list[_PartitionPlan], source: _Bucket | None) -> None:
        # Unthrottled partitions first: they take what they take, and throttled partitions
        # then see the buckets with that already charged.
        for plan in plans:
            if plan.unthrottled is not None:
                plan.advance_to(plan.backlog)

        queue = [plan for plan in plans if plan.unthrottled is None and plan.backlog > 0]
        # Partitions that got nothing for longest go first (rotating cursor).
        queue.sort(key=lambda plan: (self._last_served.get(plan.demand.partition, 0), plan.index))

        # Pass 1: each partition's share of the source-wide bucket is proportional to its
        # backlog; topic and subscription buckets bound it further.
        shares = _proportional_shares(queue, source, lambda plan: plan.backlog)
        for plan in queue:
            self._fit(plan, shares.get(id(plan)), one_entry_minimum=True)

        if source is None:
            return
        # Pass 2: what partitions limited elsewhere left of the source-wide bucket goes to
        # those that the share held back, again in proportion to what they still have.
        # Pass 3: what is still left (less than a share's next entry) goes out one entry per
        # partition per round, in queue order, so a rounding rest does not all go to one.
        first_round = True
        while source.exhausted_unit() is None:
            candidates = [plan for plan in queue if plan.limited_by_share]
            if not candidates:
                return
            admitted_before = sum(plan.entries for plan in candidates)
            if first_round:
                shares = _proportional_shares(
                    candidates, source, lambda plan: plan.backlog - plan.entries
                )
                for plan in candidates:
                    self._fit(plan, shares.get(id(plan)), one_entry_minimum=False)
                first_round = False
            else:
                for plan in candidates:
                    self._fit(plan, None, one_entry_minimum=False, most=1)
                if sum(plan.entries for plan in candidates) == admitted_before:
                    return

    def _fit(
        self,
        plan: _PartitionPlan,
        share: tuple[float, float] | None,
        one_entry_minimum: bool,
        most: int | None = None,
    ) -> None:
        """Grow ``plan.entries`` to the largest count every bucket (and the share) allows,
        by at most ``most`` entries."""
        caps: list[_Cap] = []
        source_cap: _Cap | None = None
        for bucket in plan.buckets:
            unit = bucket.exhausted_unit()
            if unit is not None:
                plan.held_back = bucket.exhausted_reason(unit)
                plan.limited_by_share = False
                return
            remaining_msgs, remaining_bytes = bucket.remaining()
            if bucket.spec.level == SOURCE_LEVEL:
                source_cap = _Cap(remaining_msgs, remaining_bytes, bucket)
            else:
                caps.append(_Cap(remaining_msgs, remaining_bytes, bucket))
        # Order decides which limit a held-back partition is told about: its own levels
        # first, then its share, then the source bucket (tighter than the share only when
        # partitions before it used more than their shares).
        if share is not None:
            caps.append(_Cap(share[0], share[1], None))
        if source_cap is not None:
            caps.append(source_cap)

        start = plan.entries
        base_msgs, base_bytes = plan.msgs(start), plan.bytes(start)

        # Precise mode prices entries at an estimated messages-per-entry: admit the entry
        # count nearest the quota (up to half an entry over, carried as debt) rather than
        # always rounding down, which would lose the same slack every window (a drift).
        msgs_slack = 0.5 * plan.msgs_per_entry if self.config.mode == "precise" else 0.0

        def violated(entries: int) -> tuple[_Cap, str] | None:
            add_msgs = plan.msgs(entries) - base_msgs
            add_bytes = plan.bytes(entries) - base_bytes
            for cap in caps:
                if add_msgs > cap.msgs + msgs_slack + _EPSILON:
                    return cap, "msgs"
                if add_bytes > cap.bytes + _EPSILON:
                    return cap, "bytes"
            return None

        # Largest k in [start, max_entries] that fits; usage grows with k, so bisect.
        low, high = start, plan.max_entries if most is None else min(plan.max_entries, start + most)
        while low < high:
            middle = (low + high + 1) // 2
            if violated(middle) is None:
                low = middle
            else:
                high = middle - 1
        entries = low
        if entries == 0 and one_entry_minimum and plan.max_entries > 0:
            # One-entry minimum: every bucket still has some quota (else we returned above),
            # so a partition is never stuck behind one entry larger than a window's quota.
            # What it over-admits becomes debt.
            entries = 1
        plan.advance_to(entries)

        plan.limited_by_share = False
        if entries >= plan.backlog:
            plan.held_back = None
        elif entries >= plan.max_entries:
            plan.held_back = "no messages-per-entry estimate yet: first read admits 1 entry"
        else:
            # Name the first limit the next entry would break.
            hit = violated(entries + 1)
            limiting = hit[0].bucket if hit is not None else None
            if hit is None or limiting is None:
                # The share (or the one-entry-per-round step) stopped it: more may follow.
                plan.held_back = f"{SOURCE_LEVEL} share"
                plan.limited_by_share = True
                return
            unit = hit[1]
            exhausted = limiting.exhausted_unit()
            if exhausted is not None:
                plan.held_back = limiting.exhausted_reason(exhausted)
            else:
                remaining = limiting.remaining()[0 if unit == "msgs" else 1]
                plan.held_back = (
                    f"{limiting.spec.label} quota too small for the next entry "
                    f"({unit}, {_number(remaining)} left)"
                )


# ---------------------------------------------------------------------------------------
# Helpers


def _spec(
    key: str, level: str, origin: str, rate: Rate, publish: tuple[float, float]
) -> _BucketSpec:
    """Effective quota of ``rate`` now; relative rates add publish rate x period (PIP-52)."""

    def effective(configured: int, publish_rate: float) -> float:
        if configured <= 0:
            return math.inf  # unlimited stays unlimited, relative or not
        if rate.relative_to_publish_rate:
            return publish_rate * rate.period_s + configured
        return float(configured)

    label = level if origin == "options" or level == SOURCE_LEVEL else f"{origin} {level}"
    return _BucketSpec(
        key=key,
        level=level,
        label=label,
        period_s=rate.period_s,
        quota_msgs=effective(rate.msgs, publish[0]),
        quota_bytes=effective(rate.bytes, publish[1]),
    )


def _pay_back(used: float, first_quota: float, quota: float, windows: int) -> float:
    """Usage after ``windows`` windows ended: the first pays back the quota it had."""
    paid = first_quota + quota * (windows - 1)
    if math.isinf(paid):
        return 0.0
    return max(0.0, used - paid)


def _proportional_shares(
    plans: list[_PartitionPlan], source: _Bucket | None, weight: Callable[[_PartitionPlan], int]
) -> dict[int, tuple[float, float]]:
    """Split the source bucket's remaining (msgs, bytes) by weight; keyed by id(plan)."""
    if source is None or not plans:
        return {}
    total = sum(weight(plan) for plan in plans)
    if total <= 0:
        return {}
    remaining_msgs, remaining_bytes = source.remaining()
    return {
        id(plan): (remaining_msgs * weight(plan) / total, remaining_bytes * weight(plan) / total)
        for plan in plans
    }


def _level_reports(buckets: Iterable[_Bucket]) -> list[_LevelReport]:
    grouped: dict[str, list[_Bucket]] = {}
    for bucket in buckets:
        grouped.setdefault(bucket.spec.label, []).append(bucket)
    order = {SOURCE_LEVEL: 0, TOPIC_LEVEL: 1, SUBSCRIPTION_LEVEL: 2}

    def position(label: str) -> tuple[int, bool, str]:
        level = grouped[label][0].spec.level
        return order[level], label != level, label  # options ("topic") before "broker topic"

    reports = []
    for label in sorted(grouped, key=position):
        group = grouped[label]
        reports.append(
            _LevelReport(
                label=label,
                buckets=len(group),
                charged_msgs=sum(b.charged_msgs for b in group),
                charged_bytes=sum(b.charged_bytes for b in group),
                used_msgs=sum(b.used_msgs for b in group),
                used_bytes=sum(b.used_bytes for b in group),
                quota_msgs=sum(b.spec.quota_msgs for b in group),
                quota_bytes=sum(b.spec.quota_bytes for b in group),
            )
        )
    return reports


def _number(value: float) -> str:
    """20 rather than 20.0, 2.5 rather than 2.4999999."""
    if math.isinf(value):
        return "unlimited"
    rounded = round(value)
    if abs(value - rounded) < 1e-6:
        return str(int(rounded))
    return f"{value:.1f}"


def _limit(value: float, as_bytes: bool = False) -> str:
    if math.isinf(value):
        return "unlimited"
    return _human_bytes(value) if as_bytes else _number(value)


def _human_bytes(value: float) -> str:
    if abs(value) < 1024:
        return f"{_number(value)} B"
    units = ["KiB", "MiB", "GiB"]
    value /= 1024
    while abs(value) >= 1024 and len(units) > 1:
        value /= 1024
        units.pop(0)
    return f"{value:.1f} {units[0]}"


def _listing(items: Iterable[str], limit: int = 8) -> str:
    """Comma-separated, cut after ``limit`` items so one log line stays readable."""
    texts = list(items)
    shown = ", ".join(texts[:limit])
    if len(texts) > limit:
        shown += f", and {len(texts) - limit} more"
    return shown
