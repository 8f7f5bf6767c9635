"""Issue 15: Spark Connect, as Databricks serverless and shared compute run notebooks. The package
is installed where the server runs, as users get it: the server's Python is a runtime Python with
only the built wheel installed (nothing of the repo on its path, see runtime_wheel.py), and the
client only names the format, with no register call. A throttled processing-time read delivers
every message once, in several quota-sized batches. Issue 39: the metrics listener runs on the client
(PySpark 4.x streams listener events to it) and exports each event's lag."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from helpers import create_topic, produce
from runtime_wheel import build_wheel, install_into, module_file, runtime_python
from spark_services import spark_env, start_connect_server

CLIENT = textwrap.dedent("""
    import json, sys, time
    from prometheus_client import CollectorRegistry
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQueryListener
    from pulsar_throttled_source.metrics import PulsarThrottleMetrics
    from pulsar_throttled_source.query_progress import source_report

    class Compare(StreamingQueryListener):
        # Added after the metrics listener: the client's bus calls them in order, so the registry holds this event's values.
        def __init__(self, registry):
            self.registry, self.pairs = registry, []
        def onQueryStarted(self, event): pass
        def onQueryIdle(self, event): pass
        def onQueryTerminated(self, event): pass
        def onQueryProgress(self, event):
            report = source_report(event.progress)
            if report is not None:
                labels = {"query_id": str(event.progress.id), "query_name": "connect_rows", "source": "0"}
                exported = self.registry.get_sample_value("pulsar_throttled_entries_behind_latest", labels)
                self.pairs.append((report["entriesBehindLatest"], exported))

    remote, service_url, admin_url, topic, checkpoint, expected = sys.argv[1:7]
    spark = SparkSession.builder.remote(remote).getOrCreate()
    registry = CollectorRegistry()
    metrics = PulsarThrottleMetrics(registry=registry)
    spark.streams.addListener(metrics)
    compare = Compare(registry)
    spark.streams.addListener(compare)
    df = (spark.readStream.format("pulsar-throttled")
          .option("service.url", service_url).option("admin.url", admin_url).option("topic", topic)
          .option("startingOffsets", "earliest").option("throttlingMode", "batch")
          .option("dispatchThrottlingRatePerTopicInMsg", "5").option("quotaStatePath", checkpoint + ".quota")
          .load())
    query = (df.writeStream.format("memory").queryName("connect_rows").option("checkpointLocation", checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    deadline = time.monotonic() + 120
    while spark.sql("select count(*) from connect_rows").collect()[0][0] < int(expected) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.5)  # a few more triggers with nothing new: a duplicate would show up here
    while not any(r == 0 for r, _ in compare.pairs) and time.monotonic() < deadline + 30:
        time.sleep(0.2)  # the caught-up event on its way to the client
    query.stop()
    values = [r.value.decode() for r in spark.sql("select value from connect_rows").collect()]
    sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    print("RESULT " + json.dumps({"values": values, "batch_sizes": sizes, "lag_pairs": compare.pairs,
                                  "exception": str(query.exception())[:2000]}))
    spark.stop()
""")


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory):
    python = runtime_python(tmp_path_factory.mktemp("runtime") / "venv")
    install_into(python, build_wheel())
    server_dir = tmp_path_factory.mktemp("connect")
    assert module_file(python, server_dir).is_relative_to(python.parent.parent)  # the wheel, not the repo
    url, server = start_connect_server(server_dir, python)
    yield url
    server.stop()


def test_throttled_read_through_spark_connect(connect_url, broker, admin, pulsar_client, unique, tmp_path):
    topic = create_topic(admin, f"connect-{unique}", 2)
    sent = produce(pulsar_client, topic, 60, batch=2, prefix="c")  # 15 entries per partition
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    done = subprocess.run([sys.executable, str(script), connect_url, broker.service_url, broker.admin_url, topic,
                           str(tmp_path / "chk"), str(len(sent))],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, env=spark_env())
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])

    assert Counter(result["values"]) == Counter(s.payload.decode() for s in sent), result["exception"]
    # 5 entries (10 messages) per partition per period: 20 messages at most per batch, 3 batches at least.
    assert len(result["batch_sizes"]) >= 3 and max(result["batch_sizes"]) <= 20, result["batch_sizes"]
    # The metrics listener ran in the client's process: its registry there holds each event's lag.
    pairs = result["lag_pairs"]
    assert pairs and all(reported == exported for reported, exported in pairs), pairs
    assert pairs[0][0] > 0 and pairs[-1][0] == 0, pairs
