"""Read the source's report (lag, time lag, throttle state: planning/progress.py) out of a query's progress,
on every supported Spark line:

    from pulsar_throttled_source.query_progress import source_report
    report = source_report(query.lastProgress)        # or a listener's event.progress, or progress JSON
    report["secondsBehindLatest"], report["throttle"]["heldBy"]

PySpark 4.2+ show it as the source's `latestOffset` (reportLatestOffset), 4.0 and 4.1 inside its
`endOffset` (and `latestOffset`, which there is the same offset) under "progress". Where a progress
event is read also differs: on 4.0 `progress["sources"][0]["endOffset"]` is the offset's Python repr,
not JSON, so the report is read from the event's JSON (`progress.json`). Needs no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

REPORT_KEY = "entriesBehindLatest"  # a report has it first
IN_OFFSET = "progress"  # where 4.0/4.1 carry it (offsets.py)


def source_report(progress: Any, source: int = 0) -> dict[str, Any] | None:
    """The report of the query's `source`-th source (None: that source is not this one, or reported
    nothing yet). `progress`: a StreamingQueryProgress, its JSON, or that JSON parsed."""
    data = _as_dict(progress)
    sources = data.get("sources") or []
    if source >= len(sources):
        return None
    found = sources[source]
    for name in ("latestOffset", "endOffset"):
        offset = _as_dict(found.get(name))
        if REPORT_KEY in offset:
            return offset
        carried = offset.get(IN_OFFSET)
        if isinstance(carried, dict) and REPORT_KEY in carried:
            return carried
    return None


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, str) and isinstance(getattr(value, "json", None), str):
        # PySpark's progress objects (dicts too): their JSON nests offsets as objects on every line.
        return _as_dict(value.json)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}  # 4.0's Python repr of an offset: the caller reads the event's JSON instead
        return parsed if isinstance(parsed, dict) else {}
    return {}
