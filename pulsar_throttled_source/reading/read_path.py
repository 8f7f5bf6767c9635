"""Executor side: what a read path is (`ReadPath`), and which one a task takes (option readPath).

A read path opens a reader on a range as the read loop's source (range_reader.EntrySource: read a
group, truncate, drop, export), and closes it when the range is read: python_read.PYTHON_PATH over
pulsar-client, native_read.NATIVE_PATH over the native library. read.py runs either the same way.

`auto` takes the native path where its library loads, passes its self-check and can apply every
setting of the query, else the Python path, saying why in one WARN per process and reason;
`native` fails with that reason instead; `python` always takes the Python path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..read_task import ClientConfig, PartitionRange
from .native_library import native_library
from .native_read import NATIVE_PATH
from .native_reader import Settings, unsupported_settings
from .python_read import PYTHON_PATH

if TYPE_CHECKING:
    from .range_reader import EntrySource

Source = TypeVar("Source", bound="EntrySource")

log = logging.getLogger(__name__)

_WARNED: set[str] = set()


class NativeReadPathUnavailable(RuntimeError):
    """readPath=native where the native read path cannot run."""


def native_path_problem(client_kwargs: Settings, reader_kwargs: Settings) -> str:
    """Why the native path cannot read with these settings ('' when it can)."""
    loaded = native_library()
    if not loaded.available:
        return loaded.reason
    unsupported = unsupported_settings(loaded, client_kwargs, reader_kwargs)
    if unsupported:
        return f"the native read path cannot apply {', '.join(unsupported)}"
    return ""


def read_path_name(read_path: str, client_kwargs: Settings, reader_kwargs: Settings) -> str:
    """"native" or "python": the path read tasks take in this process's environment (the query progress
    reports it as the driver sees it; an executor without the native library reads with Python)."""
    return "python" if read_path == "python" or native_path_problem(client_kwargs, reader_kwargs) else "native"


def describe_read_path(read_path: str, client_kwargs: Settings, reader_kwargs: Settings) -> str:
    """Which path read tasks in this process's environment take, for the planner's log line; raises
    NativeReadPathUnavailable for readPath=native without it (so a query fails at load, not in a task)."""
    if read_path == "python":
        return "the Python read path (readPath=python)"
    problem = native_path_problem(client_kwargs, reader_kwargs)
    if not problem:
        return f"the native read path (readPath={read_path})"
    if read_path == "native":
        raise _unavailable(problem)
    return f"the Python read path (readPath=auto): {problem}"


def _unavailable(problem: str) -> NativeReadPathUnavailable:
    return NativeReadPathUnavailable(
        f"Option 'readPath' is 'native' but the native read path is unavailable: {problem}. Install "
        "pulsar-throttled-source-native for this platform, or set readPath to 'auto' or 'python'.")


def uses_native_path(cfg: ClientConfig) -> bool:
    if cfg.read_path == "python":
        return False
    problem = native_path_problem(cfg.client_kwargs, cfg.reader_kwargs)
    if not problem:
        return True
    if cfg.read_path == "native":
        raise _unavailable(problem)
    if problem not in _WARNED:
        _WARNED.add(problem)
        log.warning("Reading with the Python read path (readPath=auto): %s.", problem)
    return False


class ReadPath(Protocol[Source]):
    """A way to read a range: its reader, opened at the range's start, as the read loop's source."""

    def open(self, part: PartitionRange, gone: Callable[[], bool] | None) -> Source:
        """A reader on the range's partition at its start (retried while the broker is unreachable, for up to
        pollTimeoutMs; raises errors.PartitionDeleted when `gone` says the range's entries were deleted)."""

    def close(self, source: Source, part: PartitionRange, failed: bool) -> None:
        """Done with the range: close the reader (or keep it for the next range where it ended exactly there);
        after a failed read, also drop the client, so a retry starts from a fresh one."""


def read_path_for(cfg: ClientConfig) -> ReadPath[Any]:
    """The read path a task with this configuration takes in this process (uses_native_path)."""
    return NATIVE_PATH if uses_native_path(cfg) else PYTHON_PATH
