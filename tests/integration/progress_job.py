"""Run by test_progress_versions.py with a given PySpark (4.0, 4.1, or the venv's 4.3): a throttled query over
a backlog, watched by the quickstart notebook's own watch cell (its source, run as it is), then left idle.
Prints one RESULT line of JSON: the source's report per batch (query_progress.source_report), what the
cell printed, the batches and offsets written while idle, and per progress event the lag it reports
beside what the metrics listener (pulsar_throttled_source.metrics) exported of that event."""

import contextlib
import io
import json
import sys
import time
from pathlib import Path

import pyspark
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from pulsar_throttled_source.metrics import PulsarThrottleMetrics
from pulsar_throttled_source.query_progress import source_report

service_url, admin_url, topic, workdir, notebook = sys.argv[1:6]
spark = (SparkSession.builder.master("local[2]").appName("progress").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


class Compare(StreamingQueryListener):
    """Added after the metrics listener: Spark's bus calls them in order, so the registry holds this event's values."""

    def __init__(self, registry):
        self.registry, self.pairs = registry, []

    def onQueryStarted(self, event):
        pass

    def onQueryProgress(self, event):
        report = source_report(event.progress)
        if report is not None:
            labels = {"query_id": str(event.progress.id), "query_name": "", "source": "0"}
            self.pairs.append([[report["entriesBehindLatest"], report["secondsBehindLatest"]],
                               [self.registry.get_sample_value(f"pulsar_throttled_{name}_behind_latest", labels)
                                for name in ("entries", "seconds")]])

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        pass


registry = CollectorRegistry()
spark.streams.addListener(PulsarThrottleMetrics(registry=registry))
compare = Compare(registry)
spark.streams.addListener(compare)

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
          "last_progress_json": query.lastProgress.json, "metric_pairs": compare.pairs}
query.stop()
print("RESULT " + json.dumps(result), flush=True)
spark.stop()
