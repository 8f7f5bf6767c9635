"""Writes to Pulsar on a master with task retries, run by test_sink.py in its own process (the test session's Spark
runs `local[2]`, without task retries; a master cannot change inside a process): `local[2,4]`, up to 4 attempts per task.
On the older PySpark lines, compat_job.py calls write_runs in its own local[2,4] application (one per line).

Each run's task fails halfway through its rows on its first attempt, with a real error of Pulsar's: the rows named
in `fail_at` get a payload over the broker's maxMessageSize on attempt 0 (the producer answers MessageTooBig), and
their own payload on the retry. The sink sends nothing after a failed send and waits for what it sent, so the rows
before the failing one are persisted by the first attempt: written again by the retry under atLeastOnce, skipped
under effectivelyOnce.

Argument: a JSON object {"service_url", "admin_url", "runs": [...], "example" (optional)}, a run being
  {"mode": "batch", "topic", "guarantee", "sink_id", "rows", "fail_at": [ids], "send_path" (optional: option sendPath),
   "options" (optional: more of the write's options)}: spark.range(rows) in 2 partitions,
      key k<id % 7>, value r<id>;
  {"mode": "stream", "topic", "guarantee", "source", "checkpoint", "fail_at": [payloads], "max_entries"}: this source
      over `source` (Trigger.AvailableNow; maxEntriesPerTrigger=max_entries, if given, makes several micro-batches on
      PySpark 4.2+) written back without renaming, the value passed through the UDF.
Prints one JSON line per run when it is done. Then `example`, if given (test_sink.py's enrich test): the arguments of
examples/enrich_topic.py, whose main runs in this application after the runs (it takes this session, getOrCreate, and
stops it when done), as compat_job.py runs the spark-submit example: one Spark start serves both tests.
Run with PYSPARK_PYTHON set to the venv's python.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from job_session import job_session

EXAMPLES = Path(__file__).parents[3] / "examples"
OVERSIZE = 200_000  # bytes: over the test broker's maxMessageSize (131072, tests/conftest.py)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    spark = job_session("local[2,4]", "pulsar-throttled-sink-retry-job")

    spark.sparkContext.setLogLevel("ERROR")
    try:
        write_runs(spark, spec)
        if spec.get("example") is not None:
            sys.path.insert(0, str(EXAMPLES))
            from enrich_topic import main as enrich_main

            enrich_main(spec["example"])
    finally:
        spark.stop()
    return 0


def write_runs(spark, spec: dict) -> None:
    """The runs of `spec` on `spark` (a session on a master with task retries, such as local[2,4]); also called by
    compat_job.py, whose one application per older PySpark line reads and writes."""
    from pyspark.sql import functions as F

    connection = {"service.url": spec["service_url"], "admin.url": spec["admin_url"]}
    for run in spec["runs"]:
        fail_at = set(run["fail_at"])

        @F.udf("binary")
        def payload(ident, value=None):
            from pyspark import TaskContext

            if TaskContext.get().attemptNumber() == 0 and (ident if value is None else bytes(value).decode()) in fail_at:
                return b"x" * OVERSIZE
            return f"r{ident}".encode() if value is None else bytes(value)

        options = {**connection, "topic": run["topic"], "deliveryGuarantee": run["guarantee"]}
        if run.get("sink_id"):
            options["sinkId"] = run["sink_id"]
        if run.get("send_path"):
            options["sendPath"] = run["send_path"]
        options.update(run.get("options", {}))
        if run["mode"] == "batch":
            df = spark.range(run["rows"], numPartitions=2).select(F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
                                                                  payload("id").alias("value"))
            df.write.format("pulsar-throttled").options(**options).mode("append").save()
        else:
            reader = spark.readStream.format("pulsar-throttled").options(**connection, topic=run["source"])
            if run.get("max_entries"):  # several micro-batches (PySpark 4.2+: AvailableNow reads them all)
                reader = reader.option("maxEntriesPerTrigger", str(run["max_entries"]))
            src = reader.option("startingOffsets", "earliest").load()
            out = src.withColumn("value", payload(F.lit(None), "value"))
            query = (out.writeStream.format("pulsar-throttled").options(**options)
                     .option("checkpointLocation", run["checkpoint"]).trigger(availableNow=True).start())
            query.awaitTermination()
        print(json.dumps({"done": run["topic"]}), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
