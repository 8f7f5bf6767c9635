"""The requirements of one of pyproject.toml's extras, one a line: what `make dist` installs into its lean venv
(the release extra) without installing the package itself and its dependencies.

    python -m tools.extra_requirements release
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib: pip's own TOML reader (the venv's pip runs this)
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def requirements(extra: str) -> list[str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    if extra not in extras:
        raise SystemExit(f"pyproject.toml has no extra {extra!r}; it has {', '.join(sorted(extras))}")
    return list(extras[extra])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print("\n".join(requirements(sys.argv[1])))
