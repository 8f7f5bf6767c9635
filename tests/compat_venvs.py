"""Cached virtualenvs with the older PySpark lines the source supports without admission control
(the newest 4.0.x and 4.1.x, as Databricks 17.3 LTS and 18.x LTS run them), for the compat tests.

Each venv holds that PySpark and the package's runtime dependencies from pyproject.toml, never the
package itself: the tests put the checkout on PYTHONPATH, so a cached venv always runs today's code.
Built once per machine (under ~/.cache, like the Pulsar jars); `make test` builds them before the
tests, and the test fixture builds any that is missing. Run directly: python tests/compat_venvs.py
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("4.0.5", "4.1.4")  # the newest of each line on PyPI (2026-11)
CACHE = Path.home() / ".cache" / "pulsar-throttled-source" / "compat"
EXTRA = ["pandas>=2,<3"]  # PySpark's Arrow paths import pandas; 3.x is not supported by these lines


def requirements(version: str) -> list[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [f"pyspark=={version}", *deps, *EXTRA]


def compat_python(version: str) -> Path:
    """The python of the venv for PySpark `version`, built if missing (safe from parallel runs)."""
    reqs = requirements(version)
    home = CACHE / f"pyspark-{version}-{hashlib.sha256(' '.join(reqs).encode()).hexdigest()[:10]}"
    python = home / "bin" / "python"
    ready = home / ".ready"
    if ready.exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            shutil.rmtree(home, ignore_errors=True)
            print(f"Building a PySpark {version} venv for the compat tests in {home} (once per machine)...",
                  file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=300)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *reqs], check=True, timeout=1800)
            ready.touch()
    return python


if __name__ == "__main__":
    for v in VERSIONS:
        print(compat_python(v))
