"""What the metrics listener exports from one progress event, with no exporter library: the metric table
(names, help, labels) and the samples of a progress event's sources that are this package's. The
exporters (prometheus.py, otel.py) only translate these; query_progress.source_report finds the
report on every Spark line (4.2+: latestOffset; 4.0/4.1: endOffset["progress"])."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..query_progress import source_report
from ..topics import TopicName

QUERY_LABELS = ("query_id", "query_name", "source")  # source: the source's index in the query's progress


class Metric(NamedTuple):
    name: str  # Prometheus-style; OpenTelemetry instruments take the same name
    help: str
    labels: tuple[str, ...] = ()  # beyond QUERY_LABELS
    counter: bool = False  # a running total (Prometheus exports it with the _total suffix)


def _m(name: str, help: str, *labels: str, counter: bool = False) -> Metric:
    return Metric(f"pulsar_throttled_{name}", help, labels, counter)


# Progress report field -> metric (planning/progress.py, docs/guides/monitoring.md, "Query progress").
LAG = {
    "entriesBehindLatest": _m("entries_behind_latest", "Entries after the batch's end up to the newest readable entry, all partitions"),
    "maxEntriesBehindLatest": _m("max_entries_behind_latest", "Entries behind latest, largest over partitions"),
    "avgEntriesBehindLatest": _m("avg_entries_behind_latest", "Entries behind latest, mean over partitions"),
    "messagesBehindLatest": _m("messages_behind_latest", "Messages behind latest (estimated from messages per entry), all partitions"),
    "maxMessagesBehindLatest": _m("max_messages_behind_latest", "Messages behind latest, largest over partitions"),
    "avgMessagesBehindLatest": _m("avg_messages_behind_latest", "Messages behind latest, mean over partitions"),
    "secondsBehindLatest": _m("seconds_behind_latest", "Time lag: age of the oldest unread message when the batch was planned, largest over partitions"),
    "partitions": _m("partitions", "Partitions the source reads"),
    "partitionsBehind": _m("partitions_behind", "Partitions with unread entries after the batch"),
}
LEVEL = {
    "heldBack": _m("level_held_back_partitions", "Partitions this quota level held back this trigger", "level"),
    "windowUsed": _m("level_window_used_ratio", "Share of the fullest bucket's window quota used at this level (0..1)", "level"),
    "debtMessages": _m("level_debt_messages", "Messages over-admitted at this level, repaid by later windows", "level"),
    "debtBytes": _m("level_debt_bytes", "Bytes over-admitted at this level, repaid by later windows", "level"),
}
FLOOR_HELD = _m("trigger_floor_held", "1 when minEntriesPerTrigger held the whole batch back this trigger")
READ_LIMIT_HELD = _m("read_limit_held_partitions", "Partitions maxEntriesPerTrigger gave less than their backlog")
READ_PATH = _m("read_path_info", "The read path the driver resolves (value 1)", "read_path")
TOPIC = {  # from the report's perPartition (option progressPerPartition): summed (seconds: max) per topic
    "entriesBehind": _m("topic_entries_behind_latest", "Entries behind latest per topic", "topic"),
    "messagesBehind": _m("topic_messages_behind_latest", "Messages behind latest per topic", "topic"),
    "secondsBehind": _m("topic_seconds_behind_latest", "Time lag per topic, largest over its partitions", "topic"),
}
SOURCE = {  # Spark's own per-source progress fields
    "numInputRows": _m("batch_input_rows", "Rows the source delivered in the last trigger"),
    "inputRowsPerSecond": _m("input_rows_per_second", "Rows per second arriving, as Spark's source progress says"),
    "processedRowsPerSecond": _m("processed_rows_per_second", "Rows per second processed, as Spark's source progress says"),
}
ROWS_TOTAL = _m("input_rows", "Rows the source delivered since the listener was added", counter=True)

METRICS: tuple[Metric, ...] = (*LAG.values(), *LEVEL.values(), FLOOR_HELD, READ_LIMIT_HELD, READ_PATH,
                               *TOPIC.values(), *SOURCE.values(), ROWS_TOTAL)


class Sample(NamedTuple):
    metric: Metric
    labels: tuple[str, ...]  # values of QUERY_LABELS + metric.labels
    value: float


def progress_samples(progress: Any) -> list[Sample]:
    """The samples of every source of `progress` (a StreamingQueryProgress, its JSON or that JSON parsed)
    that carries this package's report; the rows total is the listener's (it adds numInputRows up)."""
    data = _parsed(progress)
    query = (str(data.get("id") or ""), str(data.get("name") or ""))
    samples: list[Sample] = []
    for index, source in enumerate(data.get("sources") or []):
        report = source_report(data, index)
        if report is None:
            continue  # another source of the same query
        base = (*query, str(index))
        samples += [Sample(m, base, float(source[k])) for k, m in SOURCE.items() if _number(source.get(k))]
        # secondsBehindLatest is null while unknown: no sample rather than a made-up 0.
        samples += [Sample(m, base, float(report[k])) for k, m in LAG.items() if _number(report.get(k))]
        throttle = report.get("throttle") or {}
        samples.append(Sample(FLOOR_HELD, base, 1.0 if throttle.get("floorHeld") else 0.0))
        if _number(throttle.get("readLimitHeld")):
            samples.append(Sample(READ_LIMIT_HELD, base, float(throttle["readLimitHeld"])))
        for level, values in (throttle.get("levels") or {}).items():
            samples += [Sample(m, (*base, level), float(values[k])) for k, m in LEVEL.items() if _number(values.get(k))]
        if report.get("readPath"):
            samples.append(Sample(READ_PATH, (*base, str(report["readPath"])), 1.0))
        samples += _topic_samples(base, report.get("perPartition") or {})
    return samples


def _topic_samples(base: tuple[str, ...], per_partition: Mapping[str, Any]) -> list[Sample]:
    totals: dict[str, dict[str, float]] = {}
    for partition, lag in per_partition.items():
        topic = totals.setdefault(str(TopicName.parse(partition).base), {})
        for key in ("entriesBehind", "messagesBehind"):
            if _number(lag.get(key)):
                topic[key] = topic.get(key, 0.0) + lag[key]
        if _number(lag.get("secondsBehind")):
            topic["secondsBehind"] = max(topic.get("secondsBehind", 0.0), float(lag["secondsBehind"]))
    return [Sample(TOPIC[k], (*base, topic), v) for topic, values in sorted(totals.items()) for k, v in values.items()]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


def _parsed(progress: Any) -> dict[str, Any]:
    # PySpark's progress objects carry their JSON (on 4.0 the only form with the offsets as JSON).
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        progress = text
    if isinstance(progress, str):
        progress = json.loads(progress)
    return dict(progress) if isinstance(progress, Mapping) else {}
