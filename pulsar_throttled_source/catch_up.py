"""Catch up a backlog under the quotas and stop: what Trigger.AvailableNow is for, on every Spark line.

    from pulsar_throttled_source.catch_up import catch_up

    writer = (spark.readStream.format("pulsar-throttled").option("topic", ...).load()
              .writeStream.format("parquet").option("path", out).option("checkpointLocation", chk))
    result = catch_up(writer, timeout_s=3600)        # or catch_up(writer, table="bronze.orders")
    print(result.batches, result.rows)

On PySpark 4.2+ (admission control, detected by feature: spark_support.has_admission_control) this is
Trigger.AvailableNow: the query reads what was readable when it started, in throttled batches, and ends.
PySpark 4.0 and 4.1 (Databricks 17.3 and 18.x LTS) give Python streaming sources no admission control:
there AvailableNow reads one throttled batch and stops. So the query runs on a processing-time trigger
instead, and is stopped once a micro-batch has committed whose progress report (planning/progress.py,
read by query_progress.source_report) says nothing was left behind as of its plan: entriesBehindLatest 0
for every source. The plan is the line: what arrives after it is read by the next run, as with
AvailableNow; a batch already running when the query is stopped is not committed, and the next run
reads it again from the checkpoint (sinks write each batch once).

A run with no batch at all (nothing new since the checkpoint) ends after `idle_s`: its triggers found
nothing, and the report its checkpoint carries, if any, says nothing was behind. Keep `idle_s` above the
quota period (ratePeriodInSecond), or a window another query emptied could look like no data.
A failed query's exception is raised; `timeout_s` stops the query and raises CatchUpTimeout.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .query_progress import REPORT_KEY, source_report
from .spark_support import has_admission_control

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatchUpResult:
    query: Any  # the StreamingQuery, stopped
    trigger: str  # "availableNow" (4.2+) or "processingTime" (4.0/4.1)
    batches: int  # micro-batches that read data
    rows: int
    seconds: float
    reports: list[dict[str, Any] | None] = field(default_factory=list)  # each source's last report


class CatchUpTimeout(TimeoutError):
    """The backlog was not caught up within timeout_s; the query is stopped, `result` says how far it got."""

    def __init__(self, message: str, result: CatchUpResult) -> None:
        super().__init__(message)
        self.result = result


def catch_up(writer: Any, *, table: str | None = None, timeout_s: float | None = None,
             processing_time: str = "1 second", idle_s: float = 10.0, poll_s: float = 0.5,
             available_now: bool | None = None, clock: Callable[[], float] = time.monotonic) -> CatchUpResult:
    """Start `writer` (a DataStreamWriter with its sink and checkpoint set; its trigger is replaced) into
    `table` (DataStreamWriter.toTable) or its own path (start), read the backlog under the quotas, stop,
    and return what it read. `available_now`: None detects admission control in this Python (with Spark
    Connect, pass whether the server's PySpark has it); `processing_time`, `idle_s`: 4.0/4.1 only."""
    if timeout_s is not None and timeout_s <= 0:
        raise ValueError(f"catch_up: timeout_s must be a number of seconds above 0 (or None: no limit), not {timeout_s!r}")
    if poll_s <= 0 or idle_s < 0:
        raise ValueError(f"catch_up: poll_s must be above 0 and idle_s 0 or more, not poll_s={poll_s!r}, idle_s={idle_s!r}")
    native = has_admission_control() if available_now is None else available_now
    trigger = "availableNow" if native else "processingTime"
    writer = writer.trigger(availableNow=True) if native else writer.trigger(processingTime=processing_time)
    began = clock()
    query = writer.toTable(table) if table is not None else writer.start()
    seen = Progress()
    watch = None if native else CaughtUpWatch(idle_s)
    try:
        while True:
            # Wakes early when the query ends; raises the query's exception if it failed.
            ended = query.awaitTermination(poll_s)
            seen.observe(query.recentProgress)
            if ended:
                if native:
                    break  # AvailableNow ended: caught up
                raise RuntimeError("catch_up: the query was stopped before it caught up")
            elapsed = clock() - began
            if watch is not None and watch.caught_up(seen, query.status, elapsed):
                break
            if timeout_s is not None and elapsed >= timeout_s:
                query.stop()
                result = seen.result(query, trigger, clock() - began)
                raise CatchUpTimeout(f"catch_up: not caught up after {timeout_s:g} s ({result.batches} micro-batches, "
                                     f"{result.rows} rows read; last reports {result.reports}); the query is stopped "
                                     "and the next run continues from its checkpoint", result)
    finally:
        if query.isActive:
            query.stop()
    error = query.exception()
    if error is not None:  # failed while being stopped
        raise error
    seen.observe(query.recentProgress)
    result = seen.result(query, trigger, clock() - began)
    log.info("catch_up: caught up in %.1f s, %d micro-batches, %d rows", result.seconds, result.batches, result.rows)
    return result


class Progress:
    """A run's progress events, gathered as they come (Spark keeps only the last 100: recentProgress)."""

    def __init__(self) -> None:
        self.batches: dict[int, dict[str, Any]] = {}  # micro-batches that ran, by batch id
        self.last: dict[str, Any] | None = None  # the newest event (a batch, or an idle trigger)

    def observe(self, progress: Sequence[Any]) -> None:
        for event in map(as_dict, progress):
            # A new query's first batch runs even when it reads nothing (4.0/4.1: up to the initial offset,
            # which carries no report): that one counts as an idle trigger.
            if executed(event) and (event.get("numInputRows") or None not in reports(event, require=False)):
                self.batches[int(event.get("batchId", -1))] = event
        if progress:
            self.last = as_dict(progress[-1])

    @property
    def last_batch(self) -> dict[str, Any] | None:
        return self.batches[max(self.batches)] if self.batches else None

    def result(self, query: Any, trigger: str, seconds: float) -> CatchUpResult:
        last = self.last_batch or self.last or {}
        return CatchUpResult(query, trigger, len(self.batches), sum(int(p.get("numInputRows") or 0) for p in self.batches.values()),
                             round(seconds, 3), reports(last, require=False))


class CaughtUpWatch:
    """Decides, from a processing-time query's progress, when it has caught up (see the module doc)."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s

    def caught_up(self, seen: Progress, status: Mapping[str, Any] | None, elapsed: float) -> bool:
        batch = seen.last_batch
        if batch is not None:
            return all(r[REPORT_KEY] == 0 for r in reports(batch, require=True))  # type: ignore[index]
        # No batch this run: caught up once idle long enough, unless a report (carried by the
        # checkpoint's last offset) says something is behind.
        if seen.last is None or elapsed < self.idle_s or (status is not None and status.get("isDataAvailable")):
            return False
        return all(r is None or r[REPORT_KEY] == 0 for r in reports(seen.last, require=False))


def executed(progress: Mapping[str, Any]) -> bool:
    """Whether a progress event is a micro-batch that ran (an idle trigger reports no addBatch)."""
    return bool(progress.get("numInputRows")) or "addBatch" in (progress.get("durationMs") or {})


def reports(progress: Mapping[str, Any], require: bool) -> list[dict[str, Any] | None]:
    found = [source_report(progress, i) for i in range(len(progress.get("sources") or []))]
    if require and (not found or None in found):
        described = [s.get("description") for s in progress.get("sources") or []]
        raise ValueError(f"catch_up: every source of the query must be a pulsar-throttled source (its progress "
                         f"reports the lag); this query's sources: {described}")
    return found


def as_dict(progress: Any) -> dict[str, Any]:
    """A progress event as a dict, read from its JSON where PySpark gives an object (4.0: offsets as reprs)."""
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return dict(json.loads(text))
    return dict(progress)
