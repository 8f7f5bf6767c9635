"""Build the platform wheels of pulsar-throttled-source-native: manylinux_2_17 x86_64 and aarch64
(the targets of Databricks and EMR), both from this machine, with Zig's C compiler from PyPI
(`ziglang`) as the cross-compiler, then check each with `auditwheel show`.

    python native/build_wheels.py [--out dist] [--arch x86_64 aarch64]

The library links only glibc (and libdl) and includes no Python header, so one abi3 wheel per
platform serves every CPython 3.10+. Prints each wheel's path and auditwheel's verdict; exits 1
when a wheel is not manylinux_2_17 for its architecture.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GLIBC = "2.17"  # manylinux2014: every Databricks and EMR image has a newer glibc


def version() -> str:
    """pulsar-throttled-source's version, which the native distribution is released at (setup.py)."""
    init = HERE.parent / "pulsar_throttled_source" / "__init__.py"
    found = re.search(r'^__version__ = "([^"]+)"$', init.read_text(), re.M)
    if found is None:
        raise SystemExit(f"no __version__ in {init}")
    return found.group(1)


def build(arch: str, out: Path) -> Path:
    """One wheel for `arch`, built from a copy of this folder (no build files left in the tree)."""
    zig = f"{sys.executable} -m ziglang cc -target {arch}-linux-gnu.{GLIBC}"
    with tempfile.TemporaryDirectory(prefix=f"native-{arch}-") as work:
        tree = Path(work) / "native"
        shutil.copytree(HERE, tree, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        env = {**os.environ, "CC": zig, "LDSHARED": f"{zig} -shared", "CFLAGS": "", "LDFLAGS": "",
               "PULSAR_THROTTLED_SOURCE_VERSION": version()}  # setup.py cannot see the checkout from the copy
        before = set(out.glob("*.whl"))
        # setuptools warns at length that setup.py commands are deprecated: shown only when the build fails
        done = subprocess.run([sys.executable, "setup.py", "-q", "bdist_wheel", "--plat-name", f"manylinux_2_17_{arch}",
                               "--py-limited-api", "cp310", "-d", str(out)], cwd=tree, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"building the {arch} wheel failed (exit {done.returncode})")
    (wheel,) = set(out.glob(f"*manylinux_2_17_{arch}*.whl")) - before or set(out.glob(f"*manylinux_2_17_{arch}*.whl"))
    return wheel


def audit(wheel: Path, arch: str) -> tuple[bool, str]:
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    text = " ".join((shown.stdout + shown.stderr).split())
    ok = shown.returncode == 0 and re.search(rf'"manylinux_2_17_{arch}"', text) is not None
    return ok, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("dist"))
    parser.add_argument("--arch", nargs="+", default=["x86_64", "aarch64"], choices=["x86_64", "aarch64"])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    for arch in args.arch:
        for old in args.out.glob(f"*manylinux_2_17_{arch}*.whl"):
            old.unlink()
        wheel = build(arch, args.out.resolve())
        ok, text = audit(wheel, arch)
        failed |= not ok
        print(f"{wheel}\n  auditwheel show: {text}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
