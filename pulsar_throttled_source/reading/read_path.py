"""Executor side: which read path a task takes (option readPath).

`auto` takes the native path where its library loads, passes its self-check and can apply every
setting of the query, else the Python path, saying why in one WARN per process and reason;
`native` fails with that reason instead; `python` always takes the Python path.
"""

from __future__ import annotations

import logging

from .native_library import native_library
from .native_reader import unsupported_settings
from .task import ClientConfig

log = logging.getLogger(__name__)

_WARNED: set[str] = set()


class NativeReadPathUnavailable(RuntimeError):
    """readPath=native where the native read path cannot run."""


def native_path_problem(cfg: ClientConfig) -> str:
    """Why the native path cannot read with this configuration ('' when it can)."""
    loaded = native_library()
    if not loaded.available:
        return loaded.reason
    unsupported = unsupported_settings(cfg)
    if unsupported:
        return f"the native read path cannot apply {', '.join(unsupported)}"
    return ""


def uses_native_path(cfg: ClientConfig) -> bool:
    if cfg.read_path == "python":
        return False
    problem = native_path_problem(cfg)
    if not problem:
        return True
    if cfg.read_path == "native":
        raise NativeReadPathUnavailable(
            f"Option 'readPath' is 'native' but the native read path is unavailable: {problem}. Install "
            "pulsar-throttled-source-native for this platform, or set readPath to 'auto' or 'python'.")
    if problem not in _WARNED:
        _WARNED.add(problem)
        log.warning("Reading with the Python read path (readPath=auto): %s.", problem)
    return False
