"""The set-up adaptive_backfill.py and stress_observables.py share (issue 40): a broker whose stats period is lowered,
a backlog drained out of the broker's cache by a Spark query, and a live producer whose every send is timed.

``backfill_bench`` starts all of it (broker, backlog, Spark, the live producer, Spark's Python workers warmed up) and
stops it on exit; ``backfill`` runs one throttled query against the backlog for a number of seconds.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import quiet_logger  # noqa: E402
from topic_admin import TopicAdmin  # noqa: E402


class LiveProducer(threading.Thread):
    """Unbatched sends at a fixed rate for as long as the run lasts, each timed to its acknowledgement."""

    def __init__(self, client: pulsar.Client, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        self.rate = rate
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.samples: list[tuple[float, float]] = []  # (sent at, seconds to the acknowledgement)
        self.errors = 0

    def run(self) -> None:
        start, i = time.monotonic(), 0
        body = b"p" * 100
        while not self.halt.wait(max(0.0, start + i / self.rate - time.monotonic())):
            began = time.time()

            def done(res, _mid, began=began) -> None:
                with self.lock:
                    if res == pulsar.Result.Ok:
                        self.samples.append((began, time.time() - began))
                    else:
                        self.errors += 1
            self.producer.send_async(body, done)
            i += 1
        self.producer.flush()
        self.producer.close()

    def latencies(self, since: float, until: float) -> list[float]:
        with self.lock:
            return sorted(s for at, s in self.samples if since <= at < until)


def produce_backlog(service_url: str, topic: str, messages: int) -> None:
    """`messages` of 100 B, 10 to an entry, round robin over the partitions."""
    client = pulsar.Client(service_url, logger=quiet_logger())
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True, max_pending_messages=50000,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    body = b"b" * 100
    for _ in range(messages):
        producer.send_async(body, None)
    producer.flush()
    producer.close()
    client.close()


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))] if values else float("nan")


def rows_read(query) -> int:
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def backfill(spark, broker: LocalBroker, topic: str, options: dict[str, str], seconds: float, work: Path
             ) -> tuple[float, float, int, list[float], Counter[str]]:
    """Drain `topic` from the start: once its first batch ran (a query's first batch is slow: the reader, the
    workers' clients), for `seconds`: (start, end, messages read then, the m of each trigger's report then, how
    many of those reports named each signal as fired)."""
    reader = spark.readStream.format("pulsar-throttled")
    for key, value in {"service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic,
                       "startingOffsets": "earliest", "metadataRefreshIntervalMs": "500",
                       "quotaStatePath": str(work / f"quota-{time.time_ns()}.sqlite"), **options}.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("noop").trigger(processingTime="1 second")
             .option("checkpointLocation", str(work / f"cp-{time.time_ns()}")).start())
    try:
        deadline = time.monotonic() + 300
        while not rows_read(query) and query.isActive and time.monotonic() < deadline:
            time.sleep(0.2)
        start, before, seen = time.time(), rows_read(query), len(query.recentProgress)
        time.sleep(seconds)
        end = time.time()
        progress = query.recentProgress
        failure = query.exception() if not query.isActive else None
    finally:
        query.stop()
    if failure is not None or not before:
        raise RuntimeError(f"the backfill failed or read nothing in 300 s: {str(failure)[:300]}")
    read = sum(int(p["numInputRows"]) for p in progress) - before
    multipliers, fired = [], Counter[str]()
    for p in progress[seen:]:
        adaptive = json.loads(p["sources"][0]["latestOffset"] or "{}").get("adaptive")
        if adaptive is not None:
            multipliers.append(adaptive["multiplier"])
            fired.update(adaptive["fired"])
    return start, end, read, multipliers, fired


@dataclass
class BackfillBench:
    """What backfill_bench started: the broker, its admin, the backlog topic, Spark, the live producer, a work dir."""

    broker: LocalBroker
    admin: TopicAdmin
    backlog: TopicName
    spark: Any
    live: LiveProducer
    work: Path


@contextmanager
def backfill_bench(prefix: str, messages: int, rate: float, stats_period: int) -> Iterator[BackfillBench]:
    """A broker with a `stats_period` s stats period (statsUpdateFrequencyInSecs, managedLedgerStatsPeriodSeconds),
    a backlog of `messages` x 100 B on 2 partitions, Spark (local[2]), a live producer at `rate` msg/s on its own
    topic, and Spark's Python workers started by a short warm-up query (not in the first scenario's figures)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start (shared with others?)")
    stats = {"statsUpdateFrequencyInSecs": str(stats_period), "managedLedgerStatsPeriodSeconds": str(stats_period)}
    with LocalBroker(data_dir=work / "broker", broker_config=stats) as broker:
        admin = TopicAdmin(broker.admin_url)
        backlog = TopicName.parse(f"bench-{prefix}-backlog-{time.time_ns()}")
        admin.create_partitioned_topic(backlog, 2)
        produce_backlog(broker.service_url, str(backlog), messages)
        entries = sum(int(s["numberOfEntries"]) for s in admin.partitioned_internal_stats(backlog).values())
        print(f"backlog: {messages:,} messages of 100 B in {entries:,} entries on 2 partitions")

        from pyspark.sql import SparkSession

        # A busy machine starts a Python worker slowly: give it 2 minutes to connect back (15 s by default).
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.python.authenticate.socketTimeout", "120s")
                 # backfill() sums every trigger's rows from recentProgress, which keeps 100 reports by default:
                 # a scenario of over 100 one-second triggers would lose its first ones.
                 .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        client = pulsar.Client(broker.service_url, logger=quiet_logger())
        live = LiveProducer(client, f"bench-{prefix}-live-{time.time_ns()}", rate)
        live.start()
        time.sleep(5)  # the producer's connection and first sends settle
        warm = TopicName.parse(f"bench-{prefix}-warm-{time.time_ns()}")
        admin.create_partitioned_topic(warm, 2)
        produce_backlog(broker.service_url, str(warm), 1000)
        try:
            backfill(spark, broker, str(warm), {}, 2.0, work)  # (the daemon's workers stay for the scenarios)
        except RuntimeError as e:
            print(f"warm-up failed ({str(e)[:120]}); going on", flush=True)
        try:
            yield BackfillBench(broker, admin, backlog, spark, live, work)
        finally:
            live.halt.set()
            live.join(10)
            client.close()
            admin.close()
            spark.stop()
