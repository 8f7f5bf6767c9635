"""Streams this source back into Pulsar through the sink, run by test_sink_failures.py in its own process group, which
the test kills with SIGKILL in the middle of a micro-batch and then runs again on the same checkpoints.

Argument: a JSON object {"service_url", "admin_url", "quota_path", "runs": [...], "secured": {...} or absent}, a run
being {"name", "source", "topic", "guarantee", "checkpoint", "max_entries", "quota", "options" (optional)}: this source over `source`
(Trigger.AvailableNow, maxEntriesPerTrigger=max_entries: several micro-batches) written back without renaming under
publishThrottlingRateInMsg=quota, so a micro-batch takes seconds to write. Every run's query starts at once.
Prints `PROGRESS <name> <batchId> <numInputRows>` when Spark reports a micro-batch (after its commit) and
`DONE <name>` when a query has read everything.

`secured` (the second run only): {"service_url", "admin_url", "topic", "options"}: a batch write and a stream of
`rows` rows to a TLS broker with token authentication, explain() printed; then `SECURED <mode> done`. The test reads
this process's output and event log for secrets.
"""

from __future__ import annotations

import json
import sys
import time

from job_session import job_session


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    spark = job_session("local[4]", "pulsar-throttled-sink-kill-job", spec.get("spark_conf"))
    from pyspark.sql.streaming import StreamingQueryListener

    spark.sparkContext.setLogLevel(spec.get("log_level", "ERROR"))

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's names)
            pass

        def onQueryProgress(self, event) -> None:  # noqa: N802
            p = event.progress
            if p.numInputRows:
                print(f"PROGRESS {p.name} {p.batchId} {p.numInputRows}", flush=True)

        def onQueryIdle(self, event) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event) -> None:  # noqa: N802
            pass

    spark.streams.addListener(Progress())
    connection = {"service.url": spec["service_url"], "admin.url": spec["admin_url"]}
    try:
        starts = {run["name"]: (lambda run=run: start(spark, connection, spec["quota_path"], run)) for run in spec["runs"]}
        running = {}
        for name, begin in starts.items():
            running[name] = begin()
            started(running[name])
        print("STARTED", flush=True)
        restarts = dict.fromkeys(starts, 0)
        while running:
            for name, query in list(running.items()):
                if query.isActive:
                    continue
                failure = query.exception()
                # Spark gives a Python worker a fixed 10 s to connect back: on a loaded machine a start can miss it.
                if failure is not None and "to connect back" in str(failure) and restarts[name] < 10:
                    restarts[name] += 1
                    print(f"RESTARTED {name} (a Python worker missed Spark's 10 s to connect back)", flush=True)
                    running[name] = starts[name]()
                    started(running[name])
                    continue
                if failure is not None:
                    raise failure
                print(f"DONE {name}", flush=True)
                del running[name]
            time.sleep(0.2)
        if spec.get("secured"):
            secured(spark, spec["secured"])
    finally:
        spark.stop()
    return 0


def start(spark, connection: dict, quota_path: str, run: dict):
    src = (spark.readStream.format("pulsar-throttled").options(**connection, topic=run["source"])
           .option("startingOffsets", "earliest").option("maxEntriesPerTrigger", str(run["max_entries"])).load())
    return (src.writeStream.queryName(run["name"]).format("pulsar-throttled")
            .options(**connection, topic=run["topic"], deliveryGuarantee=run["guarantee"],
                     publishThrottlingRateInMsg=str(run["quota"]), quotaStatePath=quota_path, **run.get("options", {}))
            .option("checkpointLocation", run["checkpoint"]).trigger(availableNow=True).start())


def started(query) -> None:
    """Until the query's sources are up: Spark gives a source runner a fixed 10 s to connect back, so one at a time."""
    while query.isActive and query.status["message"] == "Initializing sources":
        time.sleep(0.1)


def secured(spark, s: dict) -> None:
    """A batch write and a stream to the secured broker (its options hold the token and the trust file)."""
    from pyspark.sql import functions as F

    spark.sparkContext.setLogLevel("INFO")  # the secrecy check reads everything Spark logs from here on
    options = {"service.url": s["service_url"], "admin.url": s["admin_url"], "topic": s["topic"], **s["options"]}
    df = spark.range(s["rows"], numPartitions=2).select(F.concat(F.lit("k"), (F.col("id") % 5).cast("string")).alias("key"),
                                                       F.concat(F.lit("batch-"), F.col("id").cast("string")).cast("binary").alias("value"))
    df.write.format("pulsar-throttled").options(**options).mode("append").save()
    print("SECURED batch done", flush=True)
    stream = (spark.readStream.format("rate").option("rowsPerSecond", str(s["rows"])).load()
              .where(F.col("value") < s["rows"])
              .select(F.concat(F.lit("stream-"), F.col("value").cast("string")).cast("binary").alias("value")))
    query = (stream.writeStream.format("pulsar-throttled").options(**options)
             .option("checkpointLocation", s["checkpoint"]).trigger(processingTime="200 milliseconds").start())
    try:
        while not query.lastProgress or sum(p["numInputRows"] for p in query.recentProgress) < s["rows"]:
            query.awaitTermination(0.2)
            if query.exception():
                raise query.exception()  # type: ignore[misc]
        query.explain(True)
    finally:
        query.stop()
    print("SECURED stream done", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
