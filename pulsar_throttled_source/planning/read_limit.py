"""Spark's read limit for one micro-batch, as the planner sees it.

PySpark 4.2+ hands latestOffset() a ReadLimit (ReadMaxRows from maxEntriesPerTrigger, or
ReadAllAvailable for Trigger.Once); 4.0 and 4.1 have no such API. The planner works on this small
value instead, so it runs unchanged on every supported Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

UNLIMITED_ROWS = 2**62  # "no cap" as a 4.2 ReadMaxRows, so Trigger.Once's ReadAllAvailable stays distinguishable


@dataclass(frozen=True)
class BatchLimit:
    max_entries: int | None = None  # cap on the batch's entries across partitions; None: no cap
    read_all: bool = False  # Trigger.Once on 4.2+: everything available, quotas charged but not applied


def from_spark_limit(limit: object) -> BatchLimit:
    """Translate a PySpark 4.2+ ReadLimit (by its class name: this module must import on 4.0 too)."""
    kind = type(limit).__name__
    if kind == "ReadAllAvailable":
        return BatchLimit(read_all=True)
    if kind == "ReadMaxRows":
        rows = int(limit.max_rows)  # type: ignore[attr-defined]
        return BatchLimit(max_entries=None if rows >= UNLIMITED_ROWS else rows)
    raise ValueError(f"pulsar-throttled supports the read limits ReadMaxRows and ReadAllAvailable; Spark asked for {kind}")
