"""What the throttle itself costs the storage it protects (issue 32): BookKeeper entry reads and admin
lookups per delivered entry, draining a backlog that is out of the broker's cache.

Produces a backlog (default 2 partitions x 600 entries of 10 x 100 B messages), then for each
scenario unloads the topic (the broker drops its entry cache with it) and drains the whole backlog
with the source's own planner and read tasks in this process (no Spark: the costs measured are the
planner's and the read tasks', Spark adds none), one planning call per trigger as Spark would make
them, and counts:
- bookie entry reads: the broker's `pulsar_ml_cache_pendingreads_entries_read_total` (every entry the
  managed ledger reads from BookKeeper, dispatch and admin lookups alike), before and after;
- admin lookups: the planner's HEAD .../ledger/L/entry/E requests (`entry` in the admin session's count);
each per delivered entry, beside an unthrottled drain of the same backlog (the baseline: one read per
entry). Target: precise mode's extra reads at most 10 % of the entries it delivers.

    .venv/bin/python bench/bookie_reads.py [--partitions 2] [--entries 600] [--batch 10] [--varied] [--spark] [--cluster]

With --spark the drains run as Spark streaming queries (local[2]) instead of in this process, so read
tasks run in Spark's Python workers (entry lookups are not counted then). With --cluster the backlog is on
a local cluster (local_broker/cluster.py: 2 brokers, 3 bookies, ensembles of 2) instead of a standalone
broker: its partitions owned by either broker, the reads counted on both brokers together.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import requests

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.local_broker.cluster import LocalCluster
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.reading.read import read_ranges
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from throughput import quiet_logger  # noqa: E402
from topic_admin import TopicAdmin  # noqa: E402

STORAGE_READS = re.compile(r"^pulsar_ml_cache_pendingreads_entries_read_total\{[^}]*\} ([0-9.eE+]+)$", re.M)

# name -> the source's options: a few quotas per mode (entries or messages per second, per partition).
SCENARIOS: dict[str, dict[str, str]] = {
    "unthrottled": {},
    "batch, 10 entries/s": {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "10"},
    "batch, 40 entries/s": {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "40"},
    "batch, 100 entries/s": {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "100"},
    "precise, 100 msg/s": {"throttlingMode": "precise", "dispatchThrottlingRatePerTopicInMsg": "100"},
    "precise, 400 msg/s": {"throttlingMode": "precise", "dispatchThrottlingRatePerTopicInMsg": "400"},
    "precise, 1000 msg/s": {"throttlingMode": "precise", "dispatchThrottlingRatePerTopicInMsg": "1000"},
    "precise, 40 KB/s": {"throttlingMode": "precise", "dispatchThrottlingRatePerTopicInByte": "40000"},
    "batch, 40 entries/s, queue 50": {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "40",
                                      "pulsar.reader.receiverQueueSize": "50"},
    "precise, 40 KB/s, queue 50": {"throttlingMode": "precise", "dispatchThrottlingRatePerTopicInByte": "40000",
                                   "pulsar.reader.receiverQueueSize": "50"},
    "precise, 40 KB/s, queue 5": {"throttlingMode": "precise", "dispatchThrottlingRatePerTopicInByte": "40000",
                                  "pulsar.reader.receiverQueueSize": "5"},
}


def produce(service_url: str, topic: TopicName, partitions: int, entries: int, batch: int, varied: bool = False) -> None:
    """`entries` entries of `batch` x 100 B messages on each partition (a producer per partition, as
    a keyed producer's batches land). `varied`: entries of batch/2 .. 3*batch/2 messages instead, as a
    live producer's batches closed by its publish delay rather than by a full batch."""
    import random

    import pulsar

    client = pulsar.Client(service_url, logger=quiet_logger())
    sizes = random.Random(32)
    for index in range(partitions):
        producer = client.create_producer(str(topic.partition(index)), batching_enabled=True, batching_max_messages=2 * batch,
                                          batching_max_publish_delay_ms=1000, block_if_queue_full=True)
        for _ in range(entries):
            for _ in range(sizes.randint(max(1, batch // 2), batch * 3 // 2) if varied else batch):
                producer.send_async(b"x" * 100, None)
            producer.flush()  # closes the batch, as the publish delay would
        producer.close()
    client.close()


def storage_reads(admin_urls: list[str]) -> float:
    """The entries the brokers' managed ledgers read from BookKeeper so far, summed over `admin_urls`."""
    total = 0.0
    for admin_url in admin_urls:
        found = STORAGE_READS.search(requests.get(f"{admin_url}/metrics/", timeout=30).text)
        if found is None:
            raise RuntimeError(f"the metrics of {admin_url} have no pulsar_ml_cache_pendingreads_entries_read_total")
        total += float(found.group(1))
    return total


@contextmanager
def pulsar_under_test(work: Path, cluster: bool) -> Iterator[tuple[SimpleNamespace | LocalBroker, list[str]]]:
    """A standalone broker, or a local cluster (its service URL naming both brokers, the admin API the first's);
    and the admin URLs of every broker, whose reads are counted."""
    if not cluster:
        with LocalBroker(data_dir=work / "broker") as broker:
            yield broker, [broker.admin_url]
        return
    with LocalCluster(work / "cluster") as local:
        assert local.info is not None
        brokers = [b["adminUrl"] for b in local.info.brokers]
        yield SimpleNamespace(service_url=local.info.serviceUrl, admin_url=brokers[0]), brokers


def drain(broker: SimpleNamespace | LocalBroker, topic: str, options: dict[str, str], work: Path, entries: int) -> tuple[int, int, int, float]:
    """Delivered (entries, messages), the planner's entry lookups, and seconds."""
    stream = AdmissionControlStreamReader(parse_options({k.lower(): v for k, v in {
        "service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic, "startingOffsets": "earliest",
        "quotaStatePath": str(work / f"quota-{time.time_ns()}.sqlite"), "metadataRefreshIntervalMs": "200", **options}.items()}))
    t = time.monotonic()
    start, delivered, messages = stream.initialOffset(), 0, 0
    while delivered < entries:
        tick = time.monotonic()
        end = stream.latestOffset(start, stream.getDefaultReadLimit())  # a processing-time trigger's limit
        if end != start:
            for part in stream.partitions(start, end):
                messages += sum(batch.num_rows for batch in read_ranges(part))
                delivered += part.entries
            stream.commit(end)
            start = end
        time.sleep(max(0.0, 0.2 - (time.monotonic() - tick)))  # a 200 ms processing-time trigger
        if time.monotonic() - t > 600:
            raise RuntimeError(f"the drain did not finish: {delivered} of {entries} entries")
    lookups = stream.planner.admin.requests_by_kind["entry"]
    stream.stop()
    return delivered, messages, lookups, time.monotonic() - t


def drain_with_spark(spark: object, broker: SimpleNamespace | LocalBroker, topic: str, options: dict[str, str], work: Path,
                     messages: int) -> tuple[int, float]:
    """The same drain as a Spark streaming query (local[2], a 200 ms processing-time trigger, a memory
    sink): the read tasks run in Spark's Python workers, where a task finds the reader its
    partition's previous task parked only when Spark gives it the same worker. Messages and seconds."""
    name = f"bookie_reads_{time.time_ns()}"
    reader = spark.readStream.format("pulsar-throttled")  # type: ignore[attr-defined]
    for key, value in {"service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic,
                       "startingOffsets": "earliest", "metadataRefreshIntervalMs": "200",
                       "quotaStatePath": str(work / f"quota-{time.time_ns()}.sqlite"), **options}.items():
        reader = reader.option(key, value)
    t = time.monotonic()
    query = reader.load().writeStream.format("memory").queryName(name).trigger(processingTime="200 milliseconds").start()
    try:
        while (count := spark.table(name).count()) < messages:  # type: ignore[attr-defined]
            if time.monotonic() - t > 600:
                raise RuntimeError(f"the query did not finish: {count} of {messages} messages")
            time.sleep(0.5)
    finally:
        query.stop()
    return count, time.monotonic() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--entries", type=int, default=600, help="entries per partition")
    parser.add_argument("--batch", type=int, default=10, help="messages per entry")
    parser.add_argument("--varied", action="store_true", help="entries of batch/2 .. 3*batch/2 messages (time-closed batches)")
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="run only these (repeatable)")
    parser.add_argument("--spark", action="store_true", help="drain with a Spark streaming query (local[2]) instead")
    parser.add_argument("--cluster", action="store_true", help="on a local cluster (2 brokers, 3 bookies) instead")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench-bookie-reads-"))
    with pulsar_under_test(work, args.cluster) as (broker, counted):
        admin = TopicAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-bookie-reads-{time.time_ns()}")
        admin.create_partitioned_topic(topic, args.partitions)
        produce(broker.service_url, topic, args.partitions, args.entries, args.batch, args.varied)
        entries = sum(int(s["numberOfEntries"]) for s in admin.partitioned_internal_stats(topic).values())
        total_messages = sum(int(s["msgInCounter"]) for s in admin.partitioned_stats(topic).values())
        print(f"backlog: {entries:,} entries, {total_messages:,} messages of 100 B on {args.partitions} partitions"
              f"{' (varied batches)' if args.varied else ''}")
        rows = []
        spark = None
        if args.spark:
            from pyspark.sql import SparkSession

            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
        for name in args.scenario or list(SCENARIOS):
            admin.unload_topic(topic)  # the broker's entry cache goes with the topic: every entry is read from the bookie again
            time.sleep(1.0)
            before = storage_reads(counted)
            if spark is not None:  # the planner's lookups are not counted here (the driver's session is Spark's)
                messages, seconds = drain_with_spark(spark, broker, str(topic), SCENARIOS[name], work, total_messages)
                delivered, lookups = entries, 0
            else:
                delivered, messages, lookups, seconds = drain(broker, str(topic), SCENARIOS[name], work, entries)
            reads = storage_reads(counted) - before
            rows.append((name, delivered, messages, reads, lookups, seconds))
            print(f"{name}: {delivered:,} entries ({messages:,} messages) in {seconds:.1f} s; bookie entry reads {reads:,.0f} "
                  f"({reads / delivered:.2f} per entry); entry lookups {lookups:,} ({lookups / delivered:.2f} per entry)", flush=True)
        admin.close()
        if spark is not None:
            spark.stop()
    baseline = next((r for r in rows if r[0] == "unthrottled"), None)
    print("\nscenario | delivered entries | bookie reads per entry | extra reads vs unthrottled | lookups per entry")
    for name, delivered, _, reads, lookups, _ in rows:
        extra = "" if baseline is None else f"{(reads / delivered) - (baseline[3] / baseline[1]):+.2f}"
        print(f"{name} | {delivered:,} | {reads / delivered:.2f} | {extra} | {lookups / delivered:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
