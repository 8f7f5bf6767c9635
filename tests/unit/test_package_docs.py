"""Each package's __init__ docstring names every module and subpackage in it (the code layout a newcomer reads
first: docs/DEVELOPMENT.md says each folder's __init__ says what its modules do)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pulsar_throttled_source

ROOT = Path(pulsar_throttled_source.__file__).parent
PACKAGES = sorted(p.parent for p in ROOT.rglob("__init__.py") if "__pycache__" not in p.parts)


def members(package: Path) -> list[str]:
    modules = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    subpackages = [p.parent.name for p in package.glob("*/__init__.py")]
    return sorted(modules + subpackages)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_the_package_docstring_names_each_of_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    missing = [name for name in members(package) if not re.search(rf"\b{re.escape(name)}\b", doc)]
    assert not missing, f"{package.relative_to(ROOT.parent)}/__init__.py's docstring does not name {', '.join(missing)}"


def test_it_sees_every_package_and_module():
    assert {p.name for p in PACKAGES} >= {"pulsar_throttled_source", "metadata", "planning", "reading", "throttling"}
    assert "micro_batch_planner" in members(ROOT / "planning") and "planning" in members(ROOT)
