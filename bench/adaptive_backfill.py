"""What an adaptive backfill spares a live producer (issue 40): the producer's publish latency and the backfill's
throughput, idle / under a static quota at the ceiling / under adaptiveThrottling with the same ceiling / under a
sweep of lower static quotas, all in one run on one broker.

A live producer writes unbatched 100 B messages at a fixed rate (default 200 msg/s) to its own topic and times
each send (send_async to the broker's acknowledgement) for the whole run. A backlog (default 2 partitions,
1,000,000 messages of 100 B batched 10 to an entry) is drained, from the start each time and out of the broker's cache (the
topic is unloaded first), by a Spark streaming query (local[2], a 1 s processing-time trigger, a noop sink) for
--seconds per scenario (from its first batch on):
- idle: no backfill (the producer's baseline);
- static at the ceiling (--ceiling entries per second per partition, batch mode);
- adaptive at the same ceiling (adaptiveThrottling, 2 s controller windows, +10 points a clear window,
  adaptiveThrottlingTriggerInterval=1s: the batchDuration signal, and adaptiveThrottlingMetricsUrl: the
  publishLatency signal, with the others), as a user who wants the broker's publish latency to count would set it:
  the broker's stats period lowered to --stats-period seconds (statsUpdateFrequencyInSecs and
  managedLedgerStatsPeriodSeconds, 60 s by default), or that signal could move m once a minute at most;
- static sweep: ceiling / 2, / 4, / 8.
Per scenario: the producer's p50 / p99 publish latency, and the backfill's throughput (messages read per second,
from the query's progress). Then the target of issue 40: the latency bound is 1.5 x the idle p99; the best static
quota meeting it, and the adaptive backfill's throughput against that one's (target >= 70 %) and its p99 against
the bound. Exit status 0 either way: the figures are the point (bench/README.md).

    .venv/bin/python bench/adaptive_backfill.py [--seconds 30] [--ceiling 1000] [--rate 200] [--messages 1000000]
                                                [--stats-period 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pulsar

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import quiet_logger  # noqa: E402
from topic_admin import TopicAdmin  # noqa: E402

ADAPTIVE = {"adaptiveThrottling": "true", "adaptiveThrottlingWindow": "2s", "adaptiveThrottlingIncreasePercent": "10",
            "adaptiveThrottlingTriggerInterval": "1s"}


class BrokerLatencyWatch(threading.Thread):
    """The broker's own p99 publish latency (its pulsar_broker_publish_latency summary, one figure per stats period),
    read every second: does the broker see what the live producer feels?"""

    def __init__(self, metrics_url: str) -> None:
        super().__init__(daemon=True)
        self.url = metrics_url
        self.halt = threading.Event()
        self.periods: list[tuple[float, float]] = []  # (first read at, p99 ms), one per stats period

    def run(self) -> None:
        import requests

        from pulsar_throttled_source.metadata.broker_metrics import broker_latency
        last = None
        while not self.halt.wait(1.0):
            try:
                publish, _ = broker_latency(requests.get(self.url, timeout=5).text)
            except Exception:  # noqa: BLE001 (a figure missed, not a failed benchmark)
                continue
            if publish is not None and publish.quantiles != last and publish.at(0.99) is not None:
                last = publish.quantiles
                self.periods.append((time.time(), publish.at(0.99) or 0.0))

    def p99s(self, since: float, until: float) -> list[float]:
        return [p99 for at, p99 in list(self.periods) if since <= at < until]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="per scenario")
    parser.add_argument("--ceiling", type=int, default=1000, help="entries per second per partition (batch mode)")
    parser.add_argument("--rate", type=float, default=200.0, help="the live producer's messages per second")
    parser.add_argument("--messages", type=int, default=1_000_000, help="the backlog")
    parser.add_argument("--stats-period", type=int, default=5,
                        help="the broker's statsUpdateFrequencyInSecs and managedLedgerStatsPeriodSeconds (seconds)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="bench-adaptive-"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start (shared with others?)")
    stats = {"statsUpdateFrequencyInSecs": str(args.stats_period), "managedLedgerStatsPeriodSeconds": str(args.stats_period)}
    with LocalBroker(data_dir=work / "broker", broker_config=stats) as broker:
        admin = TopicAdmin(broker.admin_url)
        backlog = TopicName.parse(f"bench-adaptive-backlog-{time.time_ns()}")
        admin.create_partitioned_topic(backlog, 2)
        produce_backlog(broker.service_url, str(backlog), args.messages)
        entries = sum(int(s["numberOfEntries"]) for s in admin.partitioned_internal_stats(backlog).values())
        print(f"backlog: {args.messages:,} messages of 100 B in {entries:,} entries on 2 partitions")

        from pyspark.sql import SparkSession

        # A busy machine starts a Python worker slowly: give it 2 minutes to connect back (15 s by default).
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.python.authenticate.socketTimeout", "120s")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        client = pulsar.Client(broker.service_url, logger=quiet_logger())
        live = LiveProducer(client, f"bench-adaptive-live-{time.time_ns()}", args.rate)
        live.start()
        watch = BrokerLatencyWatch(f"{broker.admin_url}/metrics/")
        watch.start()
        time.sleep(5)  # the producer's connection and first sends settle
        # Spark's Python workers and their Pulsar clients start once, here, not in the first scenario's figures.
        warm = TopicName.parse(f"bench-adaptive-warm-{time.time_ns()}")
        admin.create_partitioned_topic(warm, 2)
        produce_backlog(broker.service_url, str(warm), 1000)
        try:
            backfill(spark, broker, str(warm), {}, 2.0, work)  # (the daemon's workers stay for the scenarios)
        except RuntimeError as e:
            print(f"warm-up failed ({str(e)[:120]}); going on", flush=True)

        quota = {"throttlingMode": "batch"}
        scenarios: list[tuple[str, dict[str, str] | None]] = [
            ("idle", None),
            (f"static {args.ceiling} (the ceiling)", {**quota, "dispatchThrottlingRatePerTopicInMsg": str(args.ceiling)}),
            (f"adaptive, ceiling {args.ceiling}", {**quota, "dispatchThrottlingRatePerTopicInMsg": str(args.ceiling),
                                                   **ADAPTIVE, "adaptiveThrottlingMetricsUrl": f"{broker.admin_url}/metrics/"}),
        ] + [(f"static {args.ceiling // d}", {**quota, "dispatchThrottlingRatePerTopicInMsg": str(args.ceiling // d)})
             for d in (2, 4, 8)]
        rows = []
        for name, options in scenarios:
            admin.unload_topic(backlog)  # out of the broker's cache: every scenario reads from the bookie
            # A stats period with no backfill in between: the adaptive query's first reading of the broker's publish
            # latency (its baseline) is not the previous scenario's load.
            time.sleep(max(1.0, args.stats_period + 1.0))
            if options is None:
                start = time.time()
                time.sleep(args.seconds)
                end, read, multipliers, fired = time.time(), 0, list[float](), Counter[str]()
            else:
                try:
                    start, end, read, multipliers, fired = backfill(spark, broker, str(backlog), options, args.seconds, work)
                except Exception as e:  # a machine too busy for Spark (workers that do not connect back in time)
                    print(f"{name}: failed ({type(e).__name__}: {str(e)[:200]})", flush=True)
                    continue
            got = live.latencies(start, end)
            row = (name, percentile(got, 0.5) * 1000, percentile(got, 0.99) * 1000, read / (end - start), len(got),
                   multipliers)
            rows.append(row)
            m = (f"; m min {min(multipliers):.2f}, mean {statistics.mean(multipliers):.2f}, last {multipliers[-1]:.2f}; "
                 f"fired in {len(multipliers)} reports: {dict(fired) or 'none'}" if multipliers else "")
            seen = watch.p99s(start + args.stats_period, end)  # periods that ended inside the scenario
            broker_p99 = (f"; the broker's p99 per {args.stats_period} s period: median {statistics.median(seen):.1f} ms, "
                          f"max {max(seen):.1f} ms" if seen else "")
            print(f"{name}: producer p50 {row[1]:.1f} ms, p99 {row[2]:.1f} ms over {row[4]} sends; backfill "
                  f"{row[3]:,.0f} msg/s{m}{broker_p99}; load average {os.getloadavg()[0]:.1f}", flush=True)
        live.halt.set()
        watch.halt.set()
        live.join(10)
        client.close()
        admin.close()
        spark.stop()

    idle_p99 = rows[0][2]
    bound = 1.5 * idle_p99
    print("\nscenario | producer p50 ms | producer p99 ms | p99 / idle p99 | backfill msg/s | within 1.5x idle p99")
    for name, p50, p99, rate, _, _ in rows:
        print(f"{name} | {p50:.1f} | {p99:.1f} | {p99 / idle_p99:.2f} | {rate:,.0f} | {'yes' if p99 <= bound else 'no'}")
    statics = [r for r in rows if r[0].startswith("static") and r[2] <= bound]
    adaptive = next((r for r in rows if r[0].startswith("adaptive")), None)
    if adaptive is None:
        print("the adaptive backfill failed: no comparison")
    elif statics:
        best = max(statics, key=lambda r: r[3])
        print(f"best static quota within the bound: {best[0]} at {best[3]:,.0f} msg/s; adaptive drains at "
              f"{adaptive[3] / best[3]:.0%} of it (target >= 70 %), p99 {adaptive[2] / idle_p99:.2f}x idle "
              f"(target <= 1.5x)")
    else:
        print(f"no static quota of the sweep kept the producer's p99 within {bound:.1f} ms (1.5x idle); adaptive: "
              f"p99 {adaptive[2] / idle_p99:.2f}x idle at {adaptive[3]:,.0f} msg/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
