"""The native read path's shared library (built from native/src/*.c).

Not imported as an extension module: pulsar-throttled-source loads the file with ctypes."""

from __future__ import annotations

from pathlib import Path


def library_path() -> Path | None:
    """The built library in this package, None when this install has none."""
    found = sorted(Path(__file__).resolve().parent.glob("_pulsar_arrow_reader*.so"))
    return found[0] if found else None
