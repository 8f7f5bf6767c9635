"""`make install`'s native step: build the native read path (native/, pulsar-throttled-source-native) from the
checkout with the C compiler setuptools would use and install it into this Python; where no C compiler works,
print one notice and succeed, so that `make demo` and `make test` run on the Python path.

    python -m tools.native_build        # `make install` and `make native` run it with the venv's Python

The compiler is the one setuptools takes: $CC, else the CC this Python was built with (sysconfig). It is tried
on a one-line C file first; only when that fails is the build skipped. With a working compiler a failing build
still fails `make install`. The tests that need the native path ask `native_path_skip_reason()`: they skip only
where the library is absent *and* no compiler works, never on a machine that should have built it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def c_compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def c_compiler_problem() -> str:
    """Why no C compiler works here ('' when one compiles a C file)."""
    cc = c_compiler()
    with tempfile.TemporaryDirectory(prefix="cc-probe-") as work:
        source = Path(work, "probe.c")
        source.write_text("int probe(void) { return 0; }\n")
        try:
            done = subprocess.run([*cc, "-c", str(source), "-o", str(Path(work, "probe.o"))],
                                  capture_output=True, text=True, timeout=120)
        except OSError as e:  # not on PATH, not executable
            return f"the C compiler `{' '.join(cc)}` cannot be run ({e.strerror})"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"the C compiler `{' '.join(cc)}` failed on a one-line C file (exit {done.returncode}{': ' + said[0] if said else ''})"
    return ""


def native_path_skip_reason() -> str:
    """For tests that read on the native path: why they skip here ('' when they run). They run wherever the
    library loads, and wherever a C compiler works (where `make install` built it, so its absence is a failure)."""
    from pulsar_throttled_source.reading.native_library import native_library

    loaded = native_library()
    if loaded.available:
        return ""
    problem = c_compiler_problem()
    if not problem:
        return ""
    return f"the native read path is not installed ({loaded.reason}): no C compiler to build it, {problem}"


def notice(problem: str) -> str:
    return (f"NOTICE: the native read path (pulsar-throttled-source-native) is not built: {problem}. Queries, `make demo` "
            "and `make test` read on the Python path (the same rows; tests of the native path are skipped). To add it, "
            "install gcc and run `make native`.")


def main() -> int:
    problem = c_compiler_problem()
    if problem:
        print(notice(problem), file=sys.stderr, flush=True)
        return 0
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", str(ROOT / "native")])
    return built.returncode


if __name__ == "__main__":
    sys.exit(main())
