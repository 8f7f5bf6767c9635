"""Quota buckets: which buckets a demand charges, their effective quotas, and windows.

A bucket counts what its level admitted in the current epoch-aligned window
(``floor(now / period)``). Rolling a stored bucket forward to the current window pays back
one quota per window that ended: over-admission is debt the next windows repay, unused
quota is lost.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..quota_settings import Rate
from .demands import SOURCE_LEVEL, SUBSCRIPTION_LEVEL, TOPIC_LEVEL, PartitionDemand
from .store import BucketState

# Float slack when comparing usage with a quota, so 10 x 0.1 still "fits" into 1.0.
EPSILON = 1e-6

# (msgs/s, bytes/s) published by a demand's partition, smoothed, for one period length.
PublishRate = Callable[[PartitionDemand, int], tuple[float, float]]


@dataclass(slots=True)
class BucketSpec:
    """A bucket as one demand sees it: where it lives and its effective quota now."""

    key: str
    level: str  # SOURCE_LEVEL, TOPIC_LEVEL or SUBSCRIPTION_LEVEL
    label: str  # for messages: "topic", or "broker topic" for a non-default origin
    period_s: int
    quota_msgs: float  # math.inf when that unit is unlimited
    quota_bytes: float


class ChargedQuota(NamedTuple):
    """The quota a bucket had in the window this engine last charged it in."""

    window: int
    msgs: float
    bytes: float


@dataclass(slots=True)
class Bucket:
    """A bucket loaded from the store, rolled forward to the current window."""

    spec: BucketSpec
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
        if remaining_msgs <= EPSILON:
            return "msgs"
        if remaining_bytes <= EPSILON:
            return "bytes"
        return None

    def state(self) -> BucketState:
        return BucketState(self.window, self.used_msgs, self.used_bytes)

    def charged_quota(self) -> ChargedQuota:
        return ChargedQuota(self.window, self.spec.quota_msgs, self.spec.quota_bytes)


# --- which buckets, with which quota -----------------------------------------------------


def source_key(query_id: str) -> str:
    return f"source:{query_id}"


def topic_key(origin: str, partition: str) -> str:
    """The topic bucket of a partition, per origin of its rate ("options" or "broker")."""
    return f"topic:{origin}:{partition}"


def subscription_key(origin: str, subscription: str, partition: str) -> str:
    return f"subscription:{origin}:{subscription}:{partition}"


def bucket_spec(
    key: str, level: str, origin: str, rate: Rate, publish: tuple[float, float]
) -> BucketSpec:
    """Effective quota of ``rate`` now; relative rates add publish rate x period (PIP-52)."""

    def effective(configured: int, publish_rate: float) -> float:
        if configured <= 0:
            return math.inf  # unlimited stays unlimited, relative or not
        if rate.relative_to_publish_rate:
            return publish_rate * rate.period_s + configured
        return float(configured)

    label = level if origin == "options" or level == SOURCE_LEVEL else f"{origin} {level}"
    return BucketSpec(
        key=key,
        level=level,
        label=label,
        period_s=rate.period_s,
        quota_msgs=effective(rate.msgs, publish[0]),
        quota_bytes=effective(rate.bytes, publish[1]),
    )


def scaled(spec: BucketSpec, multiplier: float) -> BucketSpec:
    """``spec`` with its quotas x ``multiplier`` (adaptiveThrottling: the quotas are ceilings; unlimited stays so),
    in whole messages and bytes: a fractional rest would let the one-entry minimum admit one entry more than
    m x the ceiling every window. At least 1, so a small ceiling times a small m still admits (never a stall)."""
    if multiplier == 1.0:
        return spec

    def times(quota: float) -> float:
        return quota if math.isinf(quota) else max(1.0, math.floor(quota * multiplier + EPSILON))

    return replace(spec, quota_msgs=times(spec.quota_msgs), quota_bytes=times(spec.quota_bytes))


def partition_specs(
    demand: PartitionDemand, source: BucketSpec | None, publish_rate: PublishRate
) -> list[BucketSpec]:
    """Every bucket ``demand`` charges: the source-wide one (if limited), then its topic and
    subscription buckets, one per limited (origin, rate)."""
    specs: list[BucketSpec] = [source] if source is not None else []
    for level, rates in (
        (TOPIC_LEVEL, demand.topic_rates),
        (SUBSCRIPTION_LEVEL, demand.subscription_rates),
    ):
        for origin, rate in rates:
            if rate.is_unlimited():
                continue
            if level == TOPIC_LEVEL:
                key = topic_key(origin, demand.partition)
            else:
                key = subscription_key(origin, demand.subscription, demand.partition)
            publish = (0.0, 0.0)
            if rate.relative_to_publish_rate:
                publish = publish_rate(demand, rate.period_s)
            specs.append(bucket_spec(key, level, origin, rate, publish))
    return specs


# --- windows and pay-back ----------------------------------------------------------------


def roll_forward(
    spec: BucketSpec, state: BucketState | None, now: float, charged: ChargedQuota | None
) -> Bucket:
    """The stored ``state`` (None if new) as of the window ``now`` falls in.

    ``charged`` is what this engine last charged the bucket against, if it did.
    """
    window = math.floor(now / spec.period_s)
    if state is None:
        return Bucket(spec, window, 0.0, 0.0)
    if window < state.window:
        # Another process's clock is ahead: keep its window rather than reset it.
        return Bucket(spec, state.window, state.used_msgs, state.used_bytes)
    elapsed = window - state.window
    used_msgs, used_bytes = state.used_msgs, state.used_bytes
    if elapsed > 0:
        # Each window that passed pays back one quota; unused quota is lost (max 0).
        # A relative quota changes over time: the stored window pays back the quota it
        # was charged against (if this engine charged it), not today's smaller one.
        first_msgs, first_bytes = spec.quota_msgs, spec.quota_bytes
        if charged is not None and charged.window == state.window:
            first_msgs, first_bytes = charged.msgs, charged.bytes
        used_msgs = pay_back(used_msgs, first_msgs, spec.quota_msgs, elapsed)
        used_bytes = pay_back(used_bytes, first_bytes, spec.quota_bytes, elapsed)
    return Bucket(spec, window, used_msgs, used_bytes)


def pay_back(used: float, first_quota: float, quota: float, windows: int) -> float:
    """Usage after ``windows`` windows ended: the first pays back the quota it had."""
    paid = first_quota + quota * (windows - 1)
    if math.isinf(paid):
        return 0.0
    return max(0.0, used - paid)
