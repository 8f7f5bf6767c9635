"""Soak: a throttled query against a steady producer for minutes. Is memory flat, does the quota
hold, is anything lost or duplicated?

Starts its own LocalBroker and a 2-partition topic, a producer thread publishing `--rate`
messages per second (default 200, in entries of 10 messages, spread over the partitions) and a
throttled query (precise mode, topic quota `--quota` per partition, default 1.2 x the publish rate
per partition) with a 1 s processing-time trigger, for `--minutes` (default 10). Every
`--sample-seconds` (default 10) it prints one row:

- RSS of the planner process (Spark's Python streaming-source runner, a child of the driver JVM
  running `pyspark.sql.streaming.python_streaming_source_runner`), of this driver Python
  process, of the driver JVM and of the Python workers;
- produced and delivered messages so far, and the backlog the source reports.

Then it stops the producer, lets the query drain, stops it and prints:

- memory: planner RSS after warm-up (first sample after a quarter of the run) vs at the end;
- quota: messages delivered per quota window and partition (each micro-batch attributed to the
  window the quota engine charged it to, which the source's progress report names): the largest vs the quota;
- loss: every produced message delivered exactly once (payloads carry partition and sequence).

Targets (exit 1 if missed): no message lost or duplicated; no window over the quota by more
than 5 %; planner RSS growth after warm-up under 10 %.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate 200] [--quota Q]

Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pulsar

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

# Topic management (creating the benchmark's topics) is test support code, not part of the source.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from topic_admin import TopicAdmin  # noqa: E402

PARTITIONS = 2
MSGS_PER_ENTRY = 10
RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


# -- processes -----------------------------------------------------------------------------

def _proc_table() -> dict[int, tuple[int, str]]:
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(entry.name)] = (ppid, cmd)
    return out


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def memory_sample() -> dict[str, float | int | None]:
    """RSS in MB of this driver, its JVM, the planner runner and the Python workers (ours only)."""
    table = _proc_table()
    me = os.getpid()
    jvms = [pid for pid, (ppid, cmd) in table.items() if ppid == me and "java" in cmd]
    below: set[int] = set()
    frontier = set(jvms)
    while frontier:
        below |= frontier
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - below
    runners = [pid for pid in below if RUNNER_MODULE in table[pid][1]]
    workers = [pid for pid in below if "pyspark.daemon" in table[pid][1]]
    runner = runners[0] if len(runners) == 1 else None
    return {
        "runner_pid": runner,
        "runner": _rss_mb(runner) if runner else None,
        "driver_py": _rss_mb(me),
        "jvm": sum(_rss_mb(p) or 0 for p in jvms),
        "workers": sum(_rss_mb(p) or 0 for p in workers),
    }


# -- producer and sink -----------------------------------------------------------------------

class Producer(threading.Thread):
    """Publishes `rate` msgs/s: every 1/ticks s, one entry of MSGS_PER_ENTRY messages per partition in turn."""

    def __init__(self, client: pulsar.Client, topic: TopicName, rate: float, **producer_kwargs: object) -> None:
        super().__init__(daemon=True)
        self.producers = [client.create_producer(str(topic.partition(p)), batching_enabled=True, batching_max_messages=1000,
                                                 batching_max_publish_delay_ms=60_000, block_if_queue_full=True,
                                                 **producer_kwargs)
                          for p in range(PARTITIONS)]
        self.interval = MSGS_PER_ENTRY / rate
        self.sent = [0] * PARTITIONS
        self.failed = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic()
        turn = 0
        while not self.stopping.is_set():
            p = turn % PARTITIONS
            for _ in range(MSGS_PER_ENTRY):
                self.producers[p].send_async(f"p{p}-{self.sent[p]}".encode().ljust(64, b"."), self._done)
                self.sent[p] += 1
            self.producers[p].flush()  # one entry of MSGS_PER_ENTRY messages
            turn += 1
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)

    def _done(self, res, _msg_id) -> None:
        if res != pulsar.Result.Ok:
            self.failed += 1

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        for producer in self.producers:
            producer.flush()
            producer.close()

    @property
    def total(self) -> int:
        return sum(self.sent)


class Sink:
    """foreachBatch sink keeping only counts: how often each (partition, seq) arrived, per-batch counts."""

    def __init__(self) -> None:
        self.counts = [bytearray() for _ in range(PARTITIONS)]  # seq -> times delivered (capped at 255)
        self.batches: dict[int, dict[int, int]] = {}  # batch id -> partition -> messages
        self.delivered = 0
        self.foreign = 0
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("partition", "value").collect()
        with self.lock:
            if batch_id in self.batches:  # a re-run batch covers the same range: count it once
                return
            per_partition: dict[int, int] = defaultdict(int)
            for r in rows:
                text = bytes(r.value).rstrip(b".").decode()
                part, seq = text[1:].split("-")
                p, s = int(part), int(seq)
                if p != r.partition:
                    self.foreign += 1
                counts = self.counts[p]
                if len(counts) <= s:
                    counts.extend(bytes(s + 1 - len(counts) + 4096))
                counts[s] = min(255, counts[s] + 1)
                per_partition[p] += 1
            self.batches[batch_id] = dict(per_partition)
            self.delivered += len(rows)

    def check(self, sent: list[int]) -> tuple[int, int, int]:
        """(missing, duplicated, unexpected) messages against what the producer sent."""
        with self.lock:
            missing = duplicated = unexpected = 0
            for p in range(PARTITIONS):
                counts = self.counts[p]
                for s in range(sent[p]):
                    c = counts[s] if s < len(counts) else 0
                    missing += c == 0
                    duplicated += c > 1
                unexpected += sum(1 for c in counts[sent[p]:] if c)
            return missing, duplicated, unexpected


# -- progress ------------------------------------------------------------------------------

def delivered_per_window(batches: dict[int, dict[int, int]], windows: dict[int, int]) -> dict[tuple[int, int], int]:
    """Messages delivered per (window, partition), each batch counted in the window `windows` gives it."""
    per_window: dict[tuple[int, int], int] = defaultdict(int)
    for batch_id, counts in batches.items():
        w = windows.get(batch_id)
        if w is None:
            continue
        for p, n in counts.items():
            per_window[(w, p)] += n
    return per_window


def planning_window(progress: dict) -> int:
    """The quota window (epoch second) a micro-batch was charged to: the one the source's progress report names
    (throttle.levels.topic.windowStartMs, the quota engine's clock when it planned), else the one in which
    latestOffset ended."""
    charged = charged_window_ms(progress)
    if charged is not None:
        return charged // 1000
    return ended_window(progress)


def ended_window(progress: dict) -> int:
    """The quota window (epoch second) in which a micro-batch's latestOffset ended."""
    start = datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
    return math.floor(start + (progress.get("durationMs") or {}).get("latestOffset", 0) / 1000.0)


def charged_window_ms(progress: dict) -> int | None:
    try:
        report = json.loads(progress["sources"][0]["latestOffset"] or "{}")
        return int(report["throttle"]["levels"]["topic"]["windowStartMs"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def backlog_of(progress: dict | None) -> int | None:
    if not progress:
        return None
    try:
        report = json.loads(progress["sources"][0]["latestOffset"] or "{}")
        return int(report["messagesBehindLatest"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _fmt(v: float | None) -> str:
    return f"{v:8.1f}" if v is not None else f"{'-':>8}"


def parser(description: str | None = __doc__) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the producer and the query run together")
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second published (all partitions)")
    parser.add_argument("--quota", type=int, default=0, help="topic quota per partition in msgs/s (default 1.2 x rate per partition)")
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--drain-timeout", type=float, default=300.0, help="seconds to wait for the query to catch up at the end")
    return parser


def prepare_environment() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PULSAR_THROTTLED_LOG_LEVEL", "WARNING")  # one INFO line per batch would flood the table


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    prepare_environment()
    work = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    print(f"starting a local Pulsar broker in {work} ...", file=sys.stderr)
    with LocalBroker(data_dir=work / "broker", max_entries_per_ledger=2000) as broker:
        admin = TopicAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-soak-{time.time_ns()}")
        admin.create_partitioned_topic(topic, PARTITIONS)
        try:
            return soak(args, broker.service_url, broker.admin_url, topic, work)
        finally:
            admin.close()


def soak(args: argparse.Namespace, service_url: str, admin_url: str, topic: TopicName, work: Path,
         chaos: Callable[[float], None] | None = None, **producer_kwargs: object) -> int:
    """Run the producer and the throttled query on `topic` for `args.minutes`, calling `chaos(elapsed seconds)`
    at every sample, then drain and report; the exit code (0: every target met)."""
    quota = args.quota or math.ceil(1.2 * args.rate / PARTITIONS)
    quiet = logging.getLogger("bench-pulsar-client")
    quiet.setLevel(logging.WARNING)
    client = pulsar.Client(service_url, logger=quiet)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("soak")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sink = Sink()
    producer = Producer(client, topic, args.rate, **producer_kwargs)
    reader = spark.readStream.format("pulsar-throttled")
    for k, v in {"service.url": service_url, "admin.url": admin_url, "topic": str(topic),
                 "startingOffsets": "earliest", "subscription": "soak", "throttlingMode": "precise",
                 "dispatchThrottlingRatePerTopicInMsg": quota, "quotaStatePath": work / "quota.sqlite",
                 "metadataRefreshIntervalMs": 500}.items():
        reader = reader.option(k, str(v))
    producer.start()
    started = time.monotonic()
    query = (reader.load().writeStream.foreachBatch(sink).trigger(processingTime="1 second")
             .option("checkpointLocation", str(work / "cp")).start())
    windows: dict[int, int] = {}  # batch id -> the window it was charged to
    ended: dict[int, int] = {}  # batch id -> the window its latestOffset ended in (for comparison)
    samples: list[tuple[float, dict]] = []

    def collect_progress() -> None:
        for p in query.recentProgress:
            if "addBatch" in (p.get("durationMs") or {}) and p["numInputRows"] > 0:
                windows.setdefault(int(p["batchId"]), planning_window(p))
                ended.setdefault(int(p["batchId"]), ended_window(p))

    print(f"topic {topic}: {PARTITIONS} partitions, publishing {args.rate:.0f} msgs/s in entries of {MSGS_PER_ENTRY}; "
          f"precise mode, topic quota {quota} msgs/s per partition; {args.minutes:g} min")
    print(f"{'t (s)':>6} {'planner':>8} {'driver':>8} {'jvm':>8} {'workers':>8}   (RSS MB)  {'produced':>9} {'delivered':>9} {'backlog':>8} {'batches':>7}")
    try:
        end_at = started + args.minutes * 60
        next_sample = started + args.sample_seconds
        while time.monotonic() < end_at:
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            time.sleep(max(0.0, min(next_sample, end_at) - time.monotonic()))
            if time.monotonic() >= next_sample:
                next_sample += args.sample_seconds
                mem = memory_sample()
                collect_progress()
                t = time.monotonic() - started
                samples.append((t, mem))
                if chaos is not None:
                    chaos(t)
                print(f"{t:6.0f} {_fmt(mem['runner'])} {_fmt(mem['driver_py'])} {_fmt(mem['jvm'])} {_fmt(mem['workers'])}"
                      f"            {producer.total:9d} {sink.delivered:9d} {backlog_of(query.lastProgress) or 0:8d} {len(sink.batches):7d}",
                      flush=True)
        producer.stop()
        produced = list(producer.sent)
        drain_started = time.monotonic()
        while sink.delivered < sum(produced) and time.monotonic() - drain_started < args.drain_timeout:
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            collect_progress()
            time.sleep(0.5)
        drain_s = time.monotonic() - drain_started
        time.sleep(3)  # room for late duplicates
        collect_progress()
    finally:
        if producer.is_alive():
            producer.stop()
        query.stop()
        spark.stop()
        client.close()

    # -- report ----------------------------------------------------------------------------
    missing, duplicated, unexpected = sink.check(produced)
    per_window = delivered_per_window(sink.batches, windows)
    by_end = delivered_per_window(sink.batches, ended)
    earlier = sum(1 for b in windows if b in ended and windows[b] < ended[b])
    largest = max(per_window.values(), default=0)
    over = sorted(((w, p, n) for (w, p), n in per_window.items() if n > quota), key=lambda x: -x[2])
    unattributed = sum(1 for b in sink.batches if b not in windows and sink.batches[b])

    warm = next(((t, m) for t, m in samples if t >= args.minutes * 60 / 4 and m["runner"]), None)
    last = next(((t, m) for t, m in reversed(samples) if m["runner"]), None)
    print(f"\nproduced {sum(produced)} messages ({producer.failed} send failures); delivered {sink.delivered} in "
          f"{len(sink.batches)} micro-batches; drained in {drain_s:.1f} s after the producer stopped")
    print(f"loss: missing {missing}, duplicated {duplicated}, unexpected {unexpected}, in the wrong partition {sink.foreign}")
    print(f"quota: {quota} msgs per window and partition; largest delivered in one window {largest} "
          f"({100 * (largest - quota) / quota:+.1f}%); windows over quota: {len(over)} of {len(per_window)}"
          + (f", e.g. {over[:3]}" if over else "") + (f"; batches without progress (not attributed): {unattributed}" if unattributed else ""))
    print(f"  (batches attributed to the window the engine charged, from the progress report; by the window their "
          f"latestOffset ended in instead: {sum(1 for n in by_end.values() if n > quota)} windows over quota, largest "
          f"{max(by_end.values(), default=0)}; {earlier} batches charged in an earlier window than latestOffset ended)")
    growth = None
    if warm and last:
        growth = (last[1]["runner"] - warm[1]["runner"]) / warm[1]["runner"]
        print(f"memory: planner RSS {warm[1]['runner']:.1f} MB at {warm[0]:.0f} s -> {last[1]['runner']:.1f} MB at {last[0]:.0f} s "
              f"({100 * growth:+.1f}%); driver Python {warm[1]['driver_py']:.1f} -> {last[1]['driver_py']:.1f} MB; "
              f"JVM {warm[1]['jvm']:.0f} -> {last[1]['jvm']:.0f} MB")
    ok_loss = missing == 0 and duplicated == 0 and unexpected == 0 and producer.failed == 0
    ok_quota = largest <= quota * 1.05
    ok_memory = growth is not None and growth < 0.10
    print(f"targets: exactly once {'met' if ok_loss else 'MISSED'}; quota within 5% per window {'met' if ok_quota else 'MISSED'}; "
          f"planner memory flat (<10% growth after warm-up) {'met' if ok_memory else 'MISSED'}")
    return 0 if ok_loss and ok_quota and ok_memory else 1


if __name__ == "__main__":
    sys.exit(main())
