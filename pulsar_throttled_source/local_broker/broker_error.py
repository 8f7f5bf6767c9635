"""The one exception the launcher raises for problems a person can fix (missing Java, failed download...)."""

from __future__ import annotations


class BrokerError(RuntimeError):
    """A launcher failure explained for people (no traceback needed)."""
