"""The two read paths' group readers make the same groups of the same deliveries: python_read.PythonEntrySource
over the unit fakes, and the native library's par_read_group (built here from native/src with gcc, plainly
and under AddressSanitizer) over a stand-in libpulsar that replays the same script
(tests/native_fake/fake_libpulsar.c; read_path_scripts.py has the scripts). And the one read loop
delivers the same rows in the same batches over either."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import read_path_scripts as scripts
from native_path import needs_native_path

pytestmark = needs_native_path  # skips only where no C compiler could build the library (tests/native_path.py)

ROOT = Path(__file__).resolve().parents[2]
FAKE_SOURCE = ROOT / "tests" / "native_fake" / "fake_libpulsar.c"
GCC = ["gcc", "-shared", "-fPIC", "-g", "-O1", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror"]
BUDGET = [f"-DPAR_BATCH_VALUE_BYTES={scripts.VALUE_BUDGET}", f"-DPAR_BATCH_HEADROOM={scripts.OVERFLOW_HEADROOM}"]


def build(folder: Path, asan: bool) -> tuple[Path, Path]:
    """The library from native/src and the stand-in libpulsar, both under AddressSanitizer when `asan`."""
    flags = ["-fsanitize=address", "-fno-omit-frame-pointer"] if asan else []
    library, fake = folder / "pulsar_arrow_reader.so", folder / "libpulsar_fake.so"
    sources = sorted(str(p) for p in (ROOT / "native" / "src").glob("*.c"))
    subprocess.run([*GCC, *flags, *BUDGET, "-o", str(library), *sources, "-ldl"], check=True)
    subprocess.run([*GCC, *flags, "-o", str(fake), str(FAKE_SOURCE)], check=True)
    return library, fake


def run_native(library: Path, fake: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(Path(scripts.__file__)), str(library), str(fake)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env}, cwd=Path(scripts.__file__).parent)
    assert "AddressSanitizer" not in done.stderr, done.stderr[-4000:]
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.split("results ", 1)[1]))


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The native path's results over every script, from a plain build."""
    return run_native(*build(tmp_path_factory.mktemp("native"), asan=False), {})


@pytest.mark.parametrize("name", list(scripts.GROUP_CASES))
def test_both_paths_make_the_same_groups(native, name):
    assert native["groups"][name] == scripts.python_groups(name)


@pytest.mark.parametrize("name", [n for n in scripts.LOOP_CASES if n != "past the value budget"])
def test_the_loop_delivers_the_same_batches_over_both_paths(native, name):
    assert native["loops"][name] == scripts.python_loop(name)


def test_the_native_batch_is_exported_before_its_values_pass_their_budget(native):
    # Arrow's 32-bit offsets, scaled down: a batch takes three of these payloads. A call whose first message would
    # take the values past the budget appends nothing (STATUS_FULL: the loop exports the batch); a message that
    # would, inside an entry, ends the group there (the entry continues in the next batch).
    big = scripts.BIG
    groups = native["groups"]["past the value budget"]["groups"]
    assert [(g["status"], g.get("rows_before"), g.get("rows"), g.get("new_entry"), g.get("entry_complete")) for g in groups] == [
        (0, 0, 3, 1, 1), (2, None, None, None, None), (0, 0, 3, 1, 0), (2, None, None, None, None), (0, 0, 1, 0, 1)]
    assert [len(batch) for batch in native["groups"]["past the value budget"]["rows"]] == [3, 3, 1]
    delivered = native["loops"]["past the value budget"]
    assert sum(delivered, []) == sum(scripts.python_loop("past the value budget"), [])
    assert all(len(batch) * big <= scripts.VALUE_BUDGET for batch in delivered)


def test_the_native_library_leaks_nothing_of_its_libpulsar(native):
    assert native["leaked"] == 0


def test_the_group_mirror_is_checked_field_by_field_at_load(native):
    assert native["layout"] == ""
    # Two int32 fields swapped keep the structure's size: a size check alone would have read them crossed.
    assert native["drifted"].startswith("par_group_t is [('status', 0, 4), ('result', 4, 4)") and "('result', 0, 4)" in native["drifted"]


def test_the_native_path_reads_every_script_the_same_under_address_sanitizer(native, tmp_path):
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not asan or not Path(asan).exists():
        pytest.fail("gcc has no libasan.so (Debian: libasan8 comes with gcc)")
    library, fake = build(tmp_path, asan=True)
    # Python allocates for the process's life: leaks are not what this checks (fake_live counts the library's).
    checked = run_native(library, fake, {"LD_PRELOAD": asan, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:halt_on_error=1"})
    assert checked == native
