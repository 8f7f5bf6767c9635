"""Issue 42: a job that would use Trigger.AvailableNow catches a backlog up under a quota and stops, the same call
on every Spark line. Here the session's PySpark (4.2+) catches up with AvailableNow, then the 4.0/4.1 way (a
processing-time trigger stopped once caught up) on the same checkpoint. The spark-submit example doing it on PySpark
4.0.5 and 4.1.4 runs in test_spark_versions.py (in each compat venv's application), on 4.2+ in test_cluster.py (on
a standalone cluster)."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq
from helpers import batch_rows, create_topic, produce

RATE = 4  # entries per partition per second (--topic-rate-msgs, throttlingMode batch)
PARTITIONS = 2


def test_catch_up_on_spark_4_2_and_later_is_available_now_then_the_4_0_way_on_the_same_checkpoint(
        spark, broker, admin, pulsar_client, unique, tmp_path):
    from pulsar_throttled_source.catch_up import catch_up

    topic = create_topic(admin, f"catch-up-now-{unique}", PARTITIONS)
    sent = produce(pulsar_client, topic, 20)  # 10 entries per partition

    def writer():
        return (spark.readStream.format("pulsar-throttled").option("service.url", broker.service_url)
                .option("admin.url", broker.admin_url).option("topic", topic).option("startingOffsets", "earliest")
                .option("throttlingMode", "batch").option("dispatchThrottlingRatePerTopicInMsg", str(RATE))
                .option("quotaStatePath", str(tmp_path / "quota.sqlite")).load()
                .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "checkpoint")))

    result = catch_up(writer(), timeout_s=120)  # this PySpark has admission control: Trigger.AvailableNow
    assert (result.trigger, result.rows, result.query.isActive) == ("availableNow", len(sent), False)
    assert result.batches >= 3 and result.reports[0]["entriesBehindLatest"] == 0
    # What a 4.0/4.1 run does, here on the 4.2+ reader (its report in latestOffset): the messages sent since.
    late = produce(pulsar_client, topic, 8, prefix="late")
    result = catch_up(writer(), timeout_s=120, available_now=False, processing_time="200 milliseconds")
    assert (result.trigger, result.rows, result.query.isActive) == ("processingTime", len(late), False)

    rows = batch_rows(tmp_path / "out")
    assert max(rows.values()) <= PARTITIONS * RATE, rows  # every batch within the quota
    values = pq.read_table(tmp_path / "out").column("value").to_pylist()
    assert Counter(bytes(v) for v in values) == Counter(s.payload for s in sent + late)  # each once
