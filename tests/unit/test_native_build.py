"""Issue 42: `make install`'s native step (tools/native_build.py) on a machine without a C compiler prints one
NOTICE and succeeds, so `make demo` and `make test` run on the Python path; the native-path tests skip there
only, never where a compiler works (tests/native_path.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pulsar_throttled_source.reading import native_library
from pulsar_throttled_source.reading.native_library import NativeLibrary
from tools import native_build
from tools.native_build import ROOT


def install_step(**env: str) -> subprocess.CompletedProcess[str]:
    """What `make install` runs, with this environment (it returns before pip when no compiler works)."""
    return subprocess.run([sys.executable, "-m", "tools.native_build"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in {**os.environ, **env}.items() if v != "<unset>"})


@pytest.mark.parametrize(("env", "named"), [({"CC": "/bin/false"}, "`/bin/false` failed on a one-line C file (exit 1)"),
                                            ({"CC": "<unset>", "PATH": "/nonexistent"}, "cannot be run")])
def test_without_a_c_compiler_the_install_step_says_so_once_and_succeeds(env, named):
    done = install_step(**env)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()  # one notice, nothing from pip
    assert line.startswith("NOTICE: the native read path (pulsar-throttled-source-native) is not built: the C compiler "), line
    assert named in line and "read on the Python path" in line and "install gcc and run `make native`" in line, line
    assert done.stdout == ""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this machine")
def test_gcc_compiles_the_probe():
    assert native_build.c_compiler_problem() == ""


def test_native_path_tests_skip_only_where_no_compiler_could_build_the_library(monkeypatch):
    absent = NativeLibrary(None, "the package pulsar-throttled-source-native is not installed")
    monkeypatch.setattr(native_library, "native_library", lambda: absent)
    monkeypatch.setenv("CC", "/bin/false")
    reason = native_build.native_path_skip_reason()
    assert reason == ("the native read path is not installed (the package pulsar-throttled-source-native is not installed): "
                      "no C compiler to build it, the C compiler `/bin/false` failed on a one-line C file (exit 1)")
    monkeypatch.setattr(native_build, "c_compiler_problem", lambda: "")  # a compiler works: the tests run (and fail)
    assert native_build.native_path_skip_reason() == ""
    monkeypatch.setattr(native_library, "native_library", lambda: NativeLibrary(object(), ""))  # type: ignore[arg-type]
    monkeypatch.setattr(native_build, "c_compiler_problem", lambda: "none")
    assert native_build.native_path_skip_reason() == ""  # the library loads (e.g. its wheel): they run
