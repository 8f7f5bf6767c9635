"""effectivelyOnce's batch cuts are decided twice, and the two must agree row for row: in Python (writing.batch_cuts,
which write_task.send_messages sends by and NativeTask.send_admitted takes its quota permits by) and in the native
library (lane_place and lane_sent in pns_send). Scripted and random sequences (send_cut_scripts.py) run through both:
the library's real pns_send loop over the stand-in libpulsar's batching producers (tests/native_fake/fake_libpulsar.c),
in a child process, as the installed build and under AddressSanitizer. Per row: skipped or sent, flushed after its
send or not, the batch it lands in, the rows held in batches not cut yet after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import send_cut_scripts as scripts
from native_path import needs_native_path, run_under_asan

pytestmark = needs_native_path  # skips only where no C compiler could build the library (tests/native_path.py)

ROOT = Path(__file__).resolve().parents[2]
FAKE_SOURCE = ROOT / "tests" / "native_fake" / "fake_libpulsar.c"
HERE = Path(__file__).resolve().parent
RUN = f"import sys; sys.path.insert(0, {str(HERE)!r}); import send_cut_scripts; send_cut_scripts.main()"


def build_fake(folder: Path) -> Path:
    fake = folder / "libpulsar_fake.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror",
                    "-o", str(fake), str(FAKE_SOURCE)], check=True)
    return fake


def results(stdout: str) -> dict[str, Any]:
    return dict(json.loads(stdout.split("results ", 1)[1]))


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The installed library's decisions over every script."""
    fake = build_fake(tmp_path_factory.mktemp("fake"))
    done = subprocess.run([sys.executable, "-c", RUN, str(fake)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return results(done.stdout)


@pytest.mark.parametrize("name", scripts.ALL_NAMES)
def test_both_senders_skip_cut_and_hold_the_same_rows(native, name):
    expected = scripts.python_decisions(scripts.script(name))
    per_row, calls = native["scripts"][name]["per row"], native["scripts"][name]["calls"]
    assert per_row["rows"] == expected["rows"]  # skipped, flushed after its send, the producer's batch it lands in
    assert per_row["held"] == expected["held"]  # lane_sent's count after each row: the pacing's rows not in flight
    # Split into Arrow batches and pns_send calls as native_write and send_admitted split them: the same decisions.
    assert calls["rows"] == expected["rows"]
    assert per_row["open"] == calls["open"] == calls["task_held"] == expected["open"]  # the open batches' rows at the end


def test_the_scripts_cover_every_decision(native):
    # Each kind of decision occurs (a test that could not see a disagreement would pass on anything).
    decided = [row for name in scripts.ALL_NAMES for row in native["scripts"][name]["per row"]["rows"]]
    assert any(skip for skip, _, _ in decided) and any(not skip for skip, _, _ in decided)
    assert any(flush for _, flush, _ in decided)  # the sender's cut (bytes)
    held = [h for name in scripts.ALL_NAMES for h in native["scripts"][name]["per row"]["held"]]
    assert max(held) > 1 and 0 in held
    # a sent row after skipped ones in the same lane whose L fell inside a batch: it starts a batch of its own
    inside = native["scripts"]["by count, last id inside a batch cut elsewhere"]["per row"]["rows"]
    assert inside == [[True, False, None]] * 6 + [[False, False, 0]] * 4


def test_the_native_side_leaks_nothing_of_its_libpulsar(native):
    assert native["leaked"] == 0


def test_the_native_decisions_hold_under_address_sanitizer(native, tmp_path):
    checked = results(run_under_asan(tmp_path, RUN, [str(build_fake(tmp_path))]))
    assert checked == native
