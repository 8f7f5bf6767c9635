"""Plots of a throttled query's recent progress: what each micro-batch (or quota window) admitted against
the quotas, how full each quota level's window was, and the lag in entries and seconds over time.

    from pulsar_throttled_source.plots import plot_progress
    fig = plot_progress(query.recentProgress, quotas={"topic quota": 40})   # or a query, or progress JSON
    fig.savefig("throttle.png")                                             # a notebook shows `fig` as it is

Reads the source's report (query_progress.source_report) of every event, so the same on every Spark line
(4.2+: the source's latestOffset; 4.0/4.1: its endOffset["progress"]). Needs matplotlib, the `plots`
extra, imported only when a plot is drawn; the figure is a bare matplotlib Figure (no pyplot, no GUI
backend), so it draws headless. progress_points gives the plotted numbers without matplotlib.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from .query_progress import _as_dict as progress_dict
from .query_progress import source_report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EXTRA_HINT = "pip install 'pulsar-throttled-source[plots]'"


class ProgressPoint(NamedTuple):
    """One progress event of the source: its trigger and what the source's report said."""

    batch_id: int
    time: float  # epoch seconds of the trigger (the event's timestamp)
    rows: int  # rows the source gave the micro-batch (0: the trigger ran no batch)
    entries_behind: int | None  # None: the event carries no report of this source
    messages_behind: int | None
    seconds_behind: float | None  # None also while the publish time is not known yet
    window_used: dict[str, float]  # per quota level in this trigger's plan: share of its window used (0..1)
    held_by: str | None  # the level that held back the most partitions


def progress_points(progress: Any, source: int = 0) -> list[ProgressPoint]:
    """The source's points, oldest first, from `progress`: a StreamingQuery (its recentProgress), or an
    iterable of progress events (StreamingQueryProgress objects, their JSON, or that JSON parsed)."""
    events = getattr(progress, "recentProgress", progress)
    if isinstance(events, (str, bytes, Mapping)):
        raise TypeError("progress_points wants several progress events (e.g. query.recentProgress), not one")
    points = []
    for event in events:
        data = progress_dict(event)
        sources = data.get("sources") or []
        if source >= len(sources) or "timestamp" not in data:
            continue
        report = source_report(data, source) or {}
        throttle = report.get("throttle") or {}
        points.append(ProgressPoint(
            batch_id=int(data.get("batchId", -1)), time=epoch_seconds(data["timestamp"]),
            rows=int(sources[source].get("numInputRows") or 0),
            entries_behind=report.get("entriesBehindLatest"), messages_behind=report.get("messagesBehindLatest"),
            seconds_behind=report.get("secondsBehindLatest"),
            window_used={level: float(s.get("windowUsed", 0.0)) for level, s in (throttle.get("levels") or {}).items()},
            held_by=throttle.get("heldBy")))
    return sorted(points, key=lambda p: p.time)


def epoch_seconds(timestamp: str) -> float:
    """Spark's progress timestamp ("2026-11-26T10:48:19.123Z", UTC) in epoch seconds."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def admitted_per_window(points: list[ProgressPoint], window: float) -> list[tuple[float, int]]:
    """Rows admitted per quota window of `window` seconds: (the window's start in epoch seconds, rows), for
    every window from the first point's to the last one's, empty ones included. Windows are epoch-aligned as
    the quota buckets' (floor(time / period)); a batch counts in the window its trigger started in."""
    if window <= 0:
        raise ValueError(f"window must be a positive number of seconds (ratePeriodInSecond), got {window!r}")
    if not points:
        return []
    first, last = int(points[0].time // window), int(points[-1].time // window)
    rows = dict.fromkeys(range(first, last + 1), 0)
    for p in points:
        rows[int(p.time // window)] += p.rows
    return [(k * window, n) for k, n in sorted(rows.items())]


def plot_progress(progress: Any, *, source: int = 0, quotas: Mapping[str, float] | None = None,
                  window: float | None = None, title: str | None = None) -> Figure:
    """A figure of three panels sharing the time axis (seconds since the first event):
    - admitted: rows per micro-batch (or per quota window of `window` seconds, epoch-aligned as the
      buckets are), with a dashed line per entry of `quotas` (label -> rows per batch or window: the
      progress reports no limits, so give the ones your options set, in rows);
    - quota use: per level in the plan, the share of its window used (1.0: the level's limit), with the
      triggers where that level held partitions back marked;
    - lag: entries behind (left axis) and seconds behind (right axis) after each trigger, with a caption saying
      what seconds behind measures.
    Legends sit outside the panels, right of the data; a first micro-batch that took much longer than the next
    (Spark's and the source's start-up) is marked as such."""
    Figure = _figure_class()
    points = progress_points(progress, source)
    if not points:
        raise ValueError("no progress event of this source to plot yet: wait for the query's first trigger")
    t0 = points[0].time
    times = [p.time - t0 for p in points]
    fig = Figure(figsize=(12, 8.5), layout="constrained")
    admitted, used, lag = fig.subplots(3, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2, 2]})

    if window:
        bars = [(start - t0, n) for start, n in admitted_per_window(points, window)]
        admitted.bar([b[0] for b in bars], [b[1] for b in bars], width=window * 0.9, align="edge",
                     color="#4c72b0", label=f"rows admitted per {window:g} s window")
    else:
        gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
        width = 0.8 * min(gaps) if gaps else 0.8
        admitted.bar(times, [p.rows for p in points], width=width, color="#4c72b0", label="rows per micro-batch")
    colors = ["#c44e52", "#dd8452", "#8172b3", "#937860", "#da8bc3"]
    for i, (label, limit) in enumerate((quotas or {}).items()):
        admitted.axhline(limit, color=colors[i % len(colors)], linestyle="--", linewidth=2, label=f"{label}: {limit:g}")
    admitted.set_ylabel("rows admitted")
    highest = max([*(b.get_height() for b in admitted.patches), *(quotas or {}).values(), 1])
    admitted.set_ylim(0, highest * 1.3)  # room for the start-up note above the quota lines
    _legend_outside(admitted)
    startup = first_batch_startup(times)
    if startup is not None:
        # a collection, not a patch: the panel's patches stay its bars
        admitted.fill_betweenx([0, highest * 1.3], times[0], startup, color="0.85", alpha=0.5, zorder=0,
                               label="first micro-batch's start-up")
        admitted.text((times[0] + startup) / 2, highest * 1.27, "first micro-batch: Spark's and the\nsource's start-up",
                      ha="center", va="top", fontsize=8, color="0.3")
    admitted.set_title(title or f"Throttled source {source}: {sum(p.rows for p in points):,} rows in "
                                f"{sum(1 for p in points if p.rows)} micro-batches")

    levels = sorted({level for p in points for level in p.window_used})
    for level in levels:
        xs = [t for t, p in zip(times, points, strict=True) if level in p.window_used]
        ys = [p.window_used[level] for p in points if level in p.window_used]
        line = used.plot(xs, ys, marker=".", label=f"{level}: share of window used")[0]
        held = [(t, p.window_used[level]) for t, p in zip(times, points, strict=True) if p.held_by == level and level in p.window_used]
        if held:
            used.scatter([h[0] for h in held], [h[1] for h in held], marker="v", s=40, color=line.get_color(),
                         zorder=3, label=f"{level} held partitions back")
    used.axhline(1.0, color="0.3", linestyle=":", label="limit (the whole window's quota)")
    used.set_ylim(0, max([1.1, *[max(p.window_used.values(), default=0) * 1.05 for p in points]]))
    used.set_ylabel("quota use")
    _legend_outside(used)

    known = [(t, p) for t, p in zip(times, points, strict=True) if p.entries_behind is not None]
    lag.plot([t for t, _ in known], [p.entries_behind for _, p in known], color="#55a868", marker=".",
             label="entries behind")
    lag.set_ylabel("entries behind")
    lag.set_xlabel("seconds since the first trigger")
    seconds_axis = lag.twinx()
    timed = [(t, p.seconds_behind) for t, p in known if p.seconds_behind is not None]
    seconds_axis.plot([t for t, _ in timed], [s for _, s in timed], color="#8172b3", linestyle="--", marker=".",
                      label="seconds behind (oldest unread message)")
    seconds_axis.set_ylabel("seconds behind")
    lag.set_ylim(bottom=0)
    seconds_axis.set_ylim(bottom=0)
    handles = lag.get_legend_handles_labels()[0] + seconds_axis.get_legend_handles_labels()[0]
    _legend_outside(lag, handles, x=1.08)  # right of the seconds axis' labels
    lag.set_title(SECONDS_BEHIND_CAPTION, fontsize=8, loc="left", color="0.3")
    for ax in (admitted, used, lag):
        ax.grid(alpha=0.3)
    return fig


SECONDS_BEHIND_CAPTION = ("seconds behind: now minus the publish time of the oldest unread message. While a backlog "
                          "published faster than the quota drains,\nit rises even as entries behind fall: each "
                          "trigger reads less publish time than passes between triggers.")
# The first trigger's gap to the next is the first micro-batch's start-up when it is this many times the usual gap.
STARTUP_GAP_FACTOR = 3.0


def first_batch_startup(times: list[float]) -> float | None:
    """When the second trigger came (seconds since the first), if the first micro-batch took STARTUP_GAP_FACTOR
    times the median gap between later triggers or more (Spark's Python workers and the source's readers
    starting); else None."""
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if len(gaps) < 3:
        return None
    usual = statistics.median(gaps[1:])
    return times[1] if usual > 0 and gaps[0] >= STARTUP_GAP_FACTOR * usual else None


def _legend_outside(ax: Any, handles: list[Any] | None = None, x: float = 1.01) -> None:
    """The panel's legend right of its data, never over it (constrained layout makes room)."""
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(x, 1.0), borderaxespad=0.0, fontsize=8)


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(f"pulsar_throttled_source.plots needs matplotlib: {EXTRA_HINT}") from e
    return Figure
