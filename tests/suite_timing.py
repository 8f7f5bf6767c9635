"""Where the suite's time goes, and the order that follows from it (hooks imported by tests/conftest.py).

`make test`'s xdist workers take whole files in collection order (--no-loadscope-reorder: xdist's default order,
by number of tests, put the long single-test files last), so a long file collected last would end the run on one
worker while the other sits idle. The order is the longest first, from the seconds each file took in the last
whole-suite run, recorded in FILE_SECONDS_PATH by that run itself (no hand-kept list). A file not yet recorded
(a new one) is ranked at the median of the recorded ones.

Every run of several files ends with the seconds per file, how long each xdist worker sat idle at the end, and
how many tests were rerun because Spark's Python runner missed its fixed time to connect back (make test's one
rerun rule): a rerun hides a slow start, so the count is shown, not just absorbed.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

FILE_SECONDS_PATH = Path(__file__).parent / "file_seconds.json"
# A run on xdist workers (make test's) of at least this many files is a whole-suite run: its per-file seconds
# replace the recorded ones (a run of a file or two, `make unit`, or one narrowed with -k or -m would not).
WHOLE_SUITE_FILES = 30

_FILE_SECONDS: dict[str, float] = {}
_WORKER_LAST: dict[str, float] = {}
_RERUNS: list[str] = []


def recorded_seconds(path: Path = FILE_SECONDS_PATH) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


def longest_first(names: list[str], seconds: dict[str, float]) -> list[str]:
    """The file names, longest recorded first; an unrecorded one at the median (stable among equals)."""
    default = statistics.median(seconds.values()) if seconds else 0.0
    return sorted(names, key=lambda name: -seconds.get(name, default))


def merged_record(recorded: dict[str, float], measured: dict[str, float], present: set[str]) -> dict[str, float]:
    """The record after a whole-suite run: this run's seconds per file, over the recorded ones of files still there
    (a file removed, or merged into another, drops out)."""
    record = {name: seconds for name, seconds in recorded.items() if name in present}
    return record | {Path(path).name: round(seconds, 1) for path, seconds in measured.items()}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = longest_first(list(dict.fromkeys(item.path.name for item in items)), recorded_seconds())
    rank = {name: i for i, name in enumerate(order)}
    items.sort(key=lambda item: rank[item.path.name])  # stable: each file keeps its own order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration
    if report.outcome == "rerun":
        _RERUNS.append(report.nodeid)
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", None)
    if worker is not None:
        _WORKER_LAST[worker] = time.time()


def _narrowed(config: pytest.Config) -> bool:
    return bool(config.getoption("keyword", "") or config.getoption("markexpr", "") or config.getoption("lf", False))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if (hasattr(config, "workerinput") or not config.getoption("numprocesses", None)
            or len(_FILE_SECONDS) < WHOLE_SUITE_FILES or _narrowed(config)):
        return  # a worker (the controller records), or not a whole-suite run on workers (make test's)
    present = {p.name for p in FILE_SECONDS_PATH.parent.rglob("test_*.py")}
    record = merged_record(recorded_seconds(), _FILE_SECONDS, present)
    FILE_SECONDS_PATH.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if len(_FILE_SECONDS) < 5:
        return  # a run of a file or two: its own timing says enough
    slowest = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:20]
    terminalreporter.write_sep("-", "seconds per test file (the slowest 20)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
    if len(_WORKER_LAST) > 1:
        end = max(_WORKER_LAST.values())
        idle = ", ".join(f"{w} {end - t:.0f} s" for w, t in sorted(_WORKER_LAST.items()))
        terminalreporter.write_line(f"workers idle at the end: {idle}")
    terminalreporter.write_line(f"connect-back reruns: {len(_RERUNS)}" + (f" ({', '.join(_RERUNS)})" if _RERUNS else ""))
