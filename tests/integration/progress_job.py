"""Run by test_progress_versions.py with a given PySpark (4.0, 4.1, or the venv's 4.3): a throttled query over
a backlog, watched by the quickstart notebook's own watch cell (its source, run as it is), then left idle.
Prints one RESULT line of JSON: the source's report per batch (query_progress.source_report), what the
cell printed, and the batches and offsets written while idle."""

import contextlib
import io
import json
import sys
import time
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from pulsar_throttled_source.query_progress import source_report

service_url, admin_url, topic, workdir, notebook = sys.argv[1:6]
spark = (SparkSession.builder.master("local[2]").appName("progress").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")

QUOTA, PARTITIONS, WATCH_SECONDS = 5, 2, 120  # the names the notebook's watch cell reads
df = (spark.readStream.format("pulsar-throttled").option("service.url", service_url).option("admin.url", admin_url)
      .option("topic", topic).option("startingOffsets", "earliest").option("throttlingMode", "batch")
      .option("metadataRefreshIntervalMs", "200").option("dispatchThrottlingRatePerTopicInMsg", str(QUOTA))
      .option("quotaStatePath", f"{workdir}/quota.sqlite").load())
delivered: dict[int, tuple[int, int, int]] = {}


def count_batch(batch, batch_id):
    rows = batch.selectExpr("length(value) as n").collect()
    delivered[batch_id] = (len(rows), len(rows), sum(r.n for r in rows))  # one message per entry


checkpoint = Path(workdir) / "cp"
query = (df.writeStream.foreachBatch(count_batch).trigger(processingTime="1 second")
         .option("checkpointLocation", str(checkpoint)).start())
cells = [c for c in json.loads(Path(notebook).read_text())["cells"] if c["cell_type"] == "code"]
watch = next("".join(c["source"]) for c in cells if "source_report(" in "".join(c["source"]))
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    exec(watch)  # noqa: S102  (the notebook's cell, as a reader of the notebook runs it)
batches, offsets = len(delivered), len(list((checkpoint / "offsets").iterdir()))
time.sleep(4)  # idle and caught up
result = {"pyspark": pyspark.__version__, "printed": printed.getvalue(),
          "reports": [source_report(p) for p in query.recentProgress if p["numInputRows"]],
          "idle": source_report(query.lastProgress), "idle_batches": len(delivered) - batches,
          "idle_offsets": len(list((checkpoint / "offsets").iterdir())) - offsets,
          "last_progress_json": query.lastProgress.json}
query.stop()
print("RESULT " + json.dumps(result), flush=True)
spark.stop()
