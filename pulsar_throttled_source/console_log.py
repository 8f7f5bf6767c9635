"""Where the planner's INFO lines go: the driver console unless the application says otherwise.

Planning runs in Spark's Python streaming-source process on the driver, where nobody configures
Python logging, so records on the `pulsar_throttled_source` logger would vanish. The reader calls
`enable_console_log()` when it starts planning (never at import, as a library should): it adds one
handler that prints to stderr (Spark forwards it to the driver console or log) only while the root
logger has no handlers; an application that configures logging gets the records by propagation.
Opt out with `PULSAR_THROTTLED_LOG_LEVEL=WARNING` (or any level) in the driver's environment.
"""

from __future__ import annotations

import logging
import os

LOGGER_NAME = "pulsar_throttled_source"
LEVEL_ENV = "PULSAR_THROTTLED_LOG_LEVEL"


class _StderrUnlessConfigured(logging.StreamHandler):
    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


def enable_console_log() -> None:
    """Idempotent; leaves a level that the application set on our logger alone."""
    log = logging.getLogger(LOGGER_NAME)
    if any(isinstance(h, _StderrUnlessConfigured) for h in log.handlers):
        return
    handler = _StderrUnlessConfigured()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    if log.level == logging.NOTSET:  # the runner inherits the driver's environment
        level = logging.getLevelName(os.environ.get(LEVEL_ENV, "INFO").upper())
        log.setLevel(level if isinstance(level, int) else logging.INFO)
