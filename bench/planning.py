"""How long one planning step (`latestOffset`) takes, and whether idle polls reach the broker.

Starts its own LocalBroker, creates topics of 1, 16 and 64 partitions with a backlog spanning
several ledgers per partition, builds a `AdmissionControlStreamReader` directly (no Spark), and with
quotas on (so the quota engine and its SQLite store run every time) calls

    latestOffset(start, ReadMaxRows(...))

repeatedly with a warm metadata cache. Prints the median and p99 per partition count, then
the number of admin requests made during 100 idle polls inside the metadata refresh
interval. Targets: median < 20 ms at 64 partitions; 0 admin requests on idle polls.

    .venv/bin/python bench/planning.py [--calls 300] [--transactions] [--max-messages N]
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import pulsar
from pyspark.sql.streaming.datasource import ReadMaxRows

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planning.read_limit import UNLIMITED_ROWS
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

# Topic management (creating the benchmark's topics) is test support code, not part of the source.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from topic_admin import TopicAdmin  # noqa: E402

PARTITION_COUNTS = (1, 16, 64)
ENTRIES_PER_LEDGER = 50
ENTRIES_PER_PARTITION = 120  # 3 ledgers per partition: planning walks ledger lists


def make_topic(admin: TopicAdmin, client: pulsar.Client, partitions: int) -> str:
    topic = TopicName.parse(f"bench-planning-{partitions}p-{time.time_ns()}")
    admin.create_partitioned_topic(topic, partitions)
    counter = iter(range(1 << 62))
    producer = client.create_producer(str(topic), batching_enabled=False, block_if_queue_full=True,
                                      message_router=lambda msg, n: next(counter) % n)
    for i in range(partitions * ENTRIES_PER_PARTITION):
        producer.send_async(f"m-{i}".encode(), None)
    producer.flush()
    producer.close()
    return str(topic)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def reader_for(broker: LocalBroker, topic: str, state: Path, refresh_ms: int,
               max_messages: int = 0) -> AdmissionControlStreamReader:
    cap = {"maxMessagesPerTrigger": str(max_messages)} if max_messages else {}
    return AdmissionControlStreamReader(parse_options({
        **cap,
        "service.url": broker.service_url,
        "admin.url": broker.admin_url,
        "topic": topic,
        "startingOffsets": "earliest",
        "subscription": "bench",
        "metadataRefreshIntervalMs": str(refresh_ms),
        "quotaStatePath": str(state),
        # Quotas large enough that every call admits (the full engine path), at all levels.
        "dispatchThrottlingRateInMsg": "1000000000",
        "dispatchThrottlingRatePerTopicInMsg": "1000000000",
        "dispatchThrottlingRatePerSubscriptionInByte": "1000000000000",
    }))


def uncapped_ratio(broker: LocalBroker, topic: str, work: Path, n: int, calls: int,
                   capped: AdmissionControlStreamReader, start: object) -> str:
    """Warm calls with and without maxMessagesPerTrigger, interleaved so both see the same machine load."""
    plain = reader_for(broker, topic, work / f"quota-plain-{n}.sqlite", refresh_ms=3_600_000)
    plain_start = plain.initialOffset()
    limit = ReadMaxRows(UNLIMITED_ROWS)
    for _ in range(20):
        plain.latestOffset(plain_start, limit)
    with_cap, without = [], []
    for _ in range(calls):
        for reader, begin, times in ((capped, start, with_cap), (plain, plain_start, without)):
            t0 = time.perf_counter()
            reader.latestOffset(begin, limit)
            times.append((time.perf_counter() - t0) * 1000)
    plain.stop()
    a, b = statistics.median(with_cap), statistics.median(without)
    return f"median {b:.2f} ms uncapped, {a:.2f} ms capped: the cap costs x{a / b:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="timed latestOffset calls per partition count")
    parser.add_argument("--cold-calls", type=int, default=30, help="calls with a metadata refresh each (for comparison)")
    parser.add_argument("--idle-polls", type=int, default=100)
    parser.add_argument("--transactions", action="store_true",
                        help="broker with a transaction coordinator: planning also reads each partition's max read position")
    parser.add_argument("--max-messages", type=int, default=0,
                        help="maxMessagesPerTrigger on every reader (0: off): the cap's cut is planned on every call")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("pulsar_throttled_source").setLevel(logging.WARNING)

    work = Path(tempfile.mkdtemp(prefix="bench-planning-"))
    print(f"starting a local Pulsar broker in {work} ...", file=sys.stderr)
    config = {"transactionCoordinatorEnabled": "true"} if args.transactions else {}
    with LocalBroker(data_dir=work / "broker", max_entries_per_ledger=ENTRIES_PER_LEDGER, broker_config=config) as broker:
        admin = TopicAdmin(broker.admin_url)
        client = pulsar.Client(broker.service_url, logger=_quiet())
        try:
            topics = {n: make_topic(admin, client, n) for n in PARTITION_COUNTS}
        finally:
            client.close()

        print(f"latestOffset with quotas on, warm cache, {args.calls} calls each "
              f"({ENTRIES_PER_PARTITION} entries in {-(-ENTRIES_PER_PARTITION // ENTRIES_PER_LEDGER)} ledgers per partition):")
        results = {}
        for n, topic in topics.items():
            # A refresh interval longer than the run: every timed call uses the cached layouts.
            state = work / f"quota-{n}.sqlite"
            reader = reader_for(broker, topic, state, refresh_ms=3_600_000, max_messages=args.max_messages)
            start = reader.initialOffset()
            limit = ReadMaxRows(UNLIMITED_ROWS)
            # Warm up (engine, SQLite connection, imports) until a call asks the broker nothing: a new
            # reader looks up the headers of the entries its quotas reach, at most 256 per call.
            warm_up, quiet = 0, 0
            while quiet < 2 and warm_up < 200:
                made = reader.planner.admin.requests_made
                reader.latestOffset(start, limit)
                warm_up += 1
                quiet = quiet + 1 if reader.planner.admin.requests_made == made else 0
            times = []
            for _ in range(args.calls):
                t0 = time.perf_counter()
                end = reader.latestOffset(start, limit)
                times.append((time.perf_counter() - t0) * 1000)
            assert end != start, "the quotas admitted nothing: the engine path was not measured"
            # The engine charged its buckets on every call: source-wide + topic and subscription per partition.
            with closing(sqlite3.connect(state)) as conn:  # the quota store's file, read beside it
                buckets = [row[0] for row in conn.execute("SELECT key FROM buckets")]
            assert len(buckets) == 1 + 2 * n, buckets
            results[n] = (statistics.median(times), percentile(times, 0.99))
            # For comparison: a metadata refresh (admin round trips) on every call.
            cold = reader_for(broker, topic, work / f"quota-cold-{n}.sqlite", refresh_ms=0, max_messages=args.max_messages)
            cold_start = cold.initialOffset()
            cold_times = []
            for _ in range(args.cold_calls):
                t0 = time.perf_counter()
                cold.latestOffset(cold_start, limit)
                cold_times.append((time.perf_counter() - t0) * 1000)
            print(f"  {n:3d} partitions: median {results[n][0]:7.2f} ms   p99 {results[n][1]:7.2f} ms   ({warm_up} warm-up calls)"
                  f"   (cold cache, refresh every call: median {statistics.median(cold_times):7.2f} ms)")
            if args.max_messages:
                print(f"        beside it, the same calls without the cap: {uncapped_ratio(broker, topic, work, n, args.calls, reader, start)}")
            reader.stop()
            cold.stop()

        # Idle polls: Spark polls latestOffset + reportLatestOffset when there is no new data;
        # inside the refresh interval they must not reach the broker.
        reader = reader_for(broker, topics[64], work / "quota-idle.sqlite", refresh_ms=60_000)
        start = reader.initialOffset()
        caught_up = reader.latestOffset(start, ReadMaxRows(UNLIMITED_ROWS))
        while True:  # read everything, so the following polls are idle
            nxt = reader.latestOffset(caught_up, ReadMaxRows(UNLIMITED_ROWS))
            if nxt == caught_up:
                break
            caught_up = nxt
        before = reader.planner.admin.requests_made
        t0 = time.perf_counter()
        for _ in range(args.idle_polls):
            assert reader.latestOffset(caught_up, ReadMaxRows(UNLIMITED_ROWS)) == caught_up
            reader.reportLatestOffset()
        elapsed = time.perf_counter() - t0
        idle_requests = reader.planner.admin.requests_made - before
        print(f"admin requests during {args.idle_polls} idle polls (64 partitions, inside the refresh interval): "
              f"{idle_requests} ({elapsed * 1000 / args.idle_polls:.2f} ms per poll)")
        reader.stop()
        admin.close()

    ok = results[64][0] < 20 and idle_requests == 0
    print(f"targets: median < 20 ms at 64 partitions: {'met' if results[64][0] < 20 else 'MISSED'}; "
          f"0 admin requests on idle polls: {'met' if idle_requests == 0 else 'MISSED'}")
    return 0 if ok else 1


def _quiet() -> logging.Logger:
    logger = logging.getLogger("bench-pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


if __name__ == "__main__":
    sys.exit(main())
