"""The suite orders itself from its own record: the longest files first, a new file at the median."""

from __future__ import annotations

import json
from pathlib import Path

from suite_timing import longest_first, merged_record, recorded_seconds


def test_the_longest_recorded_files_come_first_and_a_new_one_at_the_median() -> None:
    seconds = {"a.py": 10.0, "b.py": 200.0, "c.py": 50.0}
    assert longest_first(["a.py", "new.py", "b.py", "c.py"], seconds) == ["b.py", "new.py", "c.py", "a.py"]


def test_with_no_record_the_collection_order_stays() -> None:
    assert longest_first(["z.py", "a.py"], {}) == ["z.py", "a.py"]


def test_the_record_is_read_back_and_a_broken_one_counts_as_none(tmp_path: Path) -> None:
    path = tmp_path / "file_seconds.json"
    path.write_text(json.dumps({"x.py": 3}))
    assert recorded_seconds(path) == {"x.py": 3.0}
    path.write_text("{not json")
    assert recorded_seconds(path) == {}
    assert recorded_seconds(tmp_path / "missing.json") == {}


def test_every_test_file_has_a_basename_of_its_own() -> None:
    """pytest imports test files by basename (no packages under tests/): a unit and an integration file of one name
    make the second fail to collect ("import file mismatch"), in a clean clone only."""
    tests = Path(__file__).resolve().parents[1]
    names: dict[str, list[str]] = {}
    for path in tests.rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(tests)))
    assert not {n: p for n, p in names.items() if len(p) > 1}


def test_a_whole_suite_run_replaces_the_seconds_it_measured_and_drops_files_no_longer_there() -> None:
    recorded = {"test_a.py": 10.0, "test_b.py": 20.0, "test_merged_away.py": 90.0}
    measured = {"tests/integration/test_a.py": 12.34, "tests/unit/test_new.py": 1.0}
    assert merged_record(recorded, measured, {"test_a.py", "test_b.py", "test_new.py"}) == \
        {"test_a.py": 12.3, "test_b.py": 20.0, "test_new.py": 1.0}
