"""Tests that read on the native read path run wherever its library loads, and wherever a C compiler works
(`make install` built the library there, so its absence is a failure). On a machine without a C compiler,
where `make install` printed its NOTICE and skipped the build (tools/native_build.py), they skip saying so."""

from __future__ import annotations

import pytest

from tools.native_build import native_path_skip_reason

SKIP_REASON = native_path_skip_reason()
needs_native_path = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "the native read path is installed")


def read_paths(*paths: str) -> list:
    """For @pytest.mark.parametrize("read_path", ...): the native one marked needs_native_path."""
    return [pytest.param(p, marks=needs_native_path) if p == "native" else p for p in paths]
