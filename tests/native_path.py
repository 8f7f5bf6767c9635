"""Tests that read on the native read path run wherever its library loads, and wherever a C compiler works
(`make install` built the library there, so its absence is a failure). On a machine without a C compiler,
where `make install` printed its NOTICE and skipped the build (tools/native_build.py), they skip saying so.

run_under_asan: a script run against a build of the library with AddressSanitizer (the reader's and the sender's
tests), its results printed as tagged JSON lines (json_lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pulsar_throttled_source.reading.native_library import LIBRARY_ENV
from tools.native_build import native_path_skip_reason

SOURCES = Path(__file__).resolve().parents[1] / "native" / "src"

SKIP_REASON = native_path_skip_reason()
needs_native_path = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "the native read path is installed")


def read_paths(*paths: str) -> list:
    """For @pytest.mark.parametrize("read_path", ...): the native one marked needs_native_path."""
    return [pytest.param(p, marks=needs_native_path) if p == "native" else p for p in paths]


def run_under_asan(tmp_path: Path, script: str, args: Sequence[str] = (), stdin: str | None = None) -> str:
    """`script` run by this Python with the library built from native/src with -fsanitize=address (loaded through
    LIBRARY_ENV) and libasan preloaded; fails on an AddressSanitizer report or a failed exit. Its stdout."""
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not asan or not Path(asan).exists():
        pytest.fail("gcc has no libasan.so (Debian: libasan8 comes with gcc)")
    library = tmp_path / "pulsar_arrow_reader_asan.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-fsanitize=address",
                    "-fno-omit-frame-pointer", "-o", str(library), *sorted(map(str, SOURCES.glob("*.c"))), "-ldl", "-lpthread"],
                   check=True)
    env = {**os.environ, "LD_PRELOAD": asan, LIBRARY_ENV: str(library),
           # Python and the JVM-free client allocate for the process's life: leaks are not what this checks.
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:halt_on_error=1"}
    done = subprocess.run([sys.executable, "-c", script, *args], input=stdin, env=env, capture_output=True, text=True,
                          timeout=600)
    assert "AddressSanitizer" not in done.stderr, done.stderr[-4000:]
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def json_lines(stdout: str, tag: str) -> list[Any]:
    """The JSON values a script printed as `<tag> <json>` lines, in order."""
    return [json.loads(line[len(tag) + 1:]) for line in stdout.splitlines() if line.startswith(f"{tag} ")]
