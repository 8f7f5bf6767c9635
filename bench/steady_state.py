"""bench/throughput.py --scenario steady: the read rate of a long-running query (issue 17).

A backlog large enough that start-up is a small part of the run (default 10,000,000 x 100 B, batched
by the producer) is drained by the source in many micro-batches (`maxEntriesPerTrigger`, so a
batch takes seconds), and the steady-state rate is the rows of every batch but the first over the
time from the end of the first batch to the end of the last. Plain pulsar-client readers drain the
same backlog in as many processes in the same run (the baseline). While each side runs, a sampler
records the peak RSS of its reading processes (Spark's Python workers; the reader processes).

Prints both rates, the ratio (target >= 1.0: the source adds nothing to the cheapest Python loop
over the client) and both peak RSS figures."""

from __future__ import annotations

import multiprocessing as mp
import statistics
import threading
import time
from typing import Any

import psutil
from throughput import produce, read_partitions
from topic_admin import TopicAdmin

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName


class PeakRss:
    """Samples, every 0.2 s, the RSS of this process's descendants whose command line matches, and
    keeps the largest single process seen."""

    def __init__(self, *markers: str) -> None:
        self.markers = markers
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.2):
            for p in me.children(recursive=True):
                try:
                    if any(m in " ".join(p.cmdline()) for m in self.markers):
                        self.peak = max(self.peak, p.memory_info().rss)
                except psutil.Error:
                    continue


def steady_rate(progress: list[dict[str, Any]]) -> tuple[float, int]:
    """Rows per second from the end of the first micro-batch that read rows to the end of the last,
    and how many batches that spans."""
    from datetime import datetime

    def ends(p: dict[str, Any]) -> float:
        started = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        return started + p["durationMs"].get("triggerExecution", 0) / 1000

    batches = [p for p in progress if p["numInputRows"] > 0]
    if len(batches) < 3:
        raise SystemExit(f"only {len(batches)} micro-batches read rows: lower maxEntriesPerTrigger for a steady-state figure")
    rows = sum(p["numInputRows"] for p in batches[1:])
    return rows / (ends(batches[-1]) - ends(batches[0])), len(batches)


def steady_floor_source(rows: int, partitions: int, batches: int) -> type:
    """Spark's own share of a steady drain: a Python streaming source with no Pulsar behind it that
    yields prebuilt Arrow batches of the source's schema, `rows` in all, split into `batches`
    micro-batches (one more per latestOffset call). No Python source drains faster than this on
    the same cores; the source's steady rate against it says what the read path leaves to gain."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from pulsar_throttled_source.schemas.columns import RAW_ARROW_SCHEMA, RAW_SPARK_SCHEMA_DDL

    per_task = rows // batches // partitions

    class FloorReader(DataSourceStreamReader):
        def __init__(self) -> None:
            self.next = 0

        def initialOffset(self) -> dict:
            return {"batch": 0}

        def latestOffset(self) -> dict:
            self.next = min(batches, self.next + 1)
            return {"batch": self.next}

        def partitions(self, start: dict, end: dict) -> list:
            return [InputPartition(i) for i in range(partitions) for _ in range(end["batch"] - start["batch"])]

        def read(self, partition: InputPartition):
            n = min(10_000, per_task)
            batch = pa.RecordBatch.from_arrays([
                pa.nulls(n, pa.string()), pa.array([b"x" * 100] * n, pa.binary()),
                pa.repeat(pa.scalar(f"persistent://public/default/floor-partition-{partition.value}", pa.string()), n),
                pa.repeat(pa.scalar(partition.value, pa.int32()), n), pa.array([bytes(14)] * n, pa.binary()),
                pa.array(range(n), pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.nulls(n, pa.timestamp("us", tz="UTC")),
                pa.array([[]] * n, RAW_ARROW_SCHEMA.field("properties").type), pa.nulls(n, pa.string()),
                pa.repeat(pa.scalar("bench-producer", pa.string()), n)], schema=RAW_ARROW_SCHEMA)
            for _ in range(per_task // n):
                yield batch
            if per_task % n:
                yield batch.slice(0, per_task % n)

        def commit(self, end: dict) -> None:
            pass

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-steady-floor"

        def schema(self) -> str:
            return RAW_SPARK_SCHEMA_DDL

        def streamReader(self, schema: Any) -> FloorReader:
            return FloorReader()

    return FloorSource


def run_steady_scenario(args: Any) -> None:
    from pyspark.sql import SparkSession

    messages = args.messages if args.messages != 1_000_000 else 10_000_000  # the plain scenario's default is too short
    with LocalBroker() as broker:
        admin = TopicAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-steady-{int(time.time())}")
        admin.create_partitioned_topic(topic, args.partitions)
        t0 = time.perf_counter()
        produce(broker.service_url, str(topic), messages, args.size)
        print(f"produced {messages:,} messages of {args.size} B on {args.partitions} partitions in {time.perf_counter() - t0:.1f} s")
        last = {}
        for name, stats in admin.partitioned_internal_stats(topic).items():
            ledger, entry = stats["lastConfirmedEntry"].split(":")
            last[name] = (int(ledger), int(entry))
        entries = sum(int(s["numberOfEntries"]) for s in admin.partitioned_internal_stats(topic).values())
        parts = sorted(last)
        groups = [parts[i::args.processes] for i in range(args.processes)]

        def run_plain() -> tuple[float, int]:
            with PeakRss("multiprocessing") as rss:
                t = time.perf_counter()
                with mp.get_context("spawn").Pool(args.processes) as pool:
                    counts = pool.map(read_partitions, [(broker.service_url, g, last) for g in groups])
                elapsed = time.perf_counter() - t
            assert sum(counts) == messages, counts
            return messages / elapsed, rss.peak

        spark = (SparkSession.builder.master(f"local[{args.processes}]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.streaming.numRecentProgressUpdates", "10000").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        per_trigger = max(args.partitions, entries // args.batches)

        def run_source(path: str) -> tuple[float, int, float, int]:
            with PeakRss("pyspark.daemon", "pyspark/worker", "pyspark.worker") as rss:
                t = time.perf_counter()
                q = (spark.readStream.format("pulsar-throttled").option("service.url", broker.service_url)
                     .option("admin.url", broker.admin_url).option("topic", str(topic)).option("startingOffsets", "earliest")
                     .option("maxEntriesPerTrigger", str(per_trigger)).option("readPath", path)
                     .load().writeStream.format("noop").trigger(availableNow=True).start())
                q.awaitTermination()
                elapsed = time.perf_counter() - t
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            assert rows == messages, rows
            rate, batches = steady_rate(q.recentProgress)
            return rate, rss.peak, messages / elapsed, batches

        batches = max(1, entries // per_trigger)
        spark.dataSource.register(steady_floor_source(messages, args.partitions, batches))

        def run_floor() -> float:
            q = (spark.readStream.format("bench-steady-floor").load().writeStream.format("noop")
                 .trigger(processingTime="0 seconds").start())
            while sum(p["numInputRows"] for p in q.recentProgress) < messages // batches // args.partitions * batches * args.partitions:
                if q.exception() is not None:
                    raise RuntimeError(f"the floor query failed: {q.exception()}")
                time.sleep(0.2)
            q.stop()
            return steady_rate(q.recentProgress)[0]

        from pulsar_throttled_source.reading.native_library import native_library

        paths = ["python", "native"] if native_library().available else ["python"]
        if len(paths) == 1:
            print(f"the native read path is unavailable ({native_library().reason}): readPath=python only")
        run_plain()  # warm-up passes: JIT, class loading, Python workers
        for path in paths:
            run_source(path)
        run_floor()
        plain: list[tuple[float, int]] = []
        source: dict[str, list[tuple[float, int, float, int]]] = {path: [] for path in paths}
        floor: list[float] = []
        for r in range(args.rounds):
            plain.append(run_plain())
            for path in paths:
                source[path].append(run_source(path))
            floor.append(run_floor())
            print(f"round {r + 1}: plain readers {plain[-1][0]:,.0f} msg/s; " + "; ".join(
                f"source ({path}) steady {source[path][-1][0]:,.0f} msg/s ({source[path][-1][3]} batches; end to end "
                f"{source[path][-1][2]:,.0f} msg/s)" for path in paths) + f"; Spark's floor {floor[-1]:,.0f} rows/s")
        spark.stop()
        admin.close()

    plain_rate = statistics.median(p[0] for p in plain)
    mb = 2 ** 20
    print(f"plain pulsar-client readers ({args.processes} processes): {plain_rate:>12,.0f} msg/s, "
          f"peak RSS per process {max(p[1] for p in plain) / mb:.0f} MB")
    floor_rate = statistics.median(floor)
    print(f"Spark's floor, steady state (prebuilt Arrow batches of the same schema and rows, no Pulsar): {floor_rate:>12,.0f} rows/s")
    # Two costs per row on the same cores: the cheapest read (the plain rate) and Spark's own share
    # (the floor). A read path that adds nothing to the plain loop would reach their harmonic sum.
    both = 1 / (1 / plain_rate + 1 / floor_rate)
    for path in paths:
        steady = statistics.median(s[0] for s in source[path])
        end_to_end = statistics.median(s[2] for s in source[path])
        print(f"source, readPath={path}, steady state (local[{args.processes}], {per_trigger} entries per trigger): "
              f"{steady:>12,.0f} msg/s; end to end {end_to_end:,.0f} msg/s; peak RSS per Python worker "
              f"{max(s[1] for s in source[path]) / mb:.0f} MB")
        print(f"  ratio steady/plain: {steady / plain_rate:.2f}; the plain loop and Spark's floor together would give "
              f"{both:,.0f} msg/s: the source reaches {steady / both:.2f} of that")
    if len(paths) == 2:
        native, python = (statistics.median(s[0] for s in source[p]) for p in ("native", "python"))
        print(f"native / python read path, steady state: {native / python:.2f}x")
