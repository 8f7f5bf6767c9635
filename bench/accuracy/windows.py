"""Attributing deliveries to quota windows.

A micro-batch counts in the window its plan ran in (the engine charges the buckets at the end of
latestOffset), not the window its rows arrived in: that is the window whose quota paid for it.
Several runs (the two applications of a shared-quota scenario) add up in the same cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .recorder import Delivery, RunRecord

# How one partition's delivery in one batch is measured against the quota (entries, messages, bytes).
Measure = Callable[[str, Delivery], float]


@dataclass
class Cell:
    """What one partition got in one window."""

    delivered: float = 0.0
    batches: int = 0  # micro-batches with data from this partition planned in the window


@dataclass
class Windows:
    cells: dict[int, dict[str, Cell]] = field(default_factory=dict)  # window -> partition -> cell (partitions with data)
    planned: set[int] = field(default_factory=set)  # windows in which any run planned (with or without data)
    # window -> partition -> entries left after that window's last plan: > 0 means the quota, not the
    # backlog, limited the window (a saturated window)
    backlog_after: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def first_data(self) -> int | None:
        return min(self.cells) if self.cells else None

    @property
    def last_planned(self) -> int | None:
        return max(self.planned) if self.planned else None

    def delivered(self, window: int, partition: str) -> float:
        cell = self.cells.get(window, {}).get(partition)
        return cell.delivered if cell else 0.0

    def partitions(self) -> list[str]:
        return sorted({p for parts in self.cells.values() for p in parts}, key=_partition_key)


def attribute(runs: Iterable[RunRecord], measure: Measure, charged: dict[int, dict[str, int]] | None = None) -> Windows:
    """`charged`: batch -> partition -> the window the source charged it in (charges.py), which wins
    over the window its progress says it was planned in."""
    out = Windows()
    charged = charged or {}
    for run in runs:
        data_plans = {p.batch_id: p for p in run.plans if p.has_data}
        for plan in run.plans:  # progress order: the last plan of a window wins its backlog
            # A charged plan ran in its charge's window, whatever its progress timestamp says.
            window = min(charged[plan.batch_id].values()) if plan.has_data and charged.get(plan.batch_id) else plan.window
            out.planned.add(window)
            if plan.backlog_after:
                out.backlog_after.setdefault(window, {}).update(plan.backlog_after)
        for batch_id, parts in run.batches.items():
            planned = data_plans.get(batch_id)
            if planned is None or not parts:  # its progress was not recorded (the query stopped): unattributable
                continue
            for partition, delivery in parts.items():
                window = charged.get(batch_id, {}).get(partition, planned.window)
                cell = out.cells.setdefault(window, {}).setdefault(partition, Cell())
                cell.delivered += measure(partition, delivery)
                cell.batches += 1
    return out


def entries_by_partition(run: RunRecord) -> dict[str, list[tuple[tuple[int, int], int, int]]]:
    """Per partition, every delivered entry in topic order: (position, messages, window it was planned in)."""
    windows = {p.batch_id: p.window for p in run.plans if p.has_data}
    out: dict[str, list[tuple[tuple[int, int], int, int]]] = {}
    for batch_id, parts in run.batches.items():
        if batch_id in windows:
            for partition, delivery in parts.items():
                out.setdefault(partition, []).extend((pos, n, windows[batch_id]) for pos, n in delivery.entries.items())
    return {p: sorted(v) for p, v in out.items()}


def measure_of(unit: str, stored: Callable[[str, tuple[int, int]], float] | None = None) -> Measure:
    """`entries`: distinct entries; `messages`: rows; `bytes`: stored bytes of the entries (needs `stored`)."""
    if unit == "entries":
        return lambda _, d: float(len(d.entries))
    if unit == "messages":
        return lambda _, d: float(d.msgs)
    if unit == "bytes":
        assert stored is not None, "bytes are measured from the stored entry sizes"
        return lambda p, d: float(sum(stored(p, e) for e in d.entries))
    raise ValueError(f"unknown unit {unit!r}")


def _partition_key(partition: str) -> tuple[str, int]:
    base, _, index = partition.rpartition("-partition-")
    return (base, int(index)) if index.isdigit() else (partition, -1)
