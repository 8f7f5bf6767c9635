"""What the source reports to Spark's query progress (`reportLatestOffset`): backlog after each batch."""

from __future__ import annotations

from ..metadata.catalog import CatalogSnapshot
from ..positions import BEFORE_EARLIEST, EntryPosition
from .publish_rates import msgs_per_entry


def backlog_report(snap: CatalogSnapshot, end: dict[str, EntryPosition]) -> dict:
    report = {}
    for partition, layout in snap.layouts.items():
        e = end.get(partition, BEFORE_EARLIEST)
        remaining = layout.backlog_after(e).entries
        per_entry = msgs_per_entry(snap.stats.get(partition), layout)
        report[partition] = {
            "latest": layout.latest.to_json(),
            "backlogEntries": remaining,
            "backlogMessagesEstimate": round(remaining * per_entry) if per_entry else remaining,
        }
    return report
