"""The words: why a partition was held back, per-level reports, and the summary log line."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..quota_settings import QuotaConfig
from .buckets import EPSILON, Bucket
from .demands import SOURCE_LEVEL, SUBSCRIPTION_LEVEL, TOPIC_LEVEL, Admission

# --- held-back reasons -------------------------------------------------------------------


def exhausted_reason(bucket: Bucket, unit: str) -> str:
    used, quota = (
        (bucket.used_msgs, bucket.spec.quota_msgs)
        if unit == "msgs"
        else (bucket.used_bytes, bucket.spec.quota_bytes)
    )
    debt = used - quota
    if debt > EPSILON:
        return f"{bucket.spec.label} quota exhausted ({unit}, debt {number(debt)})"
    return f"{bucket.spec.label} quota exhausted ({unit})"


def too_small_reason(bucket: Bucket, unit: str) -> str:
    remaining = bucket.remaining()[0 if unit == "msgs" else 1]
    return f"{bucket.spec.label} quota too small for the next entry ({unit}, {number(remaining)} left)"


# --- per level ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelReport:
    """What one level charged in the last plan() call (for the summary)."""

    label: str
    buckets: int
    charged_msgs: float
    charged_bytes: float
    used_msgs: float  # after charging; meaningful for the single source-wide bucket
    used_bytes: float
    quota_msgs: float
    quota_bytes: float
    window_used: float = 0.0  # the fullest bucket's share of its window's quota used (1.0: exhausted), by its tighter unit
    debt_msgs: float = 0.0  # used beyond the quota, summed over the level's buckets: what later windows repay
    debt_bytes: float = 0.0
    window_start_ms: int = 0  # the epoch ms the window charged starts at (the earliest of the level's buckets)


def window_used(bucket: Bucket) -> float:
    """The share of its window's quota the bucket used, by its fuller unit (a debt caps at 1.0)."""
    shares = [used / quota for used, quota in ((bucket.used_msgs, bucket.spec.quota_msgs),
                                               (bucket.used_bytes, bucket.spec.quota_bytes))
              if 0 < quota < math.inf]
    return min(1.0, max(shares, default=0.0))


def level_reports(buckets: Iterable[Bucket]) -> list[LevelReport]:
    grouped: dict[str, list[Bucket]] = {}
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
            LevelReport(
                label=label,
                buckets=len(group),
                charged_msgs=sum(b.charged_msgs for b in group),
                charged_bytes=sum(b.charged_bytes for b in group),
                used_msgs=sum(b.used_msgs for b in group),
                used_bytes=sum(b.used_bytes for b in group),
                quota_msgs=sum(b.spec.quota_msgs for b in group),
                quota_bytes=sum(b.spec.quota_bytes for b in group),
                window_used=max(window_used(b) for b in group),
                debt_msgs=sum(max(0.0, b.used_msgs - b.spec.quota_msgs) for b in group),
                debt_bytes=sum(max(0.0, b.used_bytes - b.spec.quota_bytes) for b in group),
                window_start_ms=min(b.window * b.spec.period_s * 1000 for b in group),
            )
        )
    return reports


# --- the summary line --------------------------------------------------------------------


def summary_line(
    config: QuotaConfig, admissions: Sequence[Admission], levels: Sequence[LevelReport]
) -> str:
    """One human log line: per level what was admitted and why partitions were held back."""
    with_backlog = [a for a in admissions if a.entries > 0 or a.held_back]
    served = [a for a in admissions if a.entries > 0]
    line = (
        f"query {config.query_id} quota plan ({config.mode}): admitted "
        f"{sum(a.entries for a in admissions)} entries, "
        f"{number(sum(a.msgs for a in admissions))} msgs, "
        f"{human_bytes(sum(a.bytes for a in admissions))} "
        f"on {len(served)}/{len(with_backlog)} partitions with backlog"
    )
    held = [a for a in admissions if a.held_back]
    parts = [line]
    for report in levels:
        text = (
            f"{report.label}: charged {number(report.charged_msgs)} msgs, "
            f"{human_bytes(report.charged_bytes)}"
        )
        if report.label == SOURCE_LEVEL:
            text += (
                f" (used {number(report.used_msgs)}/{quota_text(report.quota_msgs)} msgs, "
                f"{human_bytes(report.used_bytes)}/{quota_text(report.quota_bytes, True)})"
            )
        else:
            text += f" on {report.buckets} bucket{'s' if report.buckets != 1 else ''}"
        held_here = sum(1 for a in held if (a.held_back or "").startswith(report.label + " "))
        if held_here:
            text += f", held back {held_here}"
        parts.append(text)
    if held:
        parts.append("held back: " + listing(f"{a.partition} ({a.held_back})" for a in held))
    else:
        parts.append("held back: none")
    free = [a for a in admissions if a.unthrottled]
    if free:
        parts.append("unthrottled: " + listing(f"{a.partition} ({a.unthrottled})" for a in free))
    return "; ".join(parts)


# --- numbers -----------------------------------------------------------------------------


def number(value: float) -> str:
    """20 rather than 20.0, 2.5 rather than 2.4999999."""
    if math.isinf(value):
        return "unlimited"
    rounded = round(value)
    if abs(value - rounded) < 1e-6:
        return str(int(rounded))
    return f"{value:.1f}"


def quota_text(value: float, as_bytes: bool = False) -> str:
    if math.isinf(value):
        return "unlimited"
    return human_bytes(value) if as_bytes else number(value)


def human_bytes(value: float) -> str:
    if abs(value) < 1024:
        return f"{number(value)} B"
    units = ["KiB", "MiB", "GiB"]
    value /= 1024
    while abs(value) >= 1024 and len(units) > 1:
        value /= 1024
        units.pop(0)
    return f"{value:.1f} {units[0]}"


def listing(items: Iterable[str], limit: int = 8) -> str:
    """Comma-separated, cut after ``limit`` items so one log line stays readable."""
    texts = list(items)
    shown = ", ".join(texts[:limit])
    if len(texts) > limit:
        shown += f", and {len(texts) - limit} more"
    return shown
