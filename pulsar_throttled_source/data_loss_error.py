"""Errors more than one layer raises: ``DataLossError`` (planned entries that are gone), raised by the planner and by
read tasks alike."""

from __future__ import annotations


class DataLossError(RuntimeError):
    """Planned entries are gone (retention, a deleted topic) and failOnDataLoss is true."""
