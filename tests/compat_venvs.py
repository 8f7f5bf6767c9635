"""Cached virtualenvs with the older PySpark lines the source supports without admission control
(the newest 4.0.x and 4.1.x, as Databricks 17.3 LTS and 18.x LTS run them), for the compat tests.

Each venv holds that PySpark, the package's runtime dependencies, its `plots` extra (the notebook's plot cell)
and `metrics` extra (compat_job.py runs the metrics listener) from pyproject.toml, and ipykernel (the notebook
test runs a kernel in it), never the package itself: the tests put the checkout on PYTHONPATH, so a cached venv
always runs today's code.
Built once per machine (under ~/.cache, like the Pulsar jars); `make test` builds them before the
tests, and the test fixture builds any that is missing. Run directly: python tests/compat_venvs.py
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("4.0.5", "4.1.4")  # the newest of each line on PyPI (2026-11)
CACHE = Path.home() / ".cache" / "pulsar-throttled-source" / "compat"
EXTRA = ["pandas>=2,<3"]  # PySpark's Arrow paths import pandas; 3.x is not supported by these lines
NOTEBOOK = ["ipykernel>=6"]  # test_notebook.py runs the quickstart notebook in a kernel of each venv


def requirements(version: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [f"pyspark=={version}", *project["dependencies"], *extras["plots"], *extras["metrics"], *EXTRA, *NOTEBOOK]


def built_once(cache: Path, kind: str, what: list[str], build: Callable[[Path], None], label: str) -> Path:
    """cache/<kind>-<hash of `what`>, made by `build` once per machine; parallel runs take turns (a lock)
    and a build that did not finish is made again (the .ready marker)."""
    home = cache / f"{kind}-{hashlib.sha256(' '.join(what).encode()).hexdigest()[:10]}"
    ready = home / ".ready"
    if ready.exists():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            shutil.rmtree(home, ignore_errors=True)
            print(f"Building {label} in {home} (once per machine)...", file=sys.stderr, flush=True)
            build(home)
            ready.touch()
    return home


def compat_python(version: str) -> Path:
    """The python of the venv for PySpark `version`, built if missing (safe from parallel runs)."""
    reqs = requirements(version)

    def build(home: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=300)
        subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], check=True, timeout=1800)

    return built_once(CACHE, f"pyspark-{version}", reqs, build, f"a PySpark {version} venv for the compat tests") / "bin" / "python"


if __name__ == "__main__":
    for v in VERSIONS:
        print(compat_python(v))
