"""The plots helper (pulsar_throttled_source/plots.py, issue 39) on real progress events of a throttled query:
progress_fixtures/ holds query.recentProgress (each event's .json) of the same query, 30 entries on 2 partitions,
topic quota 5 and subscription quota 8 per partition, read on PySpark 4.3.0 (the report in latestOffset) and 4.0.5
(in endOffset["progress"]). The tests read back the numbers the figure draws."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pulsar_throttled_source.plots import EXTRA_HINT, admitted_per_window, first_batch_startup, plot_progress, progress_points

FIXTURES = Path(__file__).parent / "progress_fixtures"


def events(version: str) -> list[dict]:
    return json.loads((FIXTURES / f"pyspark-{version}.json").read_text())


class Progress:
    """Stands in for PySpark's StreamingQueryProgress: what plots reads of it is its JSON."""

    def __init__(self, data: dict) -> None:
        self.json = json.dumps(data)


class Query:
    def __init__(self, progress: list) -> None:
        self.recentProgress = progress


def test_points_of_the_4_3_shape_come_from_latest_offset():
    points = progress_points(events("4.3.0"))
    assert [p.batch_id for p in points] == [0, 1, 2, 3]
    assert [p.rows for p in points] == [10, 10, 10, 0]  # the last: an idle trigger, no batch
    assert [p.entries_behind for p in points] == [20, 10, 0, 0]
    assert [p.messages_behind for p in points] == [20, 10, 0, 0]
    assert [p.seconds_behind for p in points] == [43.196, 66.878, 0.0, 0.0]
    assert [p.held_by for p in points] == ["topic", "topic", None, None]
    assert points[0].window_used == {"topic": 1.0, "subscription": 0.625}
    assert points[3].window_used == {}  # nothing planned: no level took part
    assert points[1].time - points[0].time == pytest.approx(24.759)  # 10:52:51.607Z -> 10:53:16.366Z


def test_points_of_the_4_0_shape_come_from_the_end_offset_not_the_start():
    points = progress_points(events("4.0.5"))
    assert [p.rows for p in points] == [10, 10, 10, 0]
    # The start offset carries the previous batch's report (20 behind, 147.315 s): the end offset's is read.
    assert [p.entries_behind for p in points] == [20, 10, 0, 0]
    assert [p.seconds_behind for p in points] == [147.315, 175.013, 0.0, 0.0]
    assert [p.held_by for p in points] == ["topic", "topic", None, None]
    assert points[3].window_used == {"topic": 1.0, "subscription": 0.625}  # 4.0/4.1: an idle event keeps the last plan


def test_every_form_of_recent_progress_gives_the_same_points():
    raw = events("4.0.5")
    expected = progress_points(raw)
    assert progress_points([json.dumps(e) for e in raw]) == expected
    assert progress_points([Progress(e) for e in raw]) == expected
    assert progress_points(Query([Progress(e) for e in reversed(raw)])) == expected  # oldest first
    with pytest.raises(TypeError, match="several progress events"):
        progress_points(raw[0])
    assert progress_points(raw, source=1) == []  # the query has one source


def test_an_event_without_a_report_or_publish_time_plots_no_lag_for_it():
    first, second = events("4.3.0")[:2]
    first = {**first, "sources": [{**first["sources"][0], "latestOffset": None}]}  # e.g. another source's
    second["sources"][0]["latestOffset"]["secondsBehindLatest"] = None  # publish time not known yet
    points = progress_points([first, second])
    assert [(p.rows, p.entries_behind, p.seconds_behind) for p in points] == [(10, None, None), (10, 10, None)]
    fig = plot_progress([first, second])
    assert line(fig, "entries behind")[1] == [10]
    assert line(fig, "seconds behind (oldest unread message)")[1] == []


def line(fig, label: str):
    found = [l for ax in fig.axes for l in ax.get_lines() if l.get_label() == label]
    assert len(found) == 1, [l.get_label() for ax in fig.axes for l in ax.get_lines()]
    return [float(x) for x in found[0].get_xdata()], [float(y) for y in found[0].get_ydata()]


@pytest.mark.parametrize("version", ["4.3.0", "4.0.5"])
def test_the_figure_draws_admitted_rows_against_the_quotas_quota_use_and_lag(version):
    raw = events(version)
    points = progress_points(raw)
    t = [p.time - points[0].time for p in points]
    fig = plot_progress(raw, quotas={"topic quota": 10, "subscription quota": 16})
    admitted, used, lag, seconds = fig.axes

    bars = admitted.patches
    assert [b.get_height() for b in bars] == [10, 10, 10, 0]
    assert [b.get_x() + b.get_width() / 2 for b in bars] == pytest.approx(t)
    assert line(fig, "topic quota: 10")[1] == [10, 10]  # a horizontal line at the limit
    assert line(fig, "subscription quota: 16")[1] == [16, 16]

    levels = 3 if version == "4.3.0" else 4  # 4.3's idle event lists no level
    assert line(fig, "topic: share of window used")[1] == [1.0] * levels
    assert line(fig, "subscription: share of window used")[1] == [0.625] * levels
    held = [c for c in used.collections if c.get_label() == "topic held partitions back"]
    assert [float(v) for xy in held[0].get_offsets() for v in xy] == pytest.approx([t[0], 1.0, t[1], 1.0])
    assert not [c for c in used.collections if c.get_label() == "subscription held partitions back"]
    assert line(fig, "limit (the whole window's quota)")[1] == [1.0, 1.0]

    xs, ys = line(fig, "entries behind")
    assert (xs, ys) == (pytest.approx(t), [20, 10, 0, 0])
    assert line(fig, "seconds behind (oldest unread message)")[1] == [p.seconds_behind for p in points]
    assert seconds.get_ylabel() == "seconds behind" and lag.get_ylabel() == "entries behind"
    assert admitted.get_title() == "Throttled source 0: 30 rows in 3 micro-batches"


def test_legends_sit_right_of_the_data_and_the_lag_panel_says_what_seconds_behind_measures():
    fig = plot_progress(events("4.3.0"), quotas={"topic quota": 10})
    admitted, used, lag, _ = fig.axes
    for ax in (admitted, used, lag):
        legend = ax.get_legend()
        assert legend is not None and legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted()).x0 > 1.0
    assert lag.get_title(loc="left").startswith("seconds behind: now minus the publish time of the oldest unread message")


def test_a_first_micro_batch_much_longer_than_the_next_is_marked_as_start_up():
    # The 4.3.0 fixture's triggers: the second comes 25 s after the first (Spark's first query starting), the
    # later ones about 1 and 11 s apart (median 6 s).
    raw = events("4.3.0")
    t = [p.time - progress_points(raw)[0].time for p in progress_points(raw)]
    assert first_batch_startup(t) == pytest.approx(t[1])
    spans = [c for c in plot_progress(raw).axes[0].collections if c.get_label() == "first micro-batch's start-up"]
    assert len(spans) == 1
    assert first_batch_startup([0.0, 2.0, 3.0, 4.0, 5.0]) is None  # as long as the others: no start-up to show
    assert first_batch_startup([0.0, 30.0, 31.0]) is None  # too few triggers to tell


def test_rows_per_quota_window_sum_the_batches_whose_trigger_started_in_it():
    raw = events("4.3.0")
    points = progress_points(raw)  # triggers at :51.607, 10:53:16.366, :17.315, :28.000
    windows = admitted_per_window(points, 10)
    assert windows[0] == (1795690370.0, 10)
    assert dict(windows)[1795690390.0] == 20  # batches 1 and 2 share a 10 s window
    assert [n for _, n in windows] == [10, 0, 20, 0]
    assert [w for w, _ in windows] == [1795690370.0, 1795690380.0, 1795690390.0, 1795690400.0]
    fig = plot_progress(raw, window=10)
    assert [b.get_height() for b in fig.axes[0].patches] == [10, 0, 20, 0]
    assert fig.axes[0].patches[0].get_x() == pytest.approx(1795690370.0 - points[0].time)  # the window's start
    with pytest.raises(ValueError, match="window must be a positive number of seconds"):
        admitted_per_window(points, 0)


def test_it_draws_headless_to_png():
    fig = plot_progress(events("4.0.5"))
    out = io.BytesIO()
    fig.savefig(out, format="png")
    assert out.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_event_yet_is_a_clear_error():
    with pytest.raises(ValueError, match="no progress event of this source to plot yet"):
        plot_progress([])


def test_without_matplotlib_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"needs matplotlib: pip install 'pulsar-throttled-source\[plots\]'"):
        plot_progress(events("4.3.0"))
    assert "[plots]" in EXTRA_HINT
    assert len(progress_points(events("4.3.0"))) == 4  # the numbers need no matplotlib
