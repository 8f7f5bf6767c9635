"""For the end-to-end install test of the release artifacts (test_release_artifacts.py): a Python that has only
PySpark, as a Spark runtime's does, into which each test installs `make dist`'s files with pip, offline.

Two things are cached per machine (under ~/.cache, like the compat venvs), keyed by what they hold:
- a venv with only PySpark (the test venv's version, so pip takes it from its cache; and pandas, which PySpark's
  Arrow paths import), never the package: a test makes a fresh venv that sees its libraries through a path file
  (runtime_wheel.runtime_python's way) and installs into that one;
- a wheelhouse: the wheels of the package's runtime dependencies (pyproject.toml) with theirs, so that pip resolves
  `pulsar-throttled-source[native]` from `--find-links dist` and this folder with `--no-index`, in seconds.
`make test` builds both before the tests; the test fixture builds whichever is missing. Run directly:
python tests/release_venv.py
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyspark
import tomllib
from compat_venvs import built_once

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "pulsar-throttled-source" / "release"
RUNTIME = [f"pyspark=={pyspark.__version__}", "pandas>=2,<3"]  # what a Spark runtime's Python brings


def dependencies() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def _cached(kind: str, what: list[str], build: Callable[[Path], None]) -> Path:
    return built_once(CACHE, kind, what, build, "the install test's environment of the release artifacts")


def pyspark_only_venv() -> Path:
    """The site-packages of the cached venv that has only PySpark (and pandas)."""
    def build(home: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=300)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"), "install", "-q", *RUNTIME],
                       check=True, timeout=1800)

    home = _cached("pyspark-only", RUNTIME, build)
    return Path(subprocess.run([str(home / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())


def wheelhouse() -> Path:
    """A folder with the wheels of the package's runtime dependencies and theirs."""
    deps = dependencies()

    def build(home: Path) -> None:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d", str(home), *deps],
                       check=True, timeout=1800)

    return _cached("wheelhouse", deps, build)


def fresh_runtime(home: Path) -> Path:
    """A new venv that has only what the cached PySpark venv has (through a path file); returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "runtime_pyspark.pth").write_text(f"{pyspark_only_venv()}\n")
    return python


if __name__ == "__main__":
    print(pyspark_only_venv())
    print(wheelhouse())
