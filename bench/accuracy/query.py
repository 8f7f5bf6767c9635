"""Starting and stopping one throttled query (the bench's session and the shared-redis subprocess)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .charges import ChargeLog, sqlite_reader
from .recorder import Recorder, RunRecord, plans_of
from .result import Bench, partitions_of, query_options
from .scenarios import Scenario

# Every trigger must leave a progress (also those that plan nothing), and a run of minutes must keep
# them all: the windows in which nothing was admitted count in the long run, and their backlog tells
# a saturated window from an idle one.
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
    "spark.sql.streaming.noDataProgressEventInterval": "0",
}


def session(app_name: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for k, v in SESSION_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_query(spark: Any, options: dict[str, object], sink: Recorder, checkpoint: Path) -> Any:
    """A processing-time trigger of one period, as the quota windows: each plan usually opens its window."""
    reader = spark.readStream.format("pulsar-throttled")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return (reader.load().writeStream.foreachBatch(sink).trigger(processingTime="1 second")
            .option("checkpointLocation", str(checkpoint)).start())


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, query: Any = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if query is not None and not query.isActive:
            raise RuntimeError(f"the query stopped while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def stop_cleanly(query: Any, sink: Recorder, dump: Path | None = None, timeout_s: float = 60) -> RunRecord:
    """Stop right after a trigger's progress is recorded. Triggers start on whole seconds, so the next
    plan is most of a second away: no plan is charged whose batch the record then misses (which would
    make the buckets' debt disagree with what was delivered). Waits first for the progress of every
    batch the sink saw. `dump`: where to keep the raw query progress (and beside it the run record), for a closer look."""
    def recorded() -> set[int]:
        return {int(p["batchId"]) for p in query.recentProgress if "addBatch" in (p.get("durationMs") or {})}

    wait_for(lambda: set(sink.snapshot()) <= recorded(), timeout_s, "the progress of the last batch", query)
    seen = len(query.recentProgress)
    last = query.lastProgress["timestamp"] if query.lastProgress else None
    wait_for(lambda: len(query.recentProgress) > seen or (query.lastProgress or {}).get("timestamp") != last,
             timeout_s, "the next trigger's progress", query)
    query.stop()
    record = RunRecord(plans_of(query.recentProgress), sink.snapshot())
    if dump is not None:
        dump.write_text(json.dumps(query.recentProgress, indent=1, default=str))
        dump.with_name("record-" + dump.name).write_text(record.to_json())
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    return record


@contextmanager
def charged_query(bench: Bench, scenario: Scenario, topic: str, rec: Recorder) -> Iterator[tuple[Any, ChargeLog]]:
    """The scenario's query on its own SQLite quota state, and the log of that state's charges; both
    stopped however the run ends, the log kept beside the other outputs."""
    quota_state = bench.work / f"quota-{scenario.name}.sqlite"
    options = query_options(bench, scenario, topic, f"accuracy-{scenario.name}", quota_state)
    query = start_query(bench.spark, options, rec, bench.work / f"cp-{scenario.name}")
    log = ChargeLog(sqlite_reader(str(quota_state), partitions_of(topic, scenario.partitions)))
    log.start()
    try:
        yield query, log
    finally:
        if query.isActive:
            query.stop()
        log.stop()
        log.save(bench.work / f"charges-{scenario.name}.json")
