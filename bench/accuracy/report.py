"""What the bench prints per scenario: the per-window table, the summary lines, the long run.

The four drain scenarios of old print exactly what they printed before (tables of the windows with
data, then three summary lines); the long-run lines follow them. The newer scenarios print a table
of every window of their span and the summary their per-window figures are judged on.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from .idle_gaps import AFTER_IDLE, MIN_IDLE_WINDOWS, window_kind
from .long_run import saturated_cells
from .result import Result
from .windows import Windows

Row = tuple[int, str, float, int]  # (window, partition, delivered, batches)


def report(result: Result) -> dict[str, Any]:
    s = result.scenario
    print(f"\n== {s.name}: {s.mode} mode, quota {s.quota} {s.unit} per window and partition ==")
    if s.runner == "idle-gaps":
        summary = _idle_gaps(result)
    elif s.runner == "shared":
        summary = _shared(result)
    elif s.per_window:
        summary = _drain(result)
    else:
        _table(result, lambda w, p: _cell(result, w, p, "-" if w not in result.windows.planned else None))
        summary = {}
    for line in result.notes:
        print(line)
    for line in result.long_run.lines(s.unit):
        print(line)
    return summary


def rows_of(w: Windows) -> list[Row]:
    """Windows with data only, as the table of the drain scenarios has always shown them."""
    return [(x, p, c.delivered, c.batches) for x in sorted(w.cells) for p, c in sorted(w.cells[x].items())]


def _num(d: float) -> str:
    return f"{d:.0f}"


def _drain(result: Result) -> dict[str, Any]:
    quota, unit = result.scenario.quota, result.scenario.unit
    rows = rows_of(result.windows)
    partitions = sorted({p for _, p, _, _ in rows})
    cells = {(w, p): d for w, p, d, _ in rows}
    windows = sorted({w for w, _, _, _ in rows})
    print("window  " + "  ".join(f"{'partition ' + p.rsplit('-', 1)[-1]:>20}" for p in partitions))
    for w in windows:
        cols = []
        for p in partitions:
            d = cells.get((w, p))
            cols.append(f"{_num(d):>10} ({100 * (d - quota) / quota:+5.1f}%)" if d is not None else f"{'-':>20}")
        print(f"{w - windows[0]:>6}  " + "  ".join(f"{c:>20}" for c in cols))
    errors = [(d - quota) / quota for _, _, d, _ in rows]
    # Windows after the first batch (its start-up takes seconds) in which no trigger planned.
    steady = windows[1:]
    missed = (steady[-1] - steady[0] + 1 - len(steady)) if steady else 0
    summary = {"windows": len(windows), "missed": missed, **_stats([d for _, _, d, _ in rows], quota)}
    per_partition = ", ".join(
        f"partition {p.rsplit('-', 1)[-1]} {100 * statistics.fmean((d - quota) / quota for _, q, d, _ in rows if q == p):+.2f}%"
        for p in partitions)
    print(f"windows with a batch: {summary['windows']} (after start-up, windows without a trigger: {summary['missed']}); "
          f"delivered {_num(summary['total'])} {unit}")
    print(f"largest over-delivery: {_num(summary['largest_over'])} {unit} ({summary['largest_over_pct']:+.1f}%); "
          f"largest under-delivery: {summary['largest_under_pct']:+.1f}%")
    print(f"mean error: {summary['mean_error_pct']:+.2f}% ({per_partition}); mean |error| {summary['mean_abs_error_pct']:.2f}%; "
          f"windows within 5%: {summary['within_5pct']}/{summary['cells']}")
    assert len(errors) == summary["cells"]
    return summary


def _stats(values: list[float], quota: float) -> dict[str, Any]:
    errors = [(d - quota) / quota for d in values]
    over = max((d - quota for d in values), default=0)
    return {
        "largest_over": over,
        "largest_over_pct": 100 * over / quota,
        "largest_under_pct": 100 * min(errors, default=0.0),
        "mean_abs_error_pct": 100 * statistics.fmean(abs(e) for e in errors) if errors else 0.0,
        "mean_error_pct": 100 * statistics.fmean(errors) if errors else 0.0,
        "within_5pct": sum(1 for e in errors if abs(e) <= 0.05),
        "cells": len(errors),
        "total": sum(values),
    }


def _stats_line(what: str, s: dict[str, Any], unit: str) -> str:
    return (f"{what}: {s['cells']}; within 5%: {s['within_5pct']}/{s['cells']}; largest over-delivery "
            f"{_num(s['largest_over'])} {unit} ({s['largest_over_pct']:+.1f}%), largest under-delivery "
            f"{s['largest_under_pct']:+.1f}%; mean error {s['mean_error_pct']:+.2f}%, mean |error| {s['mean_abs_error_pct']:.2f}%")


def _cell(result: Result, w: int, p: str, missing: str | None, suffix: str = "") -> str:
    """`delivered (error%)` of one window and partition; `missing` replaces it when given."""
    if missing is not None:
        return missing
    quota, d = result.scenario.quota, result.windows.delivered(w, p)
    return f"{_num(d)} ({100 * (d - quota) / quota:+6.1f}%){suffix}"


def _table(result: Result, text: Callable[[int, str], str], width: int = 24) -> None:
    """Every window of the span, relative to its first; `-` where no trigger planned."""
    first, last = result.span
    print("window  " + "  ".join(f"{'partition ' + p.rsplit('-', 1)[-1]:>{width}}" for p in result.partitions))
    for w in range(first, last + 1):
        print(f"{w - first:>6}  " + "  ".join(f"{text(w, p):>{width}}" for p in result.partitions))


def _idle_gaps(result: Result) -> dict[str, Any]:
    w, quota, unit = result.windows, result.scenario.quota, result.scenario.unit
    after = {(x, p) for x, p, _ in result.figures["after_idle"]}

    def text(x: int, p: str) -> str:
        if x not in w.planned:
            return "-"
        kind = window_kind(w, x, p)
        mark = " S" if kind == "S" else " D" if kind == "D" else ""
        return "idle" if kind == "idle" else _cell(result, x, p, None, mark + ("*" if (x, p) in after else ""))

    print("S: saturated (backlog left after the window, judged); D: drained the burst's last data (not judged); "
          "*: among the first windows after an idle stretch")
    _table(result, text, 26)
    saturated = saturated_cells(w, result.partitions, result.span)
    summary = _stats([w.delivered(x, p) for x, p in saturated], quota)
    kinds = [window_kind(w, x, p) for x in range(result.span[0], result.span[1] + 1) if x in w.planned for p in result.partitions]
    print(_stats_line("saturated window-partitions", summary, unit))
    print(f"not judged: {kinds.count('D')} window-partitions that drained a burst, {kinds.count('idle')} idle; "
          f"windows without a trigger: {sum(1 for x in range(result.span[0], result.span[1] + 1) if x not in w.planned)}")
    largest = max((d for *_, d in result.figures["after_idle"]), default=0.0)
    summary["after_idle"] = len(after)
    summary["after_idle_largest_pct"] = 100 * (largest - quota) / quota
    print(f"windows after an idle stretch (the first {AFTER_IDLE} with data after >= {MIN_IDLE_WINDOWS} idle ones, per partition): {len(after)}; "
          f"largest delivery {_num(largest)} {unit} ({summary['after_idle_largest_pct']:+.1f}% vs the quota)")
    return summary


def _shared(result: Result) -> dict[str, Any]:
    w, quota, unit = result.windows, result.scenario.quota, result.scenario.unit
    apps = result.figures["apps"]

    def text(x: int, p: str) -> str:
        if x not in w.planned:
            return "-"
        split = "+".join(_num(a.delivered(x, p)) for a in apps.values())
        return _cell(result, x, p, None, f" {split}")

    print("each cell: both applications together (error vs quota) first+second")
    _table(result, text, 28)
    first, last = result.span
    # Judged where a plan ran: a window in which neither application triggered is Spark's pacing (the long run counts it).
    summary = _stats([w.delivered(x, p) for x in range(first, last + 1) if x in w.planned for p in result.partitions], quota)
    print(_stats_line("window-partitions where both ran and either planned", summary, unit))
    over = result.figures["over_anywhere"]
    print(f"windows over the quota, inside the span or not: {len(over)}"
          + (" (" + ", ".join(f"+{x - first} partition {p.rsplit('-', 1)[-1]}: {_num(d)}" for x, p, d in over[:5]) + ")" if over else "")
          + f"; windows without a trigger in either application: {sum(1 for x in range(first, last + 1) if x not in w.planned)}")
    summary["over_anywhere"] = len(over)
    return summary
