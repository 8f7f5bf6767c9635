"""Planning at 1,000 partitions, trigger after trigger, as a long-running query sees it (issue 17).

Starts its own LocalBroker and, per layout (100 topics x 10 partitions, 1 topic x 1,000 partitions),
creates the topics with a small backlog per partition, keeps a producer writing to all partitions
in the background (so every metadata refresh finds partitions that moved), and drives an
`AdmissionControlStreamReader` (no Spark) as Spark drives it with a 1 s processing-time trigger and
the default metadata refresh (1 s): `latestOffset` then `commit`, once a second, quotas on at every
level. Prints per layout:

- planning time per trigger (median and p99 after the first 10 triggers; the first one alone);
- admin requests per trigger (median, max) and by kind over the run, against the topic count;
- the time the broker took to answer them per trigger (median);
- the planner's RSS after the first trigger and at the end.

Targets: median < 100 ms at 1,000 partitions; admin requests per refresh no more than one per topic;
memory flat over the run (use --seconds 600 for the 10-minute figure).

    .venv/bin/python bench/planning_scale.py [--seconds 60] [--rate 500] [--layouts 100x10,1x1000] [--quotas all|messages]

`--quotas messages` plans in batch mode with message quotas only, which looks up no entry.
`--transactions` runs the broker with a transaction coordinator: a refresh then also reads the open
transactions of each topic that moved (its stats, one request) and asks a max read position only
where a transaction is open (none here), so the target becomes two requests per topic.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pulsar
from pyspark.sql.streaming.datasource import ReadMaxRows

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planning.read_limit import UNLIMITED_ROWS
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from topic_admin import TopicAdmin  # noqa: E402

ENTRIES_PER_LEDGER = 50
BACKLOG_PER_PARTITION = 10
WARM_UP_TRIGGERS = 10


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def make_topics(admin: TopicAdmin, client: pulsar.Client, topics: int, partitions: int, tag: str) -> list[str]:
    names = []
    for t in range(topics):
        topic = TopicName.parse(f"bench-scale-{tag}-{t}-{time.time_ns()}")
        admin.create_partitioned_topic(topic, partitions)
        names.append(str(topic))
    for name in names:
        producer = client.create_producer(name, batching_enabled=False, block_if_queue_full=True,
                                          message_router=round_robin())
        for i in range(partitions * BACKLOG_PER_PARTITION):
            producer.send_async(f"m-{i}".encode(), None)
        producer.flush()
        producer.close()
    return names


def round_robin():
    counter = iter(range(1 << 62))
    return lambda msg, n: next(counter) % n


class BackgroundWriter:
    """Writes `rate` messages a second, each to a random partition of a random topic, from a process of
    its own (as producers are): in the planner's process, the client's router callbacks would take
    the GIL from the planning thread 500 times a second and count as planning time."""

    def __init__(self, service_url: str, topics: list[str], rate: int) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process running client threads
        self._stop = context.Event()
        self._process = context.Process(target=write_at_rate, args=(service_url, topics, rate, self._stop), daemon=True)
        self._process.start()

    def close(self) -> None:
        self._stop.set()
        self._process.join(timeout=60)


def write_at_rate(service_url: str, topics: list[str], rate: int, stop: Any) -> None:
    client = pulsar.Client(service_url, logger=quiet_logger())
    producers = [client.create_producer(t, batching_enabled=False, block_if_queue_full=True,
                                        message_router=lambda msg, n: random.randrange(n)) for t in topics]
    i = 0
    while not stop.is_set():
        t0 = time.monotonic()
        for _ in range(rate // 10):
            random.choice(producers).send_async(f"live-{i}".encode(), None)
            i += 1
        stop.wait(max(0.0, 0.1 - (time.monotonic() - t0)))
    for p in producers:
        p.flush()
        p.close()
    client.close()
    os._exit(0)  # the client's native threads would abort a normal interpreter exit ("terminate called ...")


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("bench-pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


QUOTAS = {
    # Large quotas at every level, one in bytes: every trigger runs the whole engine and admits what
    # is new, pricing each new entry (byte quotas look up entries' sizes).
    "all": {"dispatchThrottlingRateInMsg": "1000000000", "dispatchThrottlingRatePerTopicInMsg": "1000000000",
            "dispatchThrottlingRatePerSubscriptionInByte": "1000000000000"},
    # Batch mode, message quotas only: entries are counted, none is looked up.
    "messages": {"throttlingMode": "batch", "dispatchThrottlingRateInMsg": "1000000000",
                 "dispatchThrottlingRatePerTopicInMsg": "1000000000"},
}


def run_layout(broker: LocalBroker, client: pulsar.Client, topics: list[str], seconds: float, rate: int, state: Path,
               profile: cProfile.Profile | None = None, quotas: str = "all", trace_memory: bool = False,
               transactions: bool = False) -> dict:
    reader = AdmissionControlStreamReader(parse_options({
        "service.url": broker.service_url,
        "admin.url": broker.admin_url,
        "topics": ",".join(topics),
        "startingOffsets": "earliest",
        "subscription": "bench",
        "quotaStatePath": str(state),
        **QUOTAS[quotas],
    }))
    writer = BackgroundWriter(broker.service_url, topics, rate)
    process = psutil.Process()
    admin = reader.planner.admin
    times: list[float] = []
    cpu: list[float] = []  # the planning thread's own CPU time (the rest of a call waits: the broker, the GIL)
    rss: list[int] = []
    try:
        start = reader.initialOffset()
        limit = ReadMaxRows(UNLIMITED_ROWS)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            tick, tick_cpu = time.monotonic(), time.thread_time()
            if len(times) == WARM_UP_TRIGGERS:  # requests are counted after the warm-up (all threads)
                made, spent, kinds_before, steady_since = admin.requests_made, admin.request_seconds, Counter(admin.requests_by_kind), tick
                if trace_memory:
                    tracemalloc.start(10)
                    traced = tracemalloc.take_snapshot()
            if profile is not None and len(times) >= 2:
                profile.enable()
            end = reader.latestOffset(start, limit)
            reader.reportLatestOffset()  # Spark asks it right after, on the same trigger
            if profile is not None:
                profile.disable()
            times.append((time.monotonic() - tick) * 1000)
            cpu.append((time.thread_time() - tick_cpu) * 1000)
            reader.commit(end)
            start = end
            rss.append(process.memory_info().rss)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))  # a 1 s processing-time trigger
        kinds = Counter(admin.requests_by_kind)
        kinds.subtract(kinds_before)
        if trace_memory:  # where Python-level memory grew since the warm-up (allocations still held)
            growth = tracemalloc.take_snapshot().compare_to(traced, "lineno")
            tracemalloc.stop()
            print("  Python allocations held, growth since the warm-up (top 10):")
            for stat in growth[:10]:
                print(f"    {stat}")
        steady_triggers = len(times) - WARM_UP_TRIGGERS
        steady_s = time.monotonic() - steady_since
        requests, broker_s = admin.requests_made - made, admin.request_seconds - spent
    finally:
        writer.close()
        reader.stop()
    steady = times[WARM_UP_TRIGGERS:]
    # The catalog refreshes in the background: count refreshes by their layout requests (one per topic).
    layout_requests = kinds["partitioned-internalStats"] + kinds["internalStats"]
    refreshes = layout_requests / len(topics)
    # Publish stats (a second request per topic) come with a refresh only every policyRefreshIntervalMs
    # unless quotas relative to the publish rate need them live (counted apart), or the broker runs
    # transactions: they then carry each partition's open transactions, a part of every refresh.
    stats_requests = kinds["partitioned-stats"] + kinds["stats"]
    refresh_requests = layout_requests + kinds["transactionBufferStats"] + (stats_requests if transactions else 0)
    return {"first_ms": times[0], "median_ms": statistics.median(steady), "p99_ms": percentile(steady, 0.99),
            "cpu_median_ms": statistics.median(cpu[WARM_UP_TRIGGERS:]),
            "requests_per_trigger": requests / steady_triggers, "refreshes_per_s": refreshes / steady_s,
            "requests_per_refresh": refresh_requests / max(1.0, refreshes),
            "stats_per_minute": stats_requests / len(topics) * 60 / steady_s, "lookups_per_trigger": kinds["entry"] / steady_triggers,
            "broker_ms_per_trigger": broker_s * 1000 / steady_triggers,
            "kinds": +kinds, "triggers": len(times), "rss_first_mb": rss[0] / 2**20, "rss_last_mb": rss[-1] / 2**20,
            "rss_max_mb": max(rss) / 2**20,
            "rss_by_minute": [rss[i] / 2**20 for i in range(0, len(rss), 60)] + [rss[-1] / 2**20]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="run time per layout (one trigger a second)")
    parser.add_argument("--rate", type=int, default=500, help="messages a second written across all partitions meanwhile")
    parser.add_argument("--layouts", default="100x10,1x1000", help="topics x partitions, comma-separated")
    parser.add_argument("--quotas", choices=sorted(QUOTAS), default="all",
                        help="all: message and byte quotas at every level; messages: batch mode, message quotas only")
    parser.add_argument("--transactions", action="store_true",
                        help="run the broker with a transaction coordinator (refreshes then read open transactions)")
    parser.add_argument("--trace-memory", action="store_true",
                        help="print where Python-level allocations grew after the warm-up (tracemalloc; slows planning)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the planning calls after the warm-up here "
                                                     "(one file per layout, the layout appended to the name)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    layouts = [tuple(int(n) for n in spec.split("x")) for spec in args.layouts.split(",")]

    work = Path(tempfile.mkdtemp(prefix="bench-planning-scale-"))
    print(f"starting a local Pulsar broker in {work} ...", file=sys.stderr)
    ok = True
    config = {"transactionCoordinatorEnabled": "true"} if args.transactions else {}
    with LocalBroker(data_dir=work / "broker", max_entries_per_ledger=ENTRIES_PER_LEDGER, broker_config=config) as broker:
        admin = TopicAdmin(broker.admin_url)
        client = pulsar.Client(broker.service_url, logger=quiet_logger())
        try:
            for topics, partitions in layouts:
                names = make_topics(admin, client, topics, partitions, f"{topics}x{partitions}")
                profile = cProfile.Profile() if args.profile else None
                r = run_layout(broker, client, names, args.seconds, args.rate, work / f"quota-{topics}x{partitions}.sqlite", profile,
                               args.quotas, args.trace_memory, args.transactions)
                if profile is not None:
                    profile.dump_stats(f"{args.profile}.{topics}x{partitions}")
                total = topics * partitions
                allowed = topics * (2 if args.transactions else 1)
                per_refresh_ok = r["requests_per_refresh"] <= allowed + 1e-6
                fast = r["median_ms"] < (100 if total >= 1000 else 10)
                ok = ok and per_refresh_ok and fast
                print(f"{topics} topics x {partitions} partitions ({total}), {r['triggers']} triggers of 1 s, "
                      f"{args.rate} msg/s written meanwhile:")
                print(f"  planning per trigger: median {r['median_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms "
                      f"(first trigger {r['first_ms']:.0f} ms); the planning thread's own CPU: median {r['cpu_median_ms']:.1f} ms")
                print(f"  admin requests (planning and background refresh): {r['requests_per_trigger']:.1f} per trigger, "
                      f"of which entry lookups {r['lookups_per_trigger']:.1f}; metadata refreshes {r['refreshes_per_s']:.2f} a second, "
                      f"{r['requests_per_refresh']:.1f} requests each ({topics} topics), and publish stats for all topics "
                      f"{r['stats_per_minute']:.1f} times a minute; broker time {r['broker_ms_per_trigger']:.0f} ms "
                      "per trigger")
                print(f"  requests by kind over the run: {dict(r['kinds'].most_common())}")
                print(f"  planner RSS: {r['rss_first_mb']:.0f} MB after the first trigger, {r['rss_last_mb']:.0f} MB at the end "
                      f"(max {r['rss_max_mb']:.0f} MB); at each minute: "
                      + ", ".join(f"{mb:.0f}" for mb in r["rss_by_minute"]) + " MB")
                print(f"  targets: median < {100 if total >= 1000 else 10} ms: {'met' if fast else 'MISSED'}; "
                      f"requests per refresh <= {allowed} ({'two per topic' if args.transactions else 'topics'}): "
                      f"{'met' if per_refresh_ok else 'MISSED'}")
        finally:
            client.close()
            admin.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
