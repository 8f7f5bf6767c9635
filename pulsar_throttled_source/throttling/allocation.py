"""Admission: how many backlog entries each partition gets from the buckets it charges.

Works on already loaded buckets (the engine loads and stores them); the only calls out are each
demand's callbacks (bytes_for, learn_entries), which may look entries up on the broker:
- unthrottled partitions take their whole backlog first, charged but not limited;
- the others are served in a rotating order (those that got nothing for longest first);
- pass 1 gives each a share of the source-wide bucket in proportion to its backlog, bounded
  by its own topic and subscription buckets, with a one-entry minimum;
- pass 2 hands what partitions limited elsewhere left of the source-wide bucket to those the
  share held back, in proportion to what they still have; pass 3 hands out the rest one
  entry per partition per round.

A little over 300 lines, on purpose: the passes, the per-partition plan they advance and the fit
against every bucket are one algorithm, read top to bottom; split, each part would need the others
to be understood.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..entry_values import EntryValues, LearnedEntries
from ..shared_types import QuotaConfig
from .buckets import EPSILON, Bucket, BucketSpec
from .model import SOURCE_LEVEL, Admission, PartitionDemand
from .report import exhausted_reason, too_small_reason

FIRST_READ_REASON = "messages per entry not known yet: first read admits 1 entry"
SHARE_REASON = f"{SOURCE_LEVEL} share"


@dataclass(slots=True)
class PartitionPlan:
    """One partition's admission while it is being worked out."""

    demand: PartitionDemand
    index: int  # position in the caller's list, for a stable order
    specs: list[BucketSpec]
    msgs_per_entry: float  # 1.0 in batch mode; in precise mode the known entries' average (or 1.0)
    max_entries: int  # backlog, or 1 on a precise-mode first read without an estimate
    unthrottled: str | None
    buckets: list[Bucket] = field(default_factory=list)
    entries: int = 0
    held_back: str | None = None
    limited_by_share: bool = False
    known_msgs: EntryValues | None = None  # precise mode: the messages of the backlog's first entries
    known_bytes: EntryValues | None = None  # with a byte quota: their stored bytes
    _bytes_cache: dict[int, float] = field(default_factory=dict)

    @property
    def backlog(self) -> int:
        return max(0, self.demand.backlog_entries)

    def msgs(self, entries: int) -> float:
        return self.known_msgs.total(entries) if self.known_msgs is not None else entries * self.msgs_per_entry

    def bytes(self, entries: int) -> float:
        # Both may walk a list; the binary search asks for the same k repeatedly.
        if entries not in self._bytes_cache:
            known = self.known_bytes
            self._bytes_cache[entries] = (0.0 if not entries else known.total(entries) if known is not None
                                          else float(self.demand.bytes_for(entries)))
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


def new_plan(
    demand: PartitionDemand,
    index: int,
    specs: list[BucketSpec],
    config: QuotaConfig,
    unthrottled: bool,
    estimate: LearnedEntries | None = None,
) -> PartitionPlan:
    """A plan with nothing admitted yet: whether throttling applies, and how entries convert to
    messages and bytes. With a message quota in precise mode, or a byte quota in either mode, that
    asks the demand about the entries the tightest quota could admit (before the buckets are
    locked: it may look entries up), unless `estimate` prices them (see headroom)."""
    backlog = max(0, demand.backlog_entries)
    if unthrottled:
        reason: str | None = "ReadAllAvailable"
    elif not specs:
        reason = "no quota"
    elif not config.throttle_non_backlog and backlog <= config.non_backlog_threshold_entries:
        threshold = config.non_backlog_threshold_entries
        reason = f"auto-off: backlog {backlog} <= threshold {threshold}"
    else:
        reason = None

    max_entries = backlog
    msgs_per_entry = 1.0
    precise = config.mode == "precise"
    msg_quotas = [spec.quota_msgs for spec in specs if math.isfinite(spec.quota_msgs)] if precise else []
    byte_quotas = [spec.quota_bytes for spec in specs if math.isfinite(spec.quota_bytes)]
    learned = LearnedEntries()
    if estimate is not None and reason is None:
        learned = estimate
    elif backlog and demand.learn_entries is not None and (msg_quotas or byte_quotas):
        # No window admits more than the tightest quota (plus an entry): learning the entries that
        # hold that much prices every admission by what it reads. (Unthrottled, one entry's
        # values price what is charged.)
        learned = demand.learn_entries(min(msg_quotas, default=0.0) if reason is None else 0.0,
                                       min(byte_quotas, default=0.0) if reason is None else 0.0)
    # Precise mode counts what the entries hold wherever they were looked up (for a byte quota too),
    # so a plan's messages, charged and reported, are never its entry count under another name.
    known_msgs = learned.msgs if precise and learned.msgs is not None and learned.msgs.per_entry is not None else None
    if known_msgs is not None:
        msgs_per_entry = known_msgs.per_entry or 1.0
    elif msg_quotas and reason is None:
        # Like the broker's first read: without an estimate, read one entry.
        max_entries = min(1, backlog)
    if learned.reach is not None and reason is None:
        max_entries = min(max_entries, max(1, learned.reach))
    known_bytes = learned.bytes if learned.bytes is not None and learned.bytes.per_entry is not None else None
    return PartitionPlan(
        demand=demand,
        index=index,
        specs=specs,
        msgs_per_entry=msgs_per_entry,
        max_entries=max_entries,
        unthrottled=reason,
        known_msgs=known_msgs,
        known_bytes=known_bytes,
    )


class RotatingCursor:
    """Puts partitions that got nothing for longest first, so none starves when the
    source-wide quota is smaller than the partition count."""

    def __init__(self) -> None:
        # Plan call number at which a partition last got entries.
        self._last_served: dict[str, int] = {}
        self._calls = 0

    def next_call(self) -> None:
        self._calls += 1

    def order(self, plans: list[PartitionPlan]) -> list[PartitionPlan]:
        return sorted(
            plans, key=lambda plan: (self._last_served.get(plan.demand.partition, 0), plan.index)
        )

    def record(self, plans: list[PartitionPlan]) -> None:
        for plan in plans:
            if plan.entries > 0:
                self._last_served[plan.demand.partition] = self._calls


# --- the passes --------------------------------------------------------------------------


def admit(
    plans: list[PartitionPlan], source: Bucket | None, cursor: RotatingCursor, precise: bool
) -> None:
    """Set every plan's entries and held-back reason, charging the buckets as it goes."""
    _passes(plans, source, cursor, precise)
    if source is None:
        return
    unit = source.exhausted_unit()
    if unit is None:
        return
    for plan in plans:
        if plan.limited_by_share:
            # The shares together used the source-wide quota up: say so plainly.
            plan.held_back = exhausted_reason(source, unit)


def _passes(
    plans: list[PartitionPlan], source: Bucket | None, cursor: RotatingCursor, precise: bool
) -> None:
    # Unthrottled partitions first: they take what they take, and throttled partitions
    # then see the buckets with that already charged.
    for plan in plans:
        if plan.unthrottled is not None:
            plan.advance_to(plan.backlog)

    queue = cursor.order([plan for plan in plans if plan.unthrottled is None and plan.backlog > 0])

    # Pass 1: each partition's share of the source-wide bucket is proportional to its
    # backlog; topic and subscription buckets bound it further.
    shares = proportional_shares(queue, source, lambda plan: plan.backlog)
    for plan in queue:
        fit(plan, shares.get(id(plan)), precise, one_entry_minimum=True)

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
            shares = proportional_shares(
                candidates, source, lambda plan: plan.backlog - plan.entries
            )
            for plan in candidates:
                fit(plan, shares.get(id(plan)), precise, one_entry_minimum=False)
            first_round = False
        else:
            for plan in candidates:
                fit(plan, None, precise, one_entry_minimum=False, most=1)
            if sum(plan.entries for plan in candidates) == admitted_before:
                return


def proportional_shares(
    plans: list[PartitionPlan], source: Bucket | None, weight: Callable[[PartitionPlan], int]
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


@dataclass
class _Cap:
    """An upper bound on what a partition may add in one fitting step."""

    msgs: float
    bytes: float
    bucket: Bucket | None  # None for the partition's share of the source-wide bucket


def fit(
    plan: PartitionPlan,
    share: tuple[float, float] | None,
    precise: bool,
    one_entry_minimum: bool,
    most: int | None = None,
) -> None:
    """Grow ``plan.entries`` to the largest count every bucket (and the share) allows,
    by at most ``most`` entries, and say what held it back."""
    caps: list[_Cap] = []
    source_cap: _Cap | None = None
    for bucket in plan.buckets:
        unit = bucket.exhausted_unit()
        if unit is not None:
            plan.held_back = exhausted_reason(bucket, unit)
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

    def violated(entries: int) -> tuple[_Cap, str] | None:
        add_msgs = plan.msgs(entries) - base_msgs
        add_bytes = plan.bytes(entries) - base_bytes
        # Precise mode admits the entry count nearest the quota: the last entry goes in when
        # less than half of it is over (carried as debt), rather than always rounding down,
        # which would lose the same slack every window (a drift). Half of that entry's own
        # messages: the midpoint of entry k grows with k, so the bisection below still holds.
        msgs_slack = 0.5 * (plan.msgs(entries) - plan.msgs(entries - 1)) if precise and entries > start else 0.0
        for cap in caps:
            if add_msgs > cap.msgs + msgs_slack + EPSILON:
                return cap, "msgs"
            if add_bytes > cap.bytes + EPSILON:
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
        plan.held_back = FIRST_READ_REASON
    else:
        # Name the first limit the next entry would break.
        hit = violated(entries + 1)
        limiting = hit[0].bucket if hit is not None else None
        if hit is None or limiting is None:
            # The share (or the one-entry-per-round step) stopped it: more may follow.
            plan.held_back = SHARE_REASON
            plan.limited_by_share = True
            return
        unit = hit[1]
        exhausted = limiting.exhausted_unit()
        if exhausted is not None:
            plan.held_back = exhausted_reason(limiting, exhausted)
        else:
            plan.held_back = too_small_reason(limiting, unit)
