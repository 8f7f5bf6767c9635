"""Run by test_spark_versions.py with an older PySpark (4.0/4.1): a throttled processing-time read
stopped and restarted on one checkpoint, then Trigger.AvailableNow followed by a processing-time
catch-up on a second topic. Prints one RESULT line of JSON; the test checks it against what it sent."""

import json
import sys
import time
from collections.abc import Callable

import pyspark
from pyspark.sql import SparkSession

service_url, admin_url, topic, an_topic, workdir, total, an_total = sys.argv[1:8]
spark = (SparkSession.builder.master("local[2]").appName("compat").config("spark.ui.enabled", "false")
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
        while not done(sum(p["numInputRows"] for p in query.recentProgress)) and time.time() < deadline:
            time.sleep(0.5)
        query.stop()
    print(f"query on {name} into {out}: {time.time() - began:.1f} s", file=sys.stderr, flush=True)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


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
print("RESULT " + json.dumps(result), flush=True)
spark.stop()
