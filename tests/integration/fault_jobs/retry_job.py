"""A throttled-source query on a master with task retries, run by test_faults.py in its own process.

A SparkContext's master cannot change inside a process, and the test session's Spark runs
`local[2]` (no task retries), so this job creates its own SparkSession on `local[2,3]`
(up to 3 attempts per task). It reads the whole topic with Trigger.AvailableNow into a
Parquet file sink (exactly-once through its `_spark_metadata` log) and prints one JSON line
when it is done. Arguments: service URL, admin URL, topic, checkpoint dir, output dir,
maxRowsPerArrowBatch. Run with PYSPARK_PYTHON set to the venv's python.
"""

from __future__ import annotations

import json
import sys
import time

from job_session import job_session


def main(argv: list[str]) -> int:
    service_url, admin_url, topic, checkpoint, output, rows_per_batch = argv
    spark = job_session("local[2,3]", "pulsar-throttled-retry-job")
    spark.sparkContext.setLogLevel("WARN")  # keeps TaskSetManager's "Lost task" lines, which the test looks for
    try:
        df = (spark.readStream.format("pulsar-throttled")
              .option("service.url", service_url).option("admin.url", admin_url).option("topic", topic)
              .option("startingOffsets", "earliest").option("maxRowsPerArrowBatch", rows_per_batch).load())
        print("RETRY_JOB_STARTED", flush=True)
        started = time.monotonic()
        query = (df.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        print(json.dumps({"done": True, "numInputRows": rows, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
