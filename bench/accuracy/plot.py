"""The figure: one panel per scenario. Per-window deliveries against the quota, or, where a window's
error means nothing (entries larger than a window's quota), cumulative delivery against quota x windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .result import Result


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 3.6 * len(results)), squeeze=False)
    for ax, result in zip(axes[:, 0], results, strict=True):
        if result.scenario.per_window:
            _per_window(ax, result)
        else:
            _cumulative(ax, result)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _per_window(ax: Any, result: Result) -> None:
    s, w = result.scenario, result.windows
    first, last = result.span
    for partition in result.partitions:
        if s.runner == "drain":  # windows with data, as always
            xs = [x - first for x in sorted(w.cells) if partition in w.cells[x]]
        else:  # a live or shared topic: every planned window, idle ones at 0
            xs = [x - first for x in range(first, last + 1) if x in w.planned]
        ax.plot(xs, [w.delivered(x + first, partition) for x in xs], marker="o", markersize=3, linewidth=1,
                label=f"partition {partition.rsplit('-', 1)[-1]}")
    ax.axhline(s.quota, color="black", linestyle="--", linewidth=1, label="quota")
    if s.mode == "precise":
        ax.axhspan(s.quota * 0.95, s.quota * 1.05, color="green", alpha=0.1, label="±5%")
    ax.set_title(f"{s.name}: delivered {s.unit} per window (quota {s.quota})")
    ax.set_xlabel("window (s since first batch)")
    ax.set_ylabel(s.unit)
    ax.set_ylim(0, s.quota * 1.3)


def _cumulative(ax: Any, result: Result) -> None:
    s, w = result.scenario, result.windows
    first, last = result.span
    xs = list(range(0, last - first + 1))
    for partition in result.partitions:
        total, ys = 0.0, []
        for x in xs:
            total += w.delivered(x + first, partition)
            ys.append(total)
        ax.step(xs, ys, where="post", linewidth=1, label=f"partition {partition.rsplit('-', 1)[-1]}")
    ax.plot(xs, [s.quota * (x + 1) for x in xs], color="black", linestyle="--", linewidth=1, label="quota x windows")
    ax.set_title(f"{s.name}: cumulative {s.unit} delivered per partition (quota {s.quota:,} per window)")
    ax.set_xlabel("window (s since first batch)")
    ax.set_ylabel(s.unit)
