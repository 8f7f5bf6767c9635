"""StreamNative's JVM Pulsar connector for Spark (pulsar-spark, `format("pulsar")`) vs this source's native read
path, in one run, on the same local broker and the same topic.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/jvm_connector.py \\
        --jar /tmp/pulsar-spark/target/pulsar-spark-connector_2.12-3.5.6-SNAPSHOT-local.jar \\
        --spark35-python /tmp/spark35/bin/python [--messages 10000000] [--partitions 4] [--rounds 1]

A backlog of `--messages` x `--size` B (batched by the producer, as bench/steady_state.py produces it) on a
`--partitions`-partition topic is drained on `--cores` cores (`local[N]`, noop sink) in ~`--batches` micro-batches
by each side:

- this source, in this process, on Spark 4: `readPath=native`, `maxEntriesPerTrigger` = entries / batches, trigger
  AvailableNow (exactly as bench/steady_state.py runs it);
- the JVM connector, in a subprocess on Spark 3.5 (`--spark35-python`: a venv with `pip install "pyspark==3.5.*"`, whose
  jars are Scala 2.12), with `spark.jars` = `--jar`. Its only per-trigger limit is `maxBytesPerTrigger` (it has no
  entry or message limit; it turns bytes into entries per partition from the ledgers' average entry size), set to the
  topic's stored bytes / batches. It does not implement SupportsTriggerAvailableNow, so under AvailableNow Spark
  ignores its read limit and reads the whole backlog in one batch: the batched drain therefore runs with
  `processingTime="0 seconds"` and is stopped once every message was read. A second JVM pass per round runs
  AvailableNow with no limit (one batch: how the earlier 407k msg/s figure was taken), reported end to end only; this
  source also drains the backlog as one unlimited AvailableNow batch per round (like for like, issue 44).
  With maxBytesPerTrigger the connector reads each batch's last entry again as the first of the next batch (with
  the producer's batching, ~1,000 messages per partition per batch boundary are read twice: 120,145 rows for 100,000
  messages in 7 batches in a check with a memory sink). Its rates are reported in distinct messages a second (rows
  a second x messages / rows), and its rows a second beside them.

Steady state, as in bench/steady_state.py: the rows of every batch but the first that read rows over the time from the
end of that first batch to the end of the last. End to end (both sides alike): messages over the time from just before
the query starts to the end of its last batch that read rows (from the progress reports). One warm-up pass each, then
`--rounds` measured rounds alternating the sides; the JVM subprocess stays up between passes (one warm JVM).

How the connector jar was built (the build is not part of this repository):

    # git mirror of github.com/streamnative/pulsar-spark, branch neng/upgrade-spark-3.5.6 at
    # 8df8804dbf699b26eb1047a17f91a805e497e8c4 ("add jackson dependency to address test failure"; version
    # 3.5.6-SNAPSHOT, Spark 3.5.6, Pulsar client 4.0.5; master at 59066fc is still Spark 3.4.1)
    git clone <mirror> /tmp/pulsar-spark && cd /tmp/pulsar-spark && git checkout 8df8804dbf69
    # The branch builds for Scala 2.13 only; pyspark 3.5 from PyPI runs Scala 2.12. One local pom.xml patch: a
    # provided dependency on org.scala-lang.modules:scala-collection-compat_2.12:2.7.0 (scala.jdk.CollectionConverters
    # on 2.12; Spark 3.5's jars ship that same library), added at the top of <dependencies>. Then:
    mvn -q -B -Dmaven.test.skip=true -Dscala.version=2.12.18 -Dscala.binary.version=2.12 -Dspark.version=3.5.6 \\
        -Dmaven.javadoc.skip=true -Dlicense.skip=true -Dscalastyle.skip=true package
    # A second local patch: the shade plugin's relocation of javax.xml (to org.apache.pulsar.shade.javax.xml) is removed.
    # With it the shaded admin client never answers (every PulsarAdmin call, even topics().getList, times out after
    # 60 s: Jersey's JDK javax.xml providers are relocated to classes that do not exist), and the connector needs the
    # admin client for maxBytesPerTrigger (ledger sizes from internal stats). The same pulsar-client-all 4.0.5 unshaded,
    # on Spark 3.5's classpath, answers in ~0.6 s. Rebuilt with the same mvn command.
    # the shaded jar keeps the pom's hard-coded artifact name (_2.13) though it is compiled for 2.12; copied as
    cp target/pulsar-spark-connector_2.13-3.5.6-SNAPSHOT.jar target/pulsar-spark-connector_2.12-3.5.6-SNAPSHOT-local.jar
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from typing import IO, Any

from steady_state import steady_rate
from throughput import produce
from topic_admin import TopicAdmin

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

RESULT = "JVM_RESULT "

# Run by the Spark 3.5 python: starts one SparkSession with the connector jar, then runs one pass per line read from
# stdin ("batches" or "once") and prints each pass's figures as one JSON line after RESULT.
JVM_SCRIPT = r'''
import json, sys, time
from datetime import datetime
from pyspark.sql import SparkSession

service_url, admin_url, topic, messages, max_bytes, jar, cores = sys.argv[1:8]
messages, max_bytes = int(messages), int(max_bytes)
spark = (SparkSession.builder.master(f"local[{cores}]").config("spark.jars", jar).config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.streaming.numRecentProgressUpdates", "10000").getOrCreate())
spark.sparkContext.setLogLevel("WARN")


def ends(p):
    started = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + p["durationMs"].get("triggerExecution", 0) / 1000


def run(mode):
    reader = (spark.readStream.format("pulsar").option("service.url", service_url).option("admin.url", admin_url)
              .option("topic", topic).option("startingOffsets", "earliest"))
    if mode == "batches":
        reader = reader.option("maxBytesPerTrigger", str(max_bytes))
    writer = reader.load().writeStream.format("noop")
    t0 = time.time()
    if mode == "batches":
        q = writer.trigger(processingTime="0 seconds").start()
        # Every message read (the connector reads each batch's boundary entry twice, so rows reach the message
        # count early) and a trigger that found no new data: the backlog is drained.
        deadline = time.monotonic() + 1800
        while True:
            if q.exception() is not None:
                raise RuntimeError(f"the JVM connector's query failed: {q.exception()}")
            status = q.status
            if sum(p["numInputRows"] for p in q.recentProgress) >= messages and not status["isDataAvailable"] \
                    and not status["isTriggerActive"]:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        q.stop()
    else:
        q = writer.trigger(availableNow=True).start()
        q.awaitTermination()
    progress = list(q.recentProgress)
    batches = [p for p in progress if p["numInputRows"] > 0]
    rows = sum(p["numInputRows"] for p in batches)
    out = {"mode": mode, "rows": rows, "batches": len(batches), "end_to_end": rows / (ends(batches[-1]) - t0),
           "batch_rows": [p["numInputRows"] for p in batches],
           "phases_ms": {k: sorted(p["durationMs"].get(k, 0) for p in batches[1:])[len(batches[1:]) // 2]
                         for k in batches[-1]["durationMs"]} if len(batches) > 1 else {}}
    if len(batches) >= 3:
        out["steady"] = sum(p["numInputRows"] for p in batches[1:]) / (ends(batches[-1]) - ends(batches[0]))
    return out


for line in sys.stdin:
    mode = line.strip()
    if mode == "quit":
        break
    print("JVM_RESULT " + json.dumps(run(mode)), flush=True)
spark.stop()
'''


class JvmSide:
    """The Spark 3.5 subprocess running the JVM connector; `run(mode)` makes one pass and returns its figures."""

    def __init__(self, python: str, jar: str, service_url: str, admin_url: str, topic: str, messages: int, max_bytes: int,
                 cores: int) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
        env["PYSPARK_PYTHON"] = python
        self.proc = subprocess.Popen([python, "-c", JVM_SCRIPT, service_url, admin_url, topic, str(messages), str(max_bytes),
                                      jar, str(cores)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def run(self, mode: str) -> dict[str, Any]:
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(mode + "\n")
        stdin.flush()
        for line in stdout:
            if line.startswith(RESULT):
                return dict(json.loads(line[len(RESULT):]))
            sys.stderr.write(line)
        raise RuntimeError(f"the JVM connector's process ended (exit code {self.proc.wait()}) before reporting a {mode} pass")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=120)


def progress_end(p: Any) -> float:
    started = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + p["durationMs"].get("triggerExecution", 0) / 1000


def median_phases(batches: list[Any]) -> dict[str, int]:
    """The median of each phase Spark times (durationMs: latestOffset, addBatch, commitOffsets, ...) over every batch
    that read rows but the first."""
    rest = batches[1:]
    return {k: sorted(int(p["durationMs"].get(k, 0)) for p in rest)[len(rest) // 2] for k in rest[-1]["durationMs"]} if rest else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jar", required=True, help="the pulsar-spark connector's shaded jar (Scala 2.12, Spark 3.5)")
    parser.add_argument("--spark35-python", required=True, help="a python whose pyspark is 3.5")
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2, help="local[N] for both sides")
    parser.add_argument("--batches", type=int, default=20, help="micro-batches to split the backlog into")
    parser.add_argument("--rounds", type=int, default=1, help="measured rounds (after one warm-up pass each)")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE",
                        help="each round also drains with these options of ours (both passes), e.g. maxTasksPerTrigger=2")
    args = parser.parse_args()
    variant = dict(kv.split("=", 1) for kv in args.variant)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    with LocalBroker() as broker:
        admin = TopicAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-jvm-{int(time.time())}")
        admin.create_partitioned_topic(topic, args.partitions)
        t0 = time.perf_counter()
        produce(broker.service_url, str(topic), args.messages, args.size)
        print(f"produced {args.messages:,} messages of {args.size} B on {args.partitions} partitions in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        stats = admin.partitioned_internal_stats(topic)
        entries = sum(int(s["numberOfEntries"]) for s in stats.values())
        stored = sum(int(s["totalSize"]) for s in stats.values())
        per_trigger = max(args.partitions, entries // args.batches)
        max_bytes = max(1, stored // args.batches)
        print(f"{entries:,} entries, {stored:,} bytes stored: ours maxEntriesPerTrigger={per_trigger}, "
              f"JVM maxBytesPerTrigger={max_bytes}", flush=True)

        spark = (SparkSession.builder.master(f"local[{args.cores}]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.streaming.numRecentProgressUpdates", "10000").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")

        def run_ours(mode: str = "batches", extra: dict[str, str] | None = None) -> dict[str, Any]:
            """One drain by this source: in micro-batches of `per_trigger` entries, or ("once") as one unlimited
            AvailableNow batch, as the JVM connector's "once" pass reads; `extra`: more options (--variant)."""
            t = time.time()
            reader = (spark.readStream.format("pulsar-throttled").option("service.url", broker.service_url)
                      .option("admin.url", broker.admin_url).option("topic", str(topic)).option("startingOffsets", "earliest")
                      .option("readPath", "native").options(**(extra or {})))
            if mode == "batches":
                reader = reader.option("maxEntriesPerTrigger", str(per_trigger))
            q = reader.load().writeStream.format("noop").trigger(availableNow=True).start()
            q.awaitTermination()
            batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
            rows = sum(p["numInputRows"] for p in batches)
            assert rows == args.messages, rows
            out = {"end_to_end": rows / (progress_end(batches[-1]) - t), "batches": len(batches),
                   "phases_ms": median_phases(batches)}
            if mode == "batches":
                out["steady"], out["batches"] = steady_rate(q.recentProgress)
            return out

        jvm = JvmSide(args.spark35_python, args.jar, broker.service_url, broker.admin_url, str(topic), args.messages,
                      max_bytes, args.cores)

        def run_jvm(mode: str) -> dict[str, Any]:
            r = jvm.run(mode)
            if r["rows"] != args.messages:
                print(f"JVM connector ({mode}): read {r['rows']:,} rows, not {args.messages:,}", flush=True)
            return r

        try:
            warm_ours = run_ours()
            warm_jvm = run_jvm("batches")
            print(f"warm-up: ours steady {warm_ours['steady']:,.0f} msg/s ({warm_ours['batches']} batches); JVM steady "
                  f"{warm_jvm.get('steady', float('nan')):,.0f} msg/s ({warm_jvm['batches']} batches)", flush=True)
            run_ours("once")
            run_jvm("once")  # the one-batch passes' warm-up
            if variant:
                run_ours("batches", variant)
            ours_variant: list[dict[str, Any]] = []
            ours_variant_once: list[dict[str, Any]] = []
            ours: list[dict[str, Any]] = []
            ours_once: list[dict[str, Any]] = []
            jvm_batches: list[dict[str, Any]] = []
            jvm_once: list[dict[str, Any]] = []
            for r in range(args.rounds):
                print(f"round {r + 1}: load {os.getloadavg()[0]:.2f}", flush=True)
                ours.append(run_ours())
                jvm_batches.append(run_jvm("batches"))
                ours_once.append(run_ours("once"))
                jvm_once.append(run_jvm("once"))
                print(f"round {r + 1}: ours steady {ours[-1]['steady']:,.0f} msg/s, end to end {ours[-1]['end_to_end']:,.0f} "
                      f"({ours[-1]['batches']} batches); JVM steady {jvm_batches[-1].get('steady', float('nan')):,.0f} msg/s, "
                      f"end to end {jvm_batches[-1]['end_to_end']:,.0f} ({jvm_batches[-1]['batches']} batches, rows per batch "
                      f"{min(jvm_batches[-1]['batch_rows']):,}..{max(jvm_batches[-1]['batch_rows']):,}); one unlimited "
                      f"AvailableNow batch end to end: ours {ours_once[-1]['end_to_end']:,.0f} msg/s, JVM "
                      f"{jvm_once[-1]['end_to_end']:,.0f} msg/s", flush=True)
                print(f"  median ms per batch (all but the first): ours {ours[-1]['phases_ms']}; JVM {jvm_batches[-1]['phases_ms']}",
                      flush=True)
                if variant:
                    ours_variant.append(run_ours("batches", variant))
                    ours_variant_once.append(run_ours("once", variant))
                    print(f"round {r + 1}, ours with {variant}: steady {ours_variant[-1]['steady']:,.0f} msg/s, end to end "
                          f"{ours_variant[-1]['end_to_end']:,.0f}; one batch end to end {ours_variant_once[-1]['end_to_end']:,.0f}; "
                          f"median ms per batch {ours_variant[-1]['phases_ms']}", flush=True)
        finally:
            jvm.close()
            spark.stop()
            admin.close()

    def distinct(x: dict[str, Any], key: str) -> float:
        """A JVM rate in distinct messages a second: its batched drain reads each batch's boundary entry twice, and
        Spark counts those rows too (the duplicates are spread evenly over the batches but the first)."""
        return float(x.get(key, float("nan"))) * args.messages / x["rows"]

    o_steady = statistics.median(x["steady"] for x in ours)
    o_e2e = statistics.median(x["end_to_end"] for x in ours)
    j_rows = statistics.median(x["rows"] for x in jvm_batches)
    j_steady_rows = statistics.median(x.get("steady", float("nan")) for x in jvm_batches)
    j_steady = statistics.median(distinct(x, "steady") for x in jvm_batches)
    j_e2e = statistics.median(distinct(x, "end_to_end") for x in jvm_batches)
    j_once = statistics.median(distinct(x, "end_to_end") for x in jvm_once)
    o_once = statistics.median(x["end_to_end"] for x in ours_once)
    print(f"pulsar-throttled, readPath=native (Spark 4, local[{args.cores}], {per_trigger} entries per trigger, "
          f"{ours[-1]['batches']} batches): steady {o_steady:>12,.0f} msg/s; end to end {o_e2e:>12,.0f} msg/s")
    print(f"pulsar-spark JVM connector (Spark 3.5, local[{args.cores}], maxBytesPerTrigger={max_bytes}, "
          f"{jvm_batches[-1]['batches']} batches): steady {j_steady:>12,.0f} msg/s; end to end {j_e2e:>12,.0f} msg/s "
          f"(distinct messages; it read {j_rows:,.0f} rows for {args.messages:,} messages, steady {j_steady_rows:,.0f} rows/s)")
    print(f"one unlimited AvailableNow batch, end to end: pulsar-throttled {o_once:>12,.0f} msg/s; pulsar-spark JVM connector "
          f"({jvm_once[-1]['rows']:,} rows) {j_once:>12,.0f} msg/s")
    print(f"ratio ours/JVM: steady {o_steady / j_steady:.2f} ({o_steady / j_steady_rows:.2f} on the JVM's rows/s); end to end "
          f"{o_e2e / j_e2e:.2f}; one batch each (like for like) {o_once / j_once:.2f}; our micro-batched end to end vs the "
          f"JVM's one batch {o_e2e / j_once:.2f}; our micro-batched end to end / our one batch {o_e2e / o_once:.2f}; load at "
          f"the end {os.getloadavg()[0]:.2f}")
    if variant:
        v_steady = statistics.median(x["steady"] for x in ours_variant)
        v_e2e = statistics.median(x["end_to_end"] for x in ours_variant)
        v_once = statistics.median(x["end_to_end"] for x in ours_variant_once)
        print(f"ours with {variant}: steady {v_steady:,.0f} msg/s ({v_steady / o_steady:.2f}x ours as given), end to end "
              f"{v_e2e:,.0f}; one batch {v_once:,.0f} ({v_once / o_once:.2f}x); ratio to the JVM: steady "
              f"{v_steady / j_steady:.2f}, end to end {v_e2e / j_e2e:.2f}, one batch each {v_once / j_once:.2f}; its micro-batched "
              f"steady / its one batch {v_steady / v_once:.2f}, ours as given {o_steady / o_once:.2f}")


if __name__ == "__main__":
    main()
