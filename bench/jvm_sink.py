"""This source's sink (`format("pulsar-throttled")`, deliveryGuarantee atLeastOnce and effectivelyOnce, each on the Python
and on the native sender: option sendPath) vs StreamNative's
JVM sink (pulsar-spark, `format("pulsar")`), in one run, on the same local broker: rows a second, CPU per row, memory.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/jvm_sink.py \\
        --jar /tmp/pulsar-spark-bench/pulsar-spark-connector_2.12-3.5.6-SNAPSHOT-local.jar \\
        --spark35-python /tmp/pulsar-spark-bench/spark35/bin/python [--rows 2000000] [--partitions 4] [--rounds 2]

(bench/build_jvm_connector.sh builds the jar and the Spark 3.5 venv and prints those two arguments.) Without --jar,
only this source's sink runs.

Each side is one SparkSession (`local[--cores]`) in a process of its own, kept up for the whole run (warm JVMs):
this source on this venv's PySpark, the JVM sink on Spark 3.5. Each pass writes `df.write...save()` of
`spark.range(rows, numPartitions=--tasks)` with a `value` of `--size` bytes (a 12-digit row number and padding, so
every payload differs), into a new `--partitions`-partition topic; the effectively-once passes into a namespace with
deduplication on. Every producer setting is each sink's default (ours: Pulsar's batching defaults; pulsar-spark:
its own 100 ms batching delay and 5 Mi messages a batch, which it sets itself).

Figures per pass: rows a second (rows over the wall time of save(), job start-up included); CPU per row (user +
system time of the side's process tree, its JVM and Python workers, sampled every 0.2 s, over the rows; the broker
is not in it); peak RSS of the tree, and for ours the peak RSS of one Python worker (a write task runs in one).
Each pass's topic is checked to hold exactly `rows` messages (the broker's msgInCounter). One warm-up pass per
kind, then `--rounds` rounds alternating the kinds, each round starting one kind later (so no kind always runs
first or last in a round); medians and ratios against the JVM sink at the end, with the load average (other
processes on the machine slow both sides alike only if the load is steady: it is printed per pass). CPU per row is
also given for PySpark's Python daemons and workers alone.

Two baselines, on our side's session and without Pulsar, show where a write's time goes (`--only noop --only count`
beside the sinks): `noop`, Spark's noop sink (the input made and dropped: what every sink pays), and `count`, a
Python Arrow writer that only counts the batches PySpark hands it (what the hand-over to a Python writer adds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import psutil
import requests

from pulsar_throttled_source.local_broker import LocalBroker

RESULT = "SINK_RESULT "
# Our kinds: (deliveryGuarantee, sendPath): the Python sender (pulsar-client, a Python callback per message) and the
# native one (native/src/sender.c: a C callback per message).
SENDERS = {"atLeastOnce-python": ("atLeastOnce", "python"), "effectivelyOnce-python": ("effectivelyOnce", "python"),
           "atLeastOnce-native": ("atLeastOnce", "native"), "effectivelyOnce-native": ("effectivelyOnce", "native")}
# Baselines on our side's session, no Pulsar: Spark's noop sink (the input made and dropped: what every sink pays) and
# a Python Arrow writer that only counts its batches (what PySpark's hand-over of Arrow batches to a Python writer adds).
BASELINES = {"noop": "noop", "count": "bench-count"}

# Run by each side's python: one SparkSession, then one write per JSON line read from stdin.
SIDE_SCRIPT = r'''
import json, sys, time
from pyspark.sql import SparkSession

cores, jar = sys.argv[1], sys.argv[2]
if not jar:  # our side (PySpark 4): the count baseline's data source
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Counted(WriterCommitMessage):
        def __init__(self, rows):
            self.rows = rows

    class CountWriter(DataSourceArrowWriter):
        """The baseline kind 'count': a Python Arrow writer that only counts the batches PySpark hands it."""

        def __init__(self, expected):
            self.expected = expected

        def write(self, iterator):
            return Counted(sum(batch.num_rows for batch in iterator))

        def commit(self, messages):
            got = sum(m.rows for m in messages)
            if got != self.expected:
                raise RuntimeError(f"the count writer got {got} rows, expected {self.expected}")

    class CountSink(DataSource):
        @classmethod
        def name(cls):
            return "bench-count"

        def writer(self, schema, overwrite):
            return CountWriter(int(self.options["rows"]))

builder = (SparkSession.builder.master(f"local[{cores}]").config("spark.ui.enabled", "false")
           .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false"))
if jar:
    builder = builder.config("spark.jars", jar)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("WARN")
if not jar:
    spark.dataSource.register(CountSink)
for line in sys.stdin:
    job = json.loads(line)
    if job.get("quit"):
        break
    pad = job["size"] - 12
    df = spark.range(job["rows"], numPartitions=job["tasks"]).selectExpr(
        f"cast(concat(lpad(cast(id as string), 12, '0'), repeat('x', {pad})) as binary) as value")
    t0 = time.time()
    df.write.format(job["format"]).options(**job["options"]).mode("append").save()
    print("SINK_RESULT " + json.dumps({"seconds": time.time() - t0}), flush=True)
spark.stop()
'''


class Side:
    """One side's SparkSession process; `write()` runs one pass and returns its figures."""

    def __init__(self, python: str, cores: int, jar: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
        env["PYSPARK_PYTHON"] = python
        self.proc = subprocess.Popen([python, "-c", SIDE_SCRIPT, str(cores), jar], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def write(self, job: dict[str, Any]) -> dict[str, Any]:
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        sampler = TreeSampler(self.proc.pid)
        sampler.start()
        stdin.write(json.dumps(job) + "\n")
        stdin.flush()
        try:
            for line in stdout:
                if line.startswith(RESULT):
                    return {**json.loads(line[len(RESULT):]), **sampler.stop()}
                sys.stderr.write(line)
        finally:
            sampler.stop()
        raise RuntimeError(f"the side's process ended (exit code {self.proc.wait()}) before reporting a pass")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=120)


class TreeSampler(threading.Thread):
    """CPU time and RSS of a process and its descendants, sampled every 0.2 s until stop()."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.base = {p.pid: _cpu(p) for p in self._tree()}
        self.last: dict[int, float] = dict(self.base)
        self.python: set[int] = set()  # PySpark's Python daemons and workers
        self.peak_rss = 0
        self.peak_worker_rss = 0
        self._done = threading.Event()
        self._result: dict[str, Any] | None = None

    def _tree(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def sample(self) -> None:
        rss = 0
        for p in self._tree():
            try:
                self.last[p.pid] = _cpu(p)
                mem = p.memory_info().rss
                if "pyspark.daemon" in " ".join(p.cmdline()):
                    self.python.add(p.pid)
                    if p.ppid() != self.root.pid:  # a worker, not the daemon
                        self.peak_worker_rss = max(self.peak_worker_rss, mem)
                rss += mem
            except psutil.NoSuchProcess:
                continue
        self.peak_rss = max(self.peak_rss, rss)

    def run(self) -> None:
        while not self._done.wait(0.2):
            self.sample()

    def stop(self) -> dict[str, Any]:
        if self._result is None:
            self._done.set()
            self.join()
            self.sample()
            used = {pid: v - self.base.get(pid, 0.0) for pid, v in self.last.items()}
            self._result = {"cpu_s": sum(used.values()), "python_cpu_s": sum(used[pid] for pid in self.python if pid in used),
                            "peak_rss": self.peak_rss, "peak_worker_rss": self.peak_worker_rss}
        return self._result


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def messages_in(admin_url: str, topic: str) -> int:
    path = topic.replace("persistent://", "persistent/")
    stats = requests.get(f"{admin_url}/admin/v2/{path}/partitioned-stats", timeout=60).json()
    return int(stats["msgInCounter"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jar", default="", help="pulsar-spark's shaded jar (Scala 2.12, Spark 3.5); none: ours only")
    parser.add_argument("--spark35-python", default="", help="a python whose pyspark is 3.5 (with --jar)")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4, help="the topic's")
    parser.add_argument("--cores", type=int, default=2, help="local[N] for both sides")
    parser.add_argument("--tasks", type=int, default=2, help="Spark partitions of the DataFrame (write tasks)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jvm-option", action="append", default=[],
                        help="K=V, an option for pulsar-spark's sink only (e.g. pulsar.producer.blockIfQueueFull=true)")
    parser.add_argument("--only", choices=(*SENDERS, "jvm", *BASELINES), action="append", help="run only these kinds (repeatable)")
    args = parser.parse_args()
    kinds = args.only or [*SENDERS, *(["jvm"] if args.jar else [])]

    with LocalBroker() as broker:
        admin = broker.admin_url
        requests.put(f"{admin}/admin/v2/namespaces/public/bench-eo", json={}, timeout=60)
        requests.post(f"{admin}/admin/v2/namespaces/public/bench-eo/deduplication", json=True, timeout=60).raise_for_status()
        sides = {"ours": Side(sys.executable, args.cores, "")}
        if "jvm" in kinds:
            sides["jvm"] = Side(args.spark35_python, args.cores, args.jar)
        passes = 0

        def run(kind: str, rows: int) -> dict[str, Any]:
            nonlocal passes
            passes += 1
            if kind in BASELINES:
                r = sides["ours"].write({"format": BASELINES[kind], "options": {"rows": str(rows)}, "rows": rows,
                                         "size": args.size, "tasks": args.tasks})
                return report(kind, rows, r)
            guarantee, send_path = SENDERS.get(kind, ("", ""))
            namespace = "bench-eo" if guarantee == "effectivelyOnce" else "default"
            topic = f"persistent://public/{namespace}/bench-sink-{int(time.time())}-{passes}"
            path = topic.replace("persistent://", "persistent/")
            requests.put(f"{admin}/admin/v2/{path}/partitions", json=args.partitions, timeout=60).raise_for_status()
            options = {"service.url": broker.service_url, "admin.url": admin, "topic": topic}
            if kind != "jvm":
                options.update(deliveryGuarantee=guarantee, sendPath=send_path)
            else:
                options.update(dict(o.split("=", 1) for o in args.jvm_option))
            if guarantee == "effectivelyOnce":
                options["sinkId"] = f"bench-{passes}"
            side = sides["jvm" if kind == "jvm" else "ours"]
            r = side.write({"format": "pulsar" if kind == "jvm" else "pulsar-throttled", "options": options, "rows": rows,
                            "size": args.size, "tasks": args.tasks})
            got = messages_in(admin, topic)
            if got != rows:
                raise RuntimeError(f"{kind}: {got:,} messages in {topic}, expected {rows:,}")
            return report(kind, rows, r)

        def report(kind: str, rows: int, r: dict[str, Any]) -> dict[str, Any]:
            r.update(kind=kind, rows=rows, rate=rows / r["seconds"], cpu_us=r["cpu_s"] / rows * 1e6,
                     python_us=r["python_cpu_s"] / rows * 1e6)
            print(f"  {kind:>22}: {r['rate']:>10,.0f} rows/s, {r['cpu_us']:5.1f} us CPU/row ({r['python_us']:4.1f} in Python "
                  f"workers), peak RSS {r['peak_rss'] / 2**20:,.0f} MiB"
                  + (f" (a Python worker {r['peak_worker_rss'] / 2**20:,.0f} MiB)" if r["peak_worker_rss"] else "")
                  + f", load {os.getloadavg()[0]:.1f}", flush=True)
            return r

        try:
            print("warm-up", flush=True)
            for kind in kinds:
                run(kind, min(args.rows, 200_000))
            results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
            for r in range(args.rounds):
                print(f"round {r + 1}: {args.rows:,} rows of {args.size} B, {args.tasks} tasks, {args.partitions} partitions, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:  # each round starts one kind later
                    results[kind].append(run(kind, args.rows))
        finally:
            for side in sides.values():
                side.close()

    print(f"medians over {args.rounds} rounds ({args.rows:,} rows, local[{args.cores}], {args.tasks} tasks):")
    med = {k: {f: statistics.median(x[f] for x in v) for f in ("rate", "cpu_us", "python_us", "peak_rss", "peak_worker_rss")}
           for k, v in results.items()}
    for kind, m in med.items():
        line = f"  {kind:>22}: {m['rate']:>10,.0f} rows/s, {m['cpu_us']:5.1f} us CPU/row ({m['python_us']:4.1f} Python), peak RSS {m['peak_rss'] / 2**20:,.0f} MiB"
        if "jvm" in med and kind not in ("jvm", *BASELINES):
            line += f"; x JVM: rate {m['rate'] / med['jvm']['rate']:.2f}, CPU/row {m['cpu_us'] / med['jvm']['cpu_us']:.2f}"
        print(line)
    for sender in ("python", "native"):
        once, least = f"effectivelyOnce-{sender}", f"atLeastOnce-{sender}"
        if once in med and least in med:
            print(f"  {sender} sender: effectivelyOnce costs {1 - med[once]['rate'] / med[least]['rate']:.1%} of atLeastOnce's rate")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
