"""Run by test_release_artifacts.py with the Python of a fresh venv that has PySpark and the installed release
artifacts, from a folder outside the checkout: a throttled Trigger.AvailableNow query (the format auto-registered,
no register call, default readPath=auto) into foreachBatch. Prints one RESULT line of JSON: the rows of each
non-empty batch, where the package was imported from, whether the native package is installed."""

import importlib.util
import json
import sys
import time

import pyspark
from pyspark.sql import SparkSession

import pulsar_throttled_source

service_url, admin_url, topic, workdir, per_trigger = sys.argv[1:6]
began = time.monotonic()
spark = (SparkSession.builder.master("local[2]").appName("release").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
print(f"Spark session ready: {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
batches: list[list[str]] = []


def collect(df, batch_id: int) -> None:
    rows = [r.value for r in df.collect()]
    if rows:
        batches.append(rows)
    print(f"batch {batch_id}: {len(rows)} rows at {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)


query = (spark.readStream.format("pulsar-throttled")
         .option("service.url", service_url).option("admin.url", admin_url).option("topic", topic)
         .option("startingOffsets", "earliest").option("throttlingMode", "batch")
         .option("dispatchThrottlingRatePerTopicInMsg", "200").option("maxEntriesPerTrigger", per_trigger)
         .option("quotaStatePath", f"{workdir}/quota.sqlite").load()
         .selectExpr("cast(value as string) as value")
         .writeStream.foreachBatch(collect).option("checkpointLocation", f"{workdir}/checkpoint")
         .trigger(availableNow=True).start())
query.awaitTermination(180)
if query.isActive:
    query.stop()
    raise RuntimeError(f"the query had not caught up after 180 s: {query.recentProgress[-1:]}")
if query.exception() is not None:
    raise RuntimeError(str(query.exception()))
print("RESULT " + json.dumps({"pyspark": pyspark.__version__, "package": pulsar_throttled_source.__file__,
                              "native_installed": importlib.util.find_spec("pulsar_throttled_native") is not None,
                              "batches": batches}), flush=True)
spark.stop()
