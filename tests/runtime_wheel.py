"""The package as users get it: the release artifacts `make dist` builds (built once per test run, shared by
every file and worker that needs them: release_artifacts), and a fresh Python that stands for a Spark runtime's
(it sees the test venv's libraries, PySpark included, but not the repo). Used by test_wheel.py (what the wheel
declares), test_connect.py (a Spark Connect server whose Python has only the installed wheel),
test_release_artifacts.py and test_native_read.py (the native wheels)."""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NATIVE_ARCHES = ("x86_64", "aarch64")


def build_dist(out: Path) -> tuple[Path, Path]:
    """The sdist and the wheel built from it, as `make dist` builds them (python -m build): nothing of
    a checkout's own build/ or egg-info/ can reach the wheel that is not in the sdist."""
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (sdist,) = out.glob("pulsar_throttled_source-*.tar.gz")
    (wheel,) = out.glob("pulsar_throttled_source-*.whl")
    return sdist, wheel


def artifacts_dir() -> Path:
    """Where this run's artifacts are built: one folder per `make test` run (its run id, which every worker
    inherits), so both workers use one build, removed by the run's controller (remove_artifacts); a process
    outside `make test` builds its own and removes it at exit."""
    run = os.environ.get("PULSAR_THROTTLED_RUN_ID")
    folder = Path("/tmp") / f"pulsar-throttled-dist-{run or f'pid{os.getpid()}'}"
    if not folder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        if not run:
            atexit.register(shutil.rmtree, folder, True)
    return folder


def remove_artifacts() -> None:
    """The end of a `make test` run (its controller): this run's build folder goes."""
    run = os.environ.get("PULSAR_THROTTLED_RUN_ID")
    if run:
        shutil.rmtree(Path("/tmp") / f"pulsar-throttled-dist-{run}", ignore_errors=True)


def release_artifacts() -> dict[str, Path | str]:
    """`make dist`'s four files (sdist, pure wheel from it, native manylinux_2_17 x86_64 and aarch64 wheels) and
    native/build_wheels.py's output (auditwheel's verdicts), built once per run under a file lock: the first
    caller builds, any other waits for it and reads the same files."""
    folder = artifacts_dir()
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / "built.json"
        if not done.exists():
            out = folder / "dist"
            shutil.rmtree(out, ignore_errors=True)
            sdist, wheel = build_dist(out)
            built = subprocess.run([sys.executable, str(ROOT / "native" / "build_wheels.py"), "--out", str(out)],
                                   capture_output=True, text=True, timeout=600)
            assert built.returncode == 0, built.stdout + built.stderr  # auditwheel: manylinux_2_17 for each arch
            native = {arch: str(next(out.glob(f"pulsar_throttled_source_native-*-cp310-abi3-manylinux_2_17_{arch}.whl")))
                      for arch in NATIVE_ARCHES}
            done.write_text(json.dumps({"sdist": str(sdist), "wheel": str(wheel), **native, "native_log": built.stdout}))
        recorded = json.loads(done.read_text())
    return {k: (v if k == "native_log" else Path(v)) for k, v in recorded.items()}


def build_wheel() -> Path:
    """The pure wheel of this run's release artifacts."""
    wheel = release_artifacts()["wheel"]
    assert isinstance(wheel, Path)
    return wheel


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
