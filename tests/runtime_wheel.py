"""The package as users get it: a wheel built from the checkout, installed into a fresh Python
that stands for a Spark runtime's (it sees the test venv's libraries, PySpark included, but not the
repo). Used by test_wheel.py (what the wheel declares) and test_connect.py (a Spark Connect server
whose Python has only the installed wheel)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_dist(out: Path) -> tuple[Path, Path]:
    """The sdist and the wheel built from it, as `make dist` builds them (python -m build): nothing of
    a checkout's own build/ or egg-info/ can reach the wheel that is not in the sdist."""
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (sdist,) = out.glob("pulsar_throttled_source-*.tar.gz")
    (wheel,) = out.glob("pulsar_throttled_source-*.whl")
    return sdist, wheel


def build_wheel(out: Path) -> Path:
    return build_dist(out)[1]


def runtime_python(home: Path) -> Path:
    """A fresh venv standing for a Spark runtime's Python: it sees the test venv's installed
    libraries (PySpark, pulsar-client, ...) through a path file, but not the repo, whose editable
    install is a .pth there and path files are not followed from a directory a path file adds."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "runtime_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def install_into(python: Path, wheel: Path) -> None:
    """pip resolves the wheel's dependencies against what the runtime has and installs only the
    wheel (nothing from the index)."""
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]


def module_file(python: Path, cwd: Path) -> Path:
    """Where `python`, run from `cwd`, imports the package from."""
    out = subprocess.run([str(python), "-c", "import pulsar_throttled_source; print(pulsar_throttled_source.__file__)"],
                         capture_output=True, text=True, timeout=120, cwd=cwd, check=True)
    return Path(out.stdout.strip())
