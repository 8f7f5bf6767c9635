"""Admission: how many backlog entries each partition gets from the buckets it charges.

Works on already built plans (partition_plan) over already loaded buckets (the engine loads and
stores them); the only calls out are the demands' bytes_for, through the plans:
- unthrottled partitions take their whole backlog first, charged but not limited;
- the others are served in a rotating order (those that got nothing for longest first);
- pass 1 gives each a share of the source-wide bucket in proportion to its backlog, bounded
  by its own topic and subscription buckets, with a one-entry minimum;
- pass 2 hands what partitions limited elsewhere left of the source-wide bucket to those the
  share held back, in proportion to what they still have; pass 3 hands out the rest one
  entry per partition per round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .buckets import EPSILON, Bucket
from .demands import SOURCE_LEVEL
from .partition_plan import PartitionPlan
from .report import exhausted_reason, too_small_reason

FIRST_READ_REASON = "messages per entry not known yet: first read admits 1 entry"
SHARE_REASON = f"{SOURCE_LEVEL} share"


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
