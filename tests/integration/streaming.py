"""Run a streaming query of the source and collect what each micro-batch delivered; plan a topic's ranges
as the driver does (plan), for tests that read them in this process."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pulsar
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.query_progress import source_report
from pulsar_throttled_source.read_task import PartitionRange, ranges_of
from pulsar_throttled_source.schemas.topic_schema import value_schema_for
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader


@dataclass
class Collected:
    """Rows per batch id: a batch re-run after a failure replaces its rows (an idempotent sink)."""

    batches: dict[int, list[Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sink(self, df, batch_id: int) -> None:
        rows = df.collect()
        with self.lock:
            self.batches[batch_id] = rows

    @property
    def rows(self) -> list[Any]:
        with self.lock:
            return [r for b in sorted(self.batches) for r in self.batches[b]]

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.batches.values())


def source_options(broker, topic: str | None = None, **extra: str) -> dict[str, str]:
    opts = {"service.url": broker.service_url, "admin.url": broker.admin_url, "metadataRefreshIntervalMs": "200"}
    if topic is not None:
        opts["topic"] = topic
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def read_stream(spark, opts: dict[str, str]):
    reader = spark.readStream.format("pulsar-throttled")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def entry_of(message_id: bytes) -> tuple[int, int]:
    mid = pulsar.MessageId.deserialize(message_id)
    return mid.ledger_id(), mid.entry_id()


def identity(row) -> tuple:
    """What must match between produced and delivered: payload, key, properties, partition, id."""
    return (bytes(row.value), row.key, tuple(sorted((row.properties or {}).items())), row.partition, bytes(row.messageId))


def sent_identity(s) -> tuple:
    return (s.payload, s.key, tuple(sorted(s.properties.items())), s.partition, s.message_id)


def start_collecting(spark, opts: dict[str, str], sink: Collected, checkpoint, **trigger: Any):
    """Start a query of the source into `sink`; `trigger` as DataStreamWriter.trigger takes it."""
    return (read_stream(spark, opts).writeStream.foreachBatch(sink.sink)
            .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def available_now_side_by_side(spark, queries: dict[str, tuple[dict[str, str], Any]], timeout_s: float = 180):
    """Run AvailableNow queries of the source at once, each `name: (options, checkpoint)` into its own sink, and
    wait for all (one wait, where each one's time is mostly quota windows or token lifetimes rather than CPU);
    every one must finish without error. Returns the (stopped) queries and their sinks by name."""
    from helpers import wait_sources_started, wait_until

    sinks = {name: Collected() for name in queries}
    started: dict[str, Any] = {}
    try:
        for name, (opts, checkpoint) in queries.items():
            at = time.time()
            q = started[name] = start_collecting(spark, opts, sinks[name], checkpoint, availableNow=True)
            q.started_at = at  # wall clock, as the progress timestamps: for checks on how long each one ran
            # Side by side, but each one's Python processes (its planner, its first batch's readers) started
            # before the next query starts: a Python start on a busy 2-core machine can miss Spark's fixed 10 s
            # to connect back (docs/DEVELOPMENT.md).
            wait_sources_started(q)
            wait_until(lambda q=q: q.lastProgress is not None or not q.isActive, 120, what=f"the first batch of {name}")
        deadline = time.monotonic() + timeout_s
        for name, q in started.items():
            assert q.awaitTermination(max(1.0, deadline - time.monotonic())), f"the AvailableNow query {name} did not finish"
            assert q.exception() is None, (name, q.exception())
    finally:
        for q in started.values():
            q.stop()
    return started, sinks


def caught_up(query) -> bool:
    """Whether the query's last completed micro-batch left no backlog: everything published before it
    was planned has been delivered, and a late duplicate could only come from a batch with new data."""
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return False
    report = source_report(progress)
    return report is not None and report["entriesBehindLatest"] == 0


def wait_caught_up(query, timeout: float = 60.0) -> None:
    """Wait on the query's own state (not a sleep) until it has caught up, failing early if it stopped."""
    from helpers import wait_until

    wait_until(lambda: caught_up(query) or not query.isActive, timeout, what="the query to catch up")
    assert query.isActive, f"the query stopped: {query.exception()}"


def failure_of(query, timeout: float) -> str:
    """The error `query` must stop with within `timeout` seconds; the query is stopped either way."""
    try:
        with pytest.raises(StreamingQueryException) as err:
            query.awaitTermination(timeout)
    finally:
        query.stop()
    return str(err.value)


def plan(broker, topic: str, **extra: str) -> list[PartitionRange]:
    """The ranges of the whole topic, as the driver plans them (a schema topic's decoded as the data source would),
    each task's in turn (a small batch's tasks carry several: planning/task_packing.py)."""
    opts = source_options(broker, topic, startingOffsets="earliest", **extra)
    parsed = parse_options({k.lower(): str(v) for k, v in opts.items()})
    reader = AdmissionControlStreamReader(parsed, value_schema=value_schema_for(parsed))
    try:
        start = reader.initialOffset()
        return [r for task in reader.partitions(start, reader.latestOffset(start, ReadAllAvailable())) for r in ranges_of(task)]
    finally:
        reader.stop()
