"""Where a micro-batch's time goes, from latestOffset to commit (issue 44), and the micro-batched rate against
one unlimited batch in the same run.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/batch_timeline.py [--messages 4000000] [--partitions 4] \\
        [--batches 8] [--rounds 2] [--read-path native] [--compare-packing]

A backlog of `--messages` x `--size` B (batched by the producer, as bench/steady_state.py produces it) on a
`--partitions`-partition topic is drained on `--cores` cores (`local[N]`, noop sink), alternately:

- in micro-batches of entries / `--batches` (`maxEntriesPerTrigger`, Trigger.AvailableNow), as steady_state.py and
  jvm_connector.py run it;
- as one unlimited batch (Trigger.AvailableNow, no limit).

The query reads through this source wrapped by a timing subclass defined here (the package is unchanged): every read
task appends one JSON line to a file with wall-clock times taken in the Python worker (read() called, the reader
opened (and whether a reader parked by the previous batch's task was taken), the first Arrow batch ready, the task's
end; the time spent inside the read loop and the time its consumer (the Arrow stream to the JVM) held it), whether
the worker process was new and whether its client was already made. Spark's side comes from each batch's progress
(durationMs: latestOffset, walCommit, queryPlanning, addBatch, commitOffsets) and from Spark's UI REST API (the job
of each batch: submitted and completed; each task: launched, deserialized, run).

Prints, per mode, the median over every batch but the first (one-batch mode: the batch) of each step as ms from the
trigger's start, then the rates: micro-batched steady state (rows of every batch but the first over the time from the
end of the first to the end of the last, as steady_state.py) and one batch (its rows over its addBatch, and over its
whole trigger), and their ratio (issue 44's target: steady >= 0.9 of the one-batch rate over addBatch).

`--compare-packing`: each round runs both modes twice, with `smallBatchTasks=0` (one task per partition, the
behaviour before issue 44's packing) and with the options given (by default a small batch packed into 2 tasks), and
prints for each the median micro-batch's trigger-to-commit time, its tasks, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from steady_state import steady_rate
from throughput import produce
from topic_admin import TopicAdmin

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

TIMELINE_ENV = "PULSAR_THROTTLED_BENCH_TIMELINE"  # the file read tasks append their lines to


def timed_source() -> type:
    """The source's DataSource with a stream reader whose read() records its task's timeline (pickled by value with
    this script, so the workers run it with the installed package underneath)."""
    from pulsar_throttled_source.datasource import PulsarThrottledDataSource
    from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader

    class TimedReader(AdmissionControlStreamReader):  # type: ignore[misc]
        def read(self, partition: Any) -> Iterator[Any]:
            return timed_read(partition)

        def partitions(self, start: dict, end: dict) -> Any:
            t = time.time()
            out = super().partitions(start, end)
            record({"driver": "partitions", "t0": t, "t1": time.time()})
            return out

    class TimedSource(PulsarThrottledDataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "pulsar-throttled-timed"

        def streamReader(self, schema: Any) -> Any:
            reader = super().streamReader(schema)
            reader.__class__ = TimedReader
            return reader

    return TimedSource


def timed_read(part: Any) -> Iterator[Any]:
    """read_range(part), recording when each step happened (runs in the Python worker)."""
    t_read = time.time()
    from pulsar_throttled_source.reading import client_cache, native_read, python_read
    from pulsar_throttled_source.reading import read as read_module

    new_worker = not getattr(sys, "_bench_timeline_seen", False)
    sys._bench_timeline_seen = True  # type: ignore[attr-defined]
    native_cached = bool(client_cache._NATIVE_CACHE._clients)
    python_cached = bool(client_cache._CACHE._clients)
    from pulsar_throttled_source.read_task import ranges_of

    ranges = ranges_of(part)  # a packed task's ranges, read in turn (issue 44)
    rec: dict[str, Any] = {"pid": os.getpid(), "partition": [r.partition_index for r in ranges],
                           "entries": sum(r.entries for r in ranges), "ranges": len(ranges),
                           "t_read": t_read, "new_worker": new_worker, "client_cached": native_cached or python_cached}
    # Where each read path opens its readers (the names its module calls them by)
    openers = {"open_native_reader": native_read, "open_reader": python_read}
    originals = {name: getattr(module, name) for name, module in openers.items()}

    def timing(name: str) -> Any:
        def opened(*args: Any, **kwargs: Any) -> Any:
            parked = {id(r) for r, _, _ in client_cache._PARKED_NATIVE._parked.values()}
            rec.setdefault("parked_before", len(parked))
            t = time.time()
            reader = originals[name](*args, **kwargs)
            rec.setdefault("t_open0", t)  # the task's first range: its first reader
            rec.setdefault("t_open1", time.time())
            rec["parked_taken"] = rec.get("parked_taken", 0) + (id(reader) in parked)
            return reader
        return opened

    for name, module in openers.items():
        setattr(module, name, timing(name))
    inside = outside = 0.0
    rows = 0
    try:
        it = read_module.read_ranges(part)
        t = time.time()
        for batch in it:
            now = time.time()
            inside += now - t
            rec.setdefault("t_first", now)
            rows += batch.num_rows
            yield batch
            t = time.time()
            outside += t - now
        inside += time.time() - t
    finally:
        for name, fn in originals.items():
            setattr(openers[name], name, fn)
    rec.update(t_end=time.time(), inside_s=inside, outside_s=outside, rows=rows)
    record(rec)


def record(rec: dict[str, Any]) -> None:
    with open(os.environ[TIMELINE_ENV], "a") as f:
        f.write(json.dumps(rec) + "\n")


def messages_out(admin: TopicAdmin, topic: TopicName) -> int:
    """Messages the broker has dispatched from the topic's partitions, to every reader so far (closed ones included)."""
    return sum(int(s.get("msgOutCounter", 0)) for s in admin.partitioned_stats(topic).values())


def epoch(ts: str) -> float:
    """A progress timestamp or a REST API time ("2026-11-26T10:50:51.123Z" / "...123GMT") as seconds."""
    return datetime.fromisoformat(ts.replace("GMT", "+00:00").replace("Z", "+00:00")).timestamp()


class SparkRest:
    """Jobs and tasks from Spark's UI REST API."""

    def __init__(self, ui_url: str, app_id: str) -> None:
        self.base = f"{ui_url}/api/v1/applications/{app_id}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=120) as r:
            return json.load(r)

    def jobs_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        out = []
        for job in self.get("/jobs"):
            if "submissionTime" in job and "completionTime" in job and t0 <= epoch(job["submissionTime"]) <= t1:
                tasks = []
                for stage in job["stageIds"]:
                    for attempt in self.get(f"/stages/{stage}"):
                        tasks += self.get(f"/stages/{stage}/{attempt['attemptId']}/taskList?length=10000")
                out.append({"submitted": epoch(job["submissionTime"]), "completed": epoch(job["completionTime"]),
                            "tasks": tasks})
        return out


def batch_timelines(progress: list[dict[str, Any]], tasks: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> list[dict]:
    """Per batch that read rows: each step as ms from its trigger's start."""
    out = []
    for p in progress:
        if p["numInputRows"] == 0:
            continue
        t0 = epoch(p["timestamp"])
        d = p["durationMs"]
        t_end = t0 + d["triggerExecution"] / 1000
        add_end = t_end - d.get("commitOffsets", 0) / 1000
        add_start = add_end - d.get("addBatch", 0) / 1000
        mine = [t for t in tasks if "t_read" in t and add_start - 0.05 <= t["t_read"] <= add_end]
        planned = [t for t in tasks if t.get("driver") == "partitions" and t0 <= t["t0"] <= add_end]
        job = next((j for j in jobs if add_start - 0.05 <= j["submitted"] <= add_end), None)
        ms = {"rows": p["numInputRows"], "latestOffset": d.get("latestOffset", 0), "walCommit": d.get("walCommit", 0),
              "queryPlanning": d.get("queryPlanning", 0), "getBatch": d.get("getBatch", 0), "addBatch": d.get("addBatch", 0),
              "commitOffsets": d.get("commitOffsets", 0), "trigger": d["triggerExecution"],
              "addBatch starts": (add_start - t0) * 1000, "tasks": len(mine)}

        def at(t: float, t0: float = t0) -> float:
            return (t - t0) * 1000
        if planned:
            ms["partitions() called"] = at(planned[0]["t0"])
            ms["partitions() returned"] = at(planned[0]["t1"])
        if job is not None:
            ms["job submitted"] = at(job["submitted"])
            launches = sorted(epoch(t["launchTime"]) for t in job["tasks"])
            if launches:
                ms["first task launched"] = at(launches[0])
                ms["last task launched"] = at(launches[-1])
            metrics = [t.get("taskMetrics", {}) for t in job["tasks"]]
            ms["task deserialize (median)"] = statistics.median(m.get("executorDeserializeTime", 0) for m in metrics) if metrics else 0
            ms["task run (median)"] = statistics.median(m.get("executorRunTime", 0) for m in metrics) if metrics else 0
            ms["job completed"] = at(job["completed"])
            # Each Python task's JVM task: the one launched last before its read() was called.
            spans = sorted((epoch(t["launchTime"]), epoch(t["launchTime"]) + t.get("duration", 0) / 1000) for t in job["tasks"])
            before, after = [], []
            for t in mine:
                launched = [s for s in spans if s[0] <= t["t_read"]]
                if launched:
                    start, end = launched[-1]
                    before.append((t["t_read"] - start) * 1000)
                    after.append((end - t["t_end"]) * 1000)
            if before:
                ms["task launch to read() (median)"] = statistics.median(before)
                ms["read() end to task end (median)"] = statistics.median(after)
        if mine:
            ms["first read() called"] = at(min(t["t_read"] for t in mine))
            ms["first reader open"] = at(min(t.get("t_open1", t["t_read"]) for t in mine))
            ms["first Arrow batch"] = at(min(t.get("t_first", t["t_end"]) for t in mine))
            ms["last task ends"] = at(max(t["t_end"] for t in mine))
            ms["read() to opening the reader (median)"] = statistics.median(
                (t.get("t_open0", t["t_read"]) - t["t_read"]) * 1000 for t in mine)
            ms["open reader (median)"] = statistics.median((t.get("t_open1", 0) - t.get("t_open0", 0)) * 1000 for t in mine)
            ms["open to first batch (median)"] = statistics.median(
                (t.get("t_first", t["t_end"]) - t.get("t_open1", t["t_read"])) * 1000 for t in mine)
            ms["read loop per task (median)"] = statistics.median(t["inside_s"] * 1000 for t in mine)
            ms["Arrow stream per task (median)"] = statistics.median(t["outside_s"] * 1000 for t in mine)
            ms["tasks: new worker"] = sum(t["new_worker"] for t in mine)
            ms["tasks: client cached"] = sum(t["client_cached"] for t in mine)
            ms["tasks: parked reader taken"] = sum(bool(t.get("parked_taken")) for t in mine)
            ms["tasks: ranges"] = sum(t.get("ranges", 1) for t in mine)
            # Core time left idle inside addBatch: cores x addBatch - the tasks' time in Python (read() to end).
            busy = sum(t["t_end"] - t["t_read"] for t in mine)
            ms["Python task time (sum)"] = busy * 1000
        out.append(ms)
    return out


def median_timeline(timelines: list[dict]) -> dict[str, float]:
    keys = [k for k in timelines[0] if all(k in t for t in timelines)]
    return {k: statistics.median(t[k] for t in timelines) for k in keys}


STEP_ORDER = ["latestOffset", "walCommit", "getBatch", "queryPlanning", "addBatch starts", "partitions() called",
              "partitions() returned", "job submitted",
              "first task launched", "first read() called", "first reader open", "first Arrow batch",
              "last task launched", "last task ends", "job completed", "addBatch", "commitOffsets", "trigger"]


def print_timeline(label: str, tl: dict[str, float]) -> None:
    print(f"  {label}: {tl.get('rows', 0):,.0f} rows, {tl.get('tasks', 0):.0f} tasks")
    print("    from the trigger's start (ms):  " + ", ".join(
        f"{k} {tl[k]:.0f}" for k in STEP_ORDER if k in tl and k not in ("latestOffset", "walCommit", "getBatch", "queryPlanning",
                                                                         "addBatch", "commitOffsets", "trigger")))
    print("    durations (ms):  " + ", ".join(f"{k} {tl[k]:.0f}" for k in
                                             ("latestOffset", "walCommit", "getBatch", "queryPlanning", "addBatch",
                                              "commitOffsets", "trigger") if k in tl))
    print("    per task (ms, medians):  " + ", ".join(
        f"{k.replace(' (median)', '')} {tl[k]:.0f}" for k in tl if k.endswith("(median)")) +
        f"; Python task time summed {tl.get('Python task time (sum)', 0):.0f}")
    print("    tasks:  " + ", ".join(f"{k[7:]} {tl[k]:.0f}" for k in tl if k.startswith("tasks: ")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2, help="local[N]")
    parser.add_argument("--batches", type=int, default=8, help="micro-batches to split the backlog into")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds (after one warm-up pass of each mode)")
    parser.add_argument("--read-path", default="native", choices=["native", "python"])
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="another source option for both modes (e.g. maxEntriesPerTask=200)")
    parser.add_argument("--compare-packing", action="store_true",
                        help="each round also with smallBatchTasks=0 (one task per partition), before/after in one run")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    timeline_file = Path(tempfile.mkdtemp(prefix="bench-timeline-")) / "tasks.jsonl"
    os.environ[TIMELINE_ENV] = str(timeline_file)
    from pyspark.sql import SparkSession

    with LocalBroker() as broker:
        admin = TopicAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-timeline-{int(time.time())}")
        admin.create_partitioned_topic(topic, args.partitions)
        t0 = time.perf_counter()
        produce(broker.service_url, str(topic), args.messages, args.size)
        print(f"produced {args.messages:,} messages of {args.size} B on {args.partitions} partitions in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        entries = sum(int(s["numberOfEntries"]) for s in admin.partitioned_internal_stats(topic).values())
        per_trigger = max(args.partitions, entries // args.batches)
        spark = (SparkSession.builder.master(f"local[{args.cores}]").config("spark.ui.enabled", "true")
                 .config("spark.ui.port", "0").config("spark.driver.memory", "2g")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.streaming.numRecentProgressUpdates", "10000").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        spark.dataSource.register(timed_source())
        rest = SparkRest(str(spark.sparkContext.uiWebUrl), spark.sparkContext.applicationId)
        extra = dict(kv.split("=", 1) for kv in args.option)

        def run(mode: str, variant: dict[str, str] | None = None) -> dict[str, Any]:
            timeline_file.write_text("")
            reader = (spark.readStream.format("pulsar-throttled-timed").option("service.url", broker.service_url)
                      .option("admin.url", broker.admin_url).option("topic", str(topic))
                      .option("startingOffsets", "earliest").option("readPath", args.read_path)
                      .options(**{**extra, **(variant or {})}))
            if mode == "batches":
                reader = reader.option("maxEntriesPerTrigger", str(per_trigger))
            sent_before = messages_out(admin, topic)
            t_start = time.time()
            q = reader.load().writeStream.format("noop").trigger(availableNow=True).start()
            q.awaitTermination()
            progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
            rows = sum(p["numInputRows"] for p in progress)
            assert rows == args.messages, rows
            tasks = [json.loads(line) for line in timeline_file.read_text().splitlines() if line]
            try:
                jobs = rest.jobs_between(t_start, time.time())
            except OSError as e:  # a UI that does not answer in time on a loaded machine: Python's side only
                print(f"  (Spark's REST API did not answer: {e}; task launch times left out)", flush=True)
                jobs = []
            out: dict[str, Any] = {"timelines": batch_timelines(progress, tasks, jobs), "batches": len(progress)}
            # Messages the broker dispatched to the query's readers per message delivered: read-ahead past a range's
            # end that the next batch's task did not take up (its reader parked in another worker) costs a second read.
            time.sleep(1.0)  # the broker's stats are refreshed on an interval
            out["dispatched"] = (messages_out(admin, topic) - sent_before) / rows
            if mode == "batches":
                out["rate"] = steady_rate(q.recentProgress)[0]
            else:
                d = progress[0]["durationMs"]
                out["rate"] = rows / (d["addBatch"] / 1000)
                out["rate_trigger"] = rows / (d["triggerExecution"] / 1000)
            return out

        print(f"{entries:,} entries: micro-batches of maxEntriesPerTrigger={per_trigger}; readPath={args.read_path}; "
              f"load before: {os.getloadavg()[0]:.2f}", flush=True)
        variants: dict[str, dict[str, str]] = {"as given": {}}
        if args.compare_packing:
            variants = {"smallBatchTasks=0 (one task per partition)": {"smallBatchTasks": "0"}, **variants}
        for variant in variants.values():
            run("batches", variant)
            run("one", variant)  # warm-up passes
        batched: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        one: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for r in range(args.rounds):
            for label, variant in variants.items():
                batched[label].append(run("batches", variant))
                one[label].append(run("one", variant))
                b, o = batched[label][-1], one[label][-1]
                print(f"round {r + 1}, {label} (load {os.getloadavg()[0]:.2f}): micro-batched steady {b['rate']:,.0f} msg/s "
                      f"({b['batches']} batches); one batch {o['rate']:,.0f} msg/s over addBatch, {o['rate_trigger']:,.0f} "
                      f"over its trigger; ratio {b['rate'] / o['rate']:.2f}; dispatched per delivered message: micro-batched "
                      f"{b['dispatched']:.2f}, one batch {o['dispatched']:.2f}", flush=True)
                print_timeline("micro-batch (median of all but the first)", median_timeline(b["timelines"][1:]))
                print_timeline("one batch", o["timelines"][0])
        spark.stop()
        admin.close()

    for label in variants:
        steady = statistics.median(b["rate"] for b in batched[label])
        once = statistics.median(o["rate"] for o in one[label])
        ratios = [b["rate"] / o["rate"] for b, o in zip(batched[label], one[label], strict=True)]
        triggers = [t["trigger"] for b in batched[label] for t in b["timelines"][1:]]
        tasks = [t["tasks"] for b in batched[label] for t in b["timelines"][1:]]
        print(f"{label}: readPath={args.read_path}, local[{args.cores}], {args.partitions} partitions, {args.messages:,} x "
              f"{args.size} B: micro-batch trigger to commit median {statistics.median(triggers):.0f} ms "
              f"({statistics.median(tasks):.0f} tasks); micro-batched steady {steady:,.0f} msg/s; one batch (addBatch) "
              f"{once:,.0f} msg/s; ratio per round {', '.join(f'{x:.2f}' for x in ratios)} "
              f"(median {statistics.median(ratios):.2f}; target >= 0.9); load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
