"""Issue 15: the package as users get it, a wheel installed into a Python that already has its
Spark runtime. pip must not touch the runtime's PySpark; the installed package is what that Python
imports from any directory. (A query through the installed wheel, with no register call, runs in
test_connect.py: its Spark Connect server's Python has only the wheel.)"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from runtime_wheel import build_wheel, install_into, module_file, runtime_python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel()


def test_wheel_leaves_the_runtime_pyspark_alone(wheel):
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [line for line in z.read(name).decode().splitlines() if line.startswith("Requires-Dist:")]
        names = z.namelist()
    pyspark = [line for line in requires if "pyspark" in line.lower()]
    unconditional = [line for line in pyspark if "extra ==" not in line]
    assert not unconditional, f"installing the wheel would install or replace PySpark: {unconditional}"
    assert any(line.endswith('extra == "spark"') for line in pyspark), requires
    # Spark finds auto-registered Python data sources by a top-level module named pyspark_*.
    assert "pyspark_pulsar_throttled.py" in names and "pulsar_throttled_source/py.typed" in names, names


def test_installed_wheel_is_what_the_runtime_imports(wheel, tmp_path):
    python = runtime_python(tmp_path / "runtime")
    elsewhere = tmp_path / "elsewhere"  # nothing of the repo on the path
    elsewhere.mkdir()
    install_into(python, wheel)
    assert module_file(python, elsewhere).is_relative_to(tmp_path / "runtime")
