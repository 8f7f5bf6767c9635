"""A second Spark application, run by test_redis_quota_store.py beside the test session's own: a
throttled processing-time read of one topic whose topic quota lives in Redis (quotaStore). Writes
`ready` in its work dir once its query runs; prints one RESULT line of JSON: the values
it read and, per batch with data, its planning interval and row count."""

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from pulsar_throttled_source.admin_endpoint import userinfo, without_userinfo

service_url, admin_url, topic, store_url, workdir, expected, quota = sys.argv[1:8]
spark = (SparkSession.builder.master("local[2]").appName("second-application").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
values: list[str] = []


def sink(df, batch_id: int) -> None:
    values.extend(bytes(r.value).decode() for r in df.select("value").collect())


query = (spark.readStream.format("pulsar-throttled")
         .option("service.url", service_url).option("admin.url", admin_url).option("topic", topic)
         .option("startingOffsets", "earliest").option("throttlingMode", "batch").option("subscription", "second-application")
         .option("dispatchThrottlingRatePerTopicInMsg", quota).option("quotaStore", without_userinfo(store_url))
         .option("quotaStorePassword", userinfo(store_url)[1])
         .option("quotaStatePath", f"{workdir}/not-shared.sqlite").option("metadataRefreshIntervalMs", "300").load()
         .writeStream.foreachBatch(sink).trigger(processingTime="1 second").option("checkpointLocation", f"{workdir}/cp").start())
deadline = time.time() + 180
while not query.recentProgress and query.isActive and time.time() < deadline:
    time.sleep(0.1)
Path(workdir, "ready").touch()  # planning runs: the test produces the topic's messages now
while len(values) < int(expected) and query.isActive and time.time() < deadline:
    time.sleep(0.2)
recorded = time.time() + 10  # the last batch's progress (its planning time) is recorded after the sink ran
while sum(p["numInputRows"] for p in query.recentProgress) < len(values) and time.time() < recorded:
    time.sleep(0.1)
query.stop()
if query.exception() is not None:
    raise RuntimeError(str(query.exception()))


def planned(progress: dict) -> tuple[float, float]:
    start = datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
    return start, start + (progress["durationMs"] or {}).get("latestOffset", 0) / 1000.0


batches = [{"planned": planned(p), "rows": p["numInputRows"]} for p in query.recentProgress if p["numInputRows"]]
print("RESULT " + json.dumps({"values": values, "batches": batches}), flush=True)
spark.stop()
