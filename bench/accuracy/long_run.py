"""Long-run error: what was delivered over a span of windows vs quota x the windows in it.

A window's error says how a single plan landed; the long run says whether errors even out (debt
pays back over-admission). Three figures, from raw to judged:

- raw: delivered in the span vs quota x windows;
- without the debt at the span's ends: what the buckets owed when the span began was admitted
  before it but paid for by its windows (added), and what they still owe after it was admitted in
  it but is due after it (taken out); both from the source's own buckets (charges.py);
- against the quota of the windows with a plan: quota is lost in a window in which no trigger
  planned (Spark was still running the previous micro-batch, which on a busy machine happens);
  that is Spark's pacing, not the planner's, so the target is judged on what the planner was given
  (quota x windows less what the windows without a plan lost, per the buckets).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .windows import Windows


@dataclass
class LongRun:
    span: str  # which windows, in words
    windows: int  # window-partitions counted
    quota: float  # per window and partition
    delivered: float
    per_partition: dict[str, float] | None = None  # partition -> raw error in %
    debt_in: float = 0.0  # the buckets' use when the span began (admitted before it, paid by its windows)
    debt_out: float | None = None  # still owed after the span, per the quota buckets; None: unknown
    lost_no_trigger: float = 0.0  # quota of windows in which no trigger planned (and debt did not cover)
    no_trigger_windows: int = 0

    @property
    def expected(self) -> float:
        return self.quota * self.windows

    @property
    def error_pct(self) -> float:
        return 100 * (self.delivered - self.expected) / self.expected if self.expected else 0.0

    def _due(self) -> float:
        """Delivered and due within the span: plus what start-up debt the span paid, minus what is owed after."""
        return self.delivered + self.debt_in - (self.debt_out or 0.0)

    @property
    def adjusted_error_pct(self) -> float | None:
        if self.debt_out is None or not self.expected:
            return None
        return 100 * (self._due() - self.expected) / self.expected

    @property
    def judged_pct(self) -> float:
        """Against the quota of the windows with a plan, without the debt at the span's ends (when known)."""
        base = self.expected - self.lost_no_trigger
        due = self._due() if self.debt_out is not None else self.delivered
        return 100 * (due - base) / base if base else 0.0

    def lines(self, unit: str) -> list[str]:
        parts = ""
        if self.per_partition:
            parts = " (" + ", ".join(f"partition {p.rsplit('-', 1)[-1]} {e:+.2f}%" for p, e in self.per_partition.items()) + ")"
        out = [f"long-run ({self.span}): delivered {self.delivered:,.0f} {unit} vs quota x windows "
               f"{self.quota:,.0f} x {self.windows} = {self.expected:,.0f}: raw {self.error_pct:+.2f}%{parts}"]
        if self.debt_out is not None:
            out.append(f"long-run without the debt at the span's ends (owed when it began {self.debt_in:,.0f}, still owed "
                       f"after it {self.debt_out:,.0f}, per the quota buckets): {self.adjusted_error_pct:+.2f}%")
        if self.no_trigger_windows or self.lost_no_trigger:
            out.append(f"quota lost in {_windows(self.no_trigger_windows)} without a trigger (Spark still ran the previous batch): "
                       f"{self.lost_no_trigger:,.0f} {unit} ({100 * self.lost_no_trigger / self.expected:.1f}% of the span's); "
                       f"long-run against the quota of the windows with a plan: {self.judged_pct:+.2f}%")
        return out


def _windows(n: int) -> str:
    return f"{n} window" if n == 1 else f"{n} windows"


Carried = Callable[[int], float]  # a partition's bucket use at the start of a window (before its plans)


def over_span(w: Windows, partitions: list[str], quota: float, start: int, end: int,
              carried: dict[str, Carried] | None = None, table_from: int | None = None) -> LongRun:
    """Every window from `start` to `end` (inclusive), each partition. `carried`: the source's own
    bucket use per partition (charges.py), for the debt at the span's ends and the quota lost in
    windows without a trigger; without it those are replayed from the deliveries (from the first
    one, into fresh buckets), and the debt owed after the span is not claimed (replayed debt would
    absorb any over-admission). `table_from`: the window of the table's first row, for the text."""
    n = max(0, end - start + 1)
    origin = (w.first_data or start) if table_from is None else table_from
    per = {p: sum(w.delivered(x, p) for x in range(start, end + 1)) for p in partitions}
    use = carried or {p: _replayed(w, p, quota) for p in partitions}
    unplanned = [x for x in range(start, end + 1) if x not in w.planned]
    return LongRun(f"{n} windows x {len(partitions)} partitions: {start - origin:+d} to {end - origin:+d} of the table",
                   n * len(partitions), quota, sum(per.values()),
                   {p: 100 * (d - quota * n) / (quota * n) if n else 0.0 for p, d in per.items()},
                   sum(use[p](start) for p in partitions),
                   sum(use[p](end + 1) for p in partitions) if carried else None,
                   sum(max(0.0, quota - use[p](x)) for p in partitions for x in unplanned), len(unplanned))


def _replayed(w: Windows, partition: str, quota: float) -> Carried:
    """Bucket use at the start of each window, replaying the documented rule on the deliveries."""
    table: dict[int, float] = {}
    if w.first_data is not None:
        carried = 0.0
        for x in range(w.first_data, max(w.planned | set(w.cells)) + 2):
            table[x] = carried
            carried = max(0.0, carried + w.delivered(x, partition) - quota)
    return lambda window: table.get(window, 0.0)


def saturated_cells(w: Windows, partitions: list[str], span: tuple[int, int]) -> list[tuple[int, str]]:
    """(window, partition) where the window's last plan left backlog: the quota, not the data, limited it."""
    return [(x, p) for x in sorted(w.backlog_after) if span[0] <= x <= span[1]
            for p in partitions if w.backlog_after[x].get(p, 0) > 0]


def over_saturated(w: Windows, partitions: list[str], quota: float, span: tuple[int, int]) -> LongRun:
    cells = saturated_cells(w, partitions, span)
    per: dict[str, list[float]] = {p: [] for p in partitions}
    for x, p in cells:
        per[p].append(w.delivered(x, p))
    return LongRun(f"the {len(cells)} saturated window-partitions", len(cells), quota, sum(sum(v) for v in per.values()),
                   {p: 100 * (sum(v) - quota * len(v)) / (quota * len(v)) for p, v in per.items() if v})
