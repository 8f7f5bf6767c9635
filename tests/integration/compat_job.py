"""Run by test_spark_versions.py with an older PySpark (4.0/4.1): a throttled processing-time read
stopped and restarted on one checkpoint, then Trigger.AvailableNow followed by a processing-time
catch-up on a second topic; then (issue 39) a throttled query over a third topic watched by the
quickstart notebook's own watch cell (its source, run as it is) and left idle, with the metrics
listener (pulsar_throttled_source.metrics) exporting each progress event. Prints one RESULT line of
JSON; the test checks it against what it sent. Last (issue 42), in the same Spark application, the spark-submit
example's own main (examples/throttled_ingest.py --trigger availableNow, which calls
pulsar_throttled_source.catch_up) catches a fourth topic up into parquet and stops the session; what it prints
follows the RESULT line. Before it, the same application writes (issue 53, fault_jobs/sink_retry_job.py's runs: a batch
write and a stream, each task failing halfway on its first attempt, effectivelyOnce) and prints one WRITE line of JSON:
hence the master local[2,4] (up to 4 attempts per task), so one Spark application per line serves both the read and
the write checks. Runs on 4.3 too (pass sys.executable) when checking by hand."""

import contextlib
import io
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pyspark
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from pulsar_throttled_source.metrics import PulsarThrottleMetrics
from pulsar_throttled_source.query_progress import source_report

service_url, admin_url, topic, an_topic, progress_topic, catch_up_topic, workdir, total, an_total, notebook, writes = sys.argv[1:12]
spark = (SparkSession.builder.master("local[2,4]").appName("compat").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
print("Spark session ready", file=sys.stderr, flush=True)


def stream(name: str, per_partition_per_second: int):
    return (spark.readStream.format("pulsar-throttled")  # auto-registered: no register call
            .option("service.url", service_url).option("admin.url", admin_url).option("topic", name)
            .option("startingOffsets", "earliest").option("throttlingMode", "batch")
            .option("dispatchThrottlingRatePerTopicInMsg", str(per_partition_per_second))
            .option("quotaStatePath", f"{workdir}/quota.sqlite").load()
            .selectExpr("cast(value as string) as value"))


def rows(out: str) -> list[str]:
    try:
        return [r.value for r in spark.read.parquet(f"{workdir}/{out}").collect()]
    except Exception:  # nothing written yet
        return []


def run(name: str, out: str, trigger: dict, done: Callable[[int], bool] | None = None) -> list[int]:
    """One query into a parquet sink (exactly once by its own log); returns rows per non-empty batch.
    `done` gets the rows this query has read so far."""
    began = time.time()
    query = (stream(name, 5).writeStream.format("parquet").option("path", f"{workdir}/{out}")
             .option("checkpointLocation", f"{workdir}/{out}.ckpt").trigger(**trigger).start())
    if done is None:
        query.awaitTermination(240)
    else:
        deadline = time.time() + 240
        # A query that failed (a Python runner that missed Spark's connect-back) ends the wait at once.
        while query.isActive and not done(sum(p["numInputRows"] for p in query.recentProgress)) and time.time() < deadline:
            time.sleep(0.5)
        query.stop()
    print(f"query on {name} into {out}: {time.time() - began:.1f} s", file=sys.stderr, flush=True)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


class Compare(StreamingQueryListener):
    """Added after the metrics listener: Spark's bus calls them in order, so the registry holds this event's values."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry, self.pairs = registry, []

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        report = source_report(event.progress)
        if report is not None:
            labels = {"query_id": str(event.progress.id), "query_name": "", "source": "0"}
            self.pairs.append([[report["entriesBehindLatest"], report["secondsBehindLatest"]],
                               [self.registry.get_sample_value(f"pulsar_throttled_{name}_behind_latest", labels)
                                for name in ("entries", "seconds")]])

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def watch_and_idle() -> dict:
    """The notebook's watch cell over a throttled query (the names it reads: QUOTA, PARTITIONS,
    WATCH_SECONDS, df, query), then 4 s idle and caught up: no batch, no offset written."""
    registry = CollectorRegistry()
    listeners = [PulsarThrottleMetrics(registry=registry), Compare(registry)]
    for listener in listeners:
        spark.streams.addListener(listener)
    quota = 5
    df = (spark.readStream.format("pulsar-throttled").option("service.url", service_url).option("admin.url", admin_url)
          .option("topic", progress_topic).option("startingOffsets", "earliest").option("throttlingMode", "batch")
          .option("metadataRefreshIntervalMs", "200").option("dispatchThrottlingRatePerTopicInMsg", str(quota))
          .option("quotaStatePath", f"{workdir}/quota.sqlite").load())
    delivered: dict[int, tuple[int, int, int]] = {}  # batch -> rows, entries, value bytes (as the notebook's sink)

    def count_batch(batch, batch_id: int) -> None:
        rows = batch.selectExpr("length(value) as n").collect()
        delivered[batch_id] = (len(rows), len(rows), sum(r.n for r in rows))  # one message per entry

    checkpoint = Path(workdir) / "progress.ckpt"
    query = (df.writeStream.foreachBatch(count_batch).trigger(processingTime="1 second")
             .option("checkpointLocation", str(checkpoint)).start())
    cells = [c for c in json.loads(Path(notebook).read_text())["cells"] if c["cell_type"] == "code"]
    watch = next("".join(c["source"]) for c in cells if "source_report(" in "".join(c["source"]))
    printed = io.StringIO()
    # The names the cell reads, as the notebook's earlier cells define them.
    names = {"time": time, "query": query, "delivered": delivered, "QUOTA": quota, "PARTITIONS": 2, "WATCH_SECONDS": 120}
    with contextlib.redirect_stdout(printed):
        exec(watch, names)  # noqa: S102  (the notebook's cell, as a reader of the notebook runs it)
    batches, offsets = len(delivered), len(list((checkpoint / "offsets").iterdir()))
    time.sleep(4)  # idle and caught up
    watched = {"printed": printed.getvalue(),
               "reports": [source_report(p) for p in query.recentProgress if p["numInputRows"]],
               "idle": source_report(query.lastProgress), "idle_batches": len(delivered) - batches,
               "idle_offsets": len(list((checkpoint / "offsets").iterdir())) - offsets,
               "last_progress_json": query.lastProgress.json, "metric_pairs": listeners[1].pairs}
    query.stop()
    for listener in listeners:
        spark.streams.removeListener(listener)
    return watched


pt = {"processingTime": "200 milliseconds"}
result: dict = {"pyspark": pyspark.__version__}
# A throttled processing-time read, stopped part-way, then restarted on the same checkpoint.
result["first_run"] = run(topic, "main", pt, lambda n: n >= int(total) // 3)
read_before = len(rows("main"))
result["second_run"] = run(topic, "main", pt, lambda n: read_before + n >= int(total))
result["main"] = rows("main")
# Trigger.AvailableNow: one throttled batch on these versions; a processing-time run reads the rest.
result["available_now"] = run(an_topic, "an", {"availableNow": True})
result["after_available_now"] = rows("an")
result["catch_up"] = run(an_topic, "an", pt, lambda n: len(result["after_available_now"]) + n >= int(an_total))
result["an"] = rows("an")
result["watched"] = watch_and_idle()
print("RESULT " + json.dumps(result), flush=True)
# The writes (test_spark_versions' write test checks the topics); a failure here is reported, not raised, so the
# example below still runs for the read test.
sys.path.insert(0, str(Path(__file__).parent / "fault_jobs"))
from sink_retry_job import write_runs  # noqa: E402

try:
    write_runs(spark, json.loads(writes))
    print("WRITE " + json.dumps({"error": None}), flush=True)
except Exception:
    print("WRITE " + json.dumps({"error": traceback.format_exc()}), flush=True)
# The example as spark-submit runs it: its main takes this session (getOrCreate) and stops it when done.
sys.path.insert(0, str(Path(notebook).parent.parent / "examples"))
from throttled_ingest import main  # noqa: E402

main(["--service-url", service_url, "--admin-url", admin_url, "--topic", catch_up_topic, "--mode", "batch",
      "--topic-rate-msgs", "4", "--trigger", "availableNow", "--timeout", "120",
      "--checkpoint", f"{workdir}/catch_up.ckpt", "--output", f"{workdir}/catch_up",
      "--option", f"quotaStatePath={workdir}/quota.sqlite"])
