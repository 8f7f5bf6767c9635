"""Issue 53: writing back to Pulsar. df.write and df.writeStream .format("pulsar-throttled"), read back with the plain
Python client: every field as written (payload, key, properties, event time, ordering key, a message without
payload), nothing lost or duplicated; bad input refused with a clear error."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pulsar
import pytest
import requests
from helpers import Sent, create_namespace, create_topic, produce
from java_producer import KeyProducer
from native_path import SKIP_REASON, needs_native_path
from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType, TimestampType
from sink_checks import entry_sizes, properties_of, read_back, sink_options
from streaming import read_stream, source_options

from pulsar_throttled_source.writing.routing import key_partition

JOBS = Path(__file__).parent / "fault_jobs"
UTC = dt.timezone.utc
SCHEMA = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                     StructField("properties", MapType(StringType(), StringType())), StructField("eventTime", TimestampType()),
                     StructField("orderingKey", StringType())])


# The two senders (option sendPath): pulsar-client's, a Python callback per message, and the native library's.
SEND_PATHS = ["python", pytest.param("native", marks=needs_native_path)]


@pytest.mark.parametrize("send_path", SEND_PATHS)
def test_a_batch_write_sends_every_field(spark, broker, admin, pulsar_client, unique, send_path):
    topic = create_topic(admin, f"sink-batch-{send_path}-{unique}", 3)
    t0 = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    rows = [(f"k{i % 11}" if i % 4 else None, f"v{i}".encode(), {"i": str(i), "src": "batch"} if i % 3 else None,
             t0 + dt.timedelta(seconds=i) if i % 5 else None, f"o{i % 2}" if i % 6 == 0 else None) for i in range(300)]
    rows.append(("gone", None, None, None, None))  # a message without payload: a compacted topic's tombstone for "gone"
    df = spark.createDataFrame(rows, SCHEMA).repartition(4)
    df.write.format("pulsar-throttled").options(**sink_options(broker, topic, sendPath=send_path)).mode("append").save()

    got = read_back(pulsar_client, topic, len(rows))
    ms = lambda t: None if t is None else int(t.timestamp() * 1000)  # noqa: E731
    assert Counter(g[1:] for g in got) == Counter((v, k, properties_of(p), ms(t), o) for k, v, p, t, o in rows)
    keyed = [g for g in got if g[2] is not None]
    assert keyed and all(g[0] == key_partition(g[2], 3) for g in keyed)  # the Java client's choice: see the next test
    unkeyed = Counter(g[0] for g in got if g[2] is None)
    assert set(unkeyed) == {0, 1, 2}  # round robin over every partition


def test_keys_land_on_the_partition_a_java_producer_with_default_settings_chooses(spark, broker, admin, pulsar_client, unique):
    keys = [f"key-{i}" for i in range(60)] + ["é", "ключ-7", "\U0001F600k", "中文键", "polygenelubricants"]
    by_java, by_sink, by_native = (create_topic(admin, f"sink-keys-{name}-{unique}", 4) for name in ("java", "spark", "native"))
    java = KeyProducer(broker.service_url, by_java)
    try:
        java.send(*keys)
    finally:
        java.close()
    df = spark.createDataFrame([(k, k.encode()) for k in keys], "key string, value binary").repartition(3)
    df.write.format("pulsar-throttled").options(**sink_options(broker, by_sink, sendPath="python")).mode("append").save()
    java_partitions = {g[2]: g[0] for g in read_back(pulsar_client, by_java, len(keys))}
    sink_partitions = {g[2]: g[0] for g in read_back(pulsar_client, by_sink, len(keys))}
    assert sink_partitions == java_partitions and len(set(java_partitions.values())) == 4
    if not SKIP_REASON:  # the native sender routes in C: the same partitions
        df.write.format("pulsar-throttled").options(**sink_options(broker, by_native, sendPath="native")).mode("append").save()
        assert {g[2]: g[0] for g in read_back(pulsar_client, by_native, len(keys))} == java_partitions
    # pulsar-client for Python, at its defaults, hashes keys otherwise: what the sink's own routing is for.
    by_python = create_topic(admin, f"sink-keys-python-{unique}", 4)
    producer = pulsar_client.create_producer(by_python)
    for k in keys:
        producer.send(k.encode(), partition_key=k)
    producer.close()
    python_partitions = {g[2]: g[0] for g in read_back(pulsar_client, by_python, len(keys))}
    assert sum(python_partitions[k] != java_partitions[k] for k in keys) > len(keys) // 2


def test_a_stream_from_this_source_writes_back_without_renaming(spark, broker, admin, pulsar_client, unique, tmp_path):
    source = create_topic(admin, f"sink-src-{unique}", 2)
    target = create_topic(admin, f"sink-dst-{unique}", 2)
    sent = produce(pulsar_client, source, 120, batch=10)  # keys and properties on every message
    df = read_stream(spark, source_options(broker, source, startingOffsets="earliest", maxEntriesPerTrigger="5"))
    query = (df.writeStream.format("pulsar-throttled").options(**sink_options(broker, target))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"]]) > 1  # several micro-batches
    got = read_back(pulsar_client, target, len(sent))
    # Each message kept its payload, key and properties, and its partition (the source's `partition` column).
    assert Counter((g[0], g[1], g[2], g[3]) for g in got) == Counter((s.partition, s.payload, s.key, properties_of(s.properties)) for s in sent)


def test_bad_input_is_a_clear_error_before_anything_is_sent(spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"sink-bad-{unique}", 2)
    good = spark.createDataFrame([("k", b"v")], "key string, value binary")

    def write(df, **options: str) -> str:
        with pytest.raises(Exception) as err:
            df.write.format("pulsar-throttled").options(**sink_options(broker, topic, **options)).mode("append").save()
        return str(err.value)

    assert "Column(s) 'extra' cannot be written to Pulsar" in write(good.selectExpr("*", "1 as extra"))
    assert "A write needs a 'value' column" in write(good.select("key"))
    assert "Column 'key' is binary" in write(good.selectExpr("cast(key as binary) as key", "value"))
    assert "Columns 'key' and '__key' both give the message's key" in write(good.selectExpr("*", "key as __key"))
    assert "'startingOffsets' apply to reads (spark.read, spark.readStream) only" in write(good, startingOffsets="earliest")
    assert "'pulsar.producer.batchingenabledd' is not a setting of pulsar-client's producer" in write(good, **{"pulsar.producer.batchingEnabledd": "true"})
    assert "'pulsar.producer.compressiontype': 'LZ5' is not allowed; expected one of NONE, LZ4" in write(good, **{"pulsar.producer.compressionType": "LZ5"})
    assert "Column 'partition' is 7 but topic" in write(good.selectExpr("*", "7 as partition"))
    # effectivelyOnce: deduplication off on the topic (public/default's default), a batch write without its sinkId.
    off = write(good, deliveryGuarantee="effectivelyOnce", sinkId="s1")
    assert f"needs message deduplication on topic {topic}, and it is off" in off
    assert f"pulsar-admin topics set-deduplication --enable {topic}" in off
    assert "needs option 'sinkId' for a batch write" in write(good, deliveryGuarantee="effectivelyOnce")
    with pytest.raises(Exception, match="'pulsar.producer.batchingenabled' apply to writes"):
        spark.read.format("pulsar-throttled").options(**source_options(broker, topic, **{"pulsar.producer.batchingEnabled": "true"})).load()
    assert read_back(pulsar_client, topic, 0) == []


SEND_PATH = "auto" if SKIP_REASON else "native"  # the retry test's sender: the native one wherever it can be built
EO_BATCH = 4  # effectivelyOnce's batch size in the retry test (pulsar.producer.batchingMaxMessages)


class RetryJob(NamedTuple):
    """What fault_jobs/sink_retry_job.py did (the retry test's runs, then the enrich example) and what it was given."""

    job: subprocess.CompletedProcess
    rows: int
    topics: dict[str, str]
    sent: dict[str, list[Sent]]
    example_source_sent: list[Sent]
    example_target: str


@pytest.fixture(scope="module")
def retry_job(broker, admin, pulsar_client, tmp_path_factory: pytest.TempPathFactory) -> RetryJob:
    """One Spark application (local[2,4], fault_jobs/sink_retry_job.py) for the retry test's runs and then
    examples/enrich_topic.py's main: its start-up is most of either test's cost."""
    unique, tmp_path = uuid.uuid4().hex[:10], tmp_path_factory.mktemp("sink-retry")
    namespace = create_namespace(admin, f"public/sink-dedup-{unique}")
    requests.post(f"{admin.base}/admin/v2/namespaces/{namespace}/deduplication", json=True, timeout=30).raise_for_status()
    topics = {name: create_topic(admin, f"{namespace}/{name}", 2)
              for name in ("batch-eo", "batch-alo", "stream-eo", "stream-alo", "batch-eo-py", "stream-eo-py")}
    sources = {g: create_topic(admin, f"sink-retry-src-{g}-{unique}", 2) for g in ("eo", "alo")}
    sent = {g: produce(pulsar_client, sources[g], 40, batch=5) for g in ("eo", "alo")}
    rows, fail_at = 200, [60, 170]  # halfway through each of the two tasks (ids 0-99 and 100-199)
    runs = []
    # effectivelyOnce in batches of 4 rows per producer: the first attempts persist some and fail inside one (the failing
    # row's payload fails its whole batch), so each retry's skip ends inside the rows the first attempt had sent.
    for short, guarantee, send_path in (("eo", "effectivelyOnce", SEND_PATH), ("alo", "atLeastOnce", SEND_PATH),
                                        ("eo-py", "effectivelyOnce", "python")):
        source = short[:3].rstrip("-")
        extra = {"options": {"pulsar.producer.batchingMaxMessages": str(EO_BATCH)}} if guarantee == "effectivelyOnce" else {}
        runs.append({"mode": "batch", "topic": topics[f"batch-{short}"], "guarantee": guarantee, "sink_id": f"retry-{short}-{unique}" if source == "eo" else None,
                     "rows": rows, "fail_at": fail_at, "send_path": send_path, **extra})
        middle = [s.payload.decode() for s in sent[source][18:20]]  # messages of the second micro-batch
        runs.append({"mode": "stream", "topic": topics[f"stream-{short}"], "guarantee": guarantee, "source": sources[source],
                     "checkpoint": str(tmp_path / f"checkpoint-{short}"), "fail_at": middle, "max_entries": 4,
                     "send_path": send_path, **extra})
    # The enrich example's topics: its effectivelyOnce target needs deduplication (the namespace's).
    example_source = create_topic(admin, f"sink-example-src-{unique}", 2)
    example_target = create_topic(admin, f"{namespace}/enriched", 2)
    example_sent = produce(pulsar_client, example_source, 60, batch=5)
    example = ["--service-url", broker.service_url, "--admin-url", broker.admin_url, "--source", example_source,
               "--target", example_target, "--read-rate-msgs", "10", "--write-rate-msgs", "20",
               "--delivery-guarantee", "effectivelyOnce", "--checkpoint", str(tmp_path / "example-checkpoint"),
               "--trigger", "availableNow", "--timeout", "300"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    spec = {"service_url": broker.service_url, "admin_url": broker.admin_url, "runs": runs, "example": example}
    job = subprocess.run([sys.executable, str(JOBS / "sink_retry_job.py"), json.dumps(spec)], env=env, capture_output=True,
                         text=True, timeout=600)
    return RetryJob(job, rows, topics, sent, example_sent, example_target)


def test_a_task_failing_halfway_is_retried_and_every_row_lands_once_effectively_once(retry_job: RetryJob, pulsar_client):
    """A task of a batch write and one of a stream's micro-batch fail halfway through their rows on their first attempt
    and Spark retries them (local[2,4], in fault_jobs/sink_retry_job.py): effectivelyOnce writes every row once, and the
    same runs under atLeastOnce write the first attempt's rows twice (so the test can fail). effectivelyOnce in batches
    of EO_BATCH rows, on the native sender (sendPath=native) and on the Python sender; the Python sender's row writers'
    retries: the older lines' test below."""
    job, rows, topics, sent = retry_job.job, retry_job.rows, retry_job.topics, retry_job.sent
    assert job.returncode == 0, job.stderr[-3000:]
    assert job.stdout.count('"done"') == 6, job.stdout

    expected_batch = Counter((f"r{i}".encode(), f"k{i % 7}") for i in range(rows))
    expected_stream = {g: Counter((s.payload, s.key) for s in sent[g]) for g in sent}
    got = {name: Counter((g[1], g[2]) for g in read_back(pulsar_client, topic, None)) for name, topic in topics.items()}
    for path in ("", "-py"):  # SEND_PATH's sender, and the Python sender
        assert got[f"batch-eo{path}"] == expected_batch, path  # every row once
        assert got[f"stream-eo{path}"] == expected_stream["eo"], path
        for run in (f"batch-eo{path}", f"stream-eo{path}"):  # in batches: entries of up to EO_BATCH messages, most of them full
            sizes = entry_sizes(pulsar_client, topics[run])
            assert max(sizes) == EO_BATCH and sizes[EO_BATCH] * EO_BATCH > sum(got[run].values()) / 2, (run, sizes)
    # atLeastOnce: every row, and the rows the first attempts had written before failing, twice.
    assert set(got["batch-alo"]) == set(expected_batch) and sum(got["batch-alo"].values()) > rows
    assert set(got["stream-alo"]) == set(expected_stream["alo"]) and sum(got["stream-alo"].values()) > len(sent["alo"])


def test_write_quotas_hold_per_partition_and_window_across_tasks(spark, broker, admin, pulsar_client, unique, tmp_path):
    topic = create_topic(admin, f"sink-quota-{unique}", 2)
    rows, quota = 240, 40  # 120 per partition at 40 a second: three windows at least
    df = spark.range(rows, numPartitions=3).selectExpr("cast(concat('q', id) as binary) as value")
    options = sink_options(broker, topic, publishThrottlingRateInMsg=str(quota), quotaStatePath=str(tmp_path / "quota.sqlite"))
    first_window = int(time.time())  # windows are epoch-aligned seconds, as the broker's publish timestamps
    df.write.format("pulsar-throttled").options(**options).mode("append").save()
    windows: Counter[tuple[int, int]] = Counter()
    for partition in pulsar_client.get_topic_partitions(topic):
        reader = pulsar_client.create_reader(partition, pulsar.MessageId.earliest)
        while reader.has_message_available():
            m = reader.read_next(10_000)
            windows[(m.message_id().partition(), m.publish_timestamp() // 1000)] += 1
        reader.close()
    assert sum(windows.values()) == rows
    for p in (0, 1):
        last = max(w for part, w in windows if part == p)
        per_window = [windows[(p, w)] for w in range(first_window, last + 1)]
        assert sum(1 for n in per_window if n) >= 3, (p, per_window)
        # Permits are taken in a window and published after: a send delayed past the window's end (a busy machine: 30 of
        # a window's 40 seen a second late) lands in the next one. So: published by the end of each window at most what
        # that many windows grant (a delay cannot break this), and a window at most its own quota plus what the window
        # before left unpublished (three tasks not sharing the quota would put ~3 x 40 in each).
        for k in range(len(per_window)):
            assert sum(per_window[:k + 1]) <= quota * (k + 1) + quota * 0.1, (p, k, per_window)
            carried = max(0, quota - per_window[k - 1]) if k else 0
            assert per_window[k] <= quota * 1.1 + carried, (p, k, per_window)


def test_a_write_with_adaptive_throttling_yields_to_the_clusters_multiplier(spark, broker, admin, pulsar_client, unique, tmp_path):
    """A read backfill's controller on the same cluster and quota store has brought m down to 0.1: the write's quota
    is scaled by it, and m climbs back 5 points a window while nothing fires (the bookies keep up with 20 messages a
    second). 200 rows at a ceiling of 100 a second would take two windows; at 0.10, 0.15, 0.20, ... x 100 they take at
    least seven."""
    from pulsar_throttled_source.throttling.congestion import cluster_key
    from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
    from pulsar_throttled_source.throttling.store import MultiplierState

    topic = create_topic(admin, f"sink-adaptive-{unique}", 0)
    store_path = tmp_path / "quota.sqlite"
    store = SqliteQuotaStore(str(store_path))
    seeded = int(time.time() * 1000) - 1000
    with store.transaction() as tx:
        tx.put_multiplier(cluster_key(broker.admin_url), MultiplierState(seeded, 0.2, "decrease", 0.1))
    rows = [f"adaptive-{i}".encode() for i in range(200)]
    df = spark.createDataFrame([(r,) for r in rows], "value binary").coalesce(1)
    options = sink_options(broker, topic, publishThrottlingRateInMsg="100", quotaStatePath=str(store_path),
                           adaptiveThrottling="true", adaptiveThrottlingWindow="1s", adaptiveThrottlingIncreasePercent="5",
                           adaptiveThrottlingSlowStart="false")
    df.write.format("pulsar-throttled").options(**options).mode("append").save()
    reader = pulsar_client.create_reader(topic, pulsar.MessageId.earliest)
    published = []
    while reader.has_message_available():
        m = reader.read_next(10_000)
        published.append((m.data(), m.publish_timestamp()))
    reader.close()
    assert Counter(d for d, _ in published) == Counter(rows)
    span_s = (max(t for _, t in published) - min(t for _, t in published)) / 1000
    assert span_s >= 5.0, f"200 rows in {span_s:.1f} s: the write did not follow the cluster's m"
    with store.transaction() as tx:
        record = tx.get_multiplier(cluster_key(broker.admin_url))
    assert record is not None and record.window_ms > seeded + 4000, record  # the write's controller decided the windows since


def test_the_writers_get_arrow_batches_where_pyspark_has_arrow_writers(spark, broker, admin, pulsar_client, unique, tmp_path):
    """PySpark 4.1+ (this session's: 4.3) hands both writers Arrow record batches, and the rows they hold are written
    as the row path writes them: every field, once. (4.0's stream writer gets rows: test_spark_versions::test_older_spark_lines_write_effectively_once_too.)"""
    from sink_probe import inputs_seen, probe_source

    spark.dataSource.register(probe_source())
    topic = create_topic(admin, f"sink-arrow-{unique}", 2)
    t0 = dt.datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)
    rows = [(f"k{i % 5}", f"a{i}".encode(), {"n": str(i)}, t0 + dt.timedelta(milliseconds=i), "o" if i % 2 else None) for i in range(50)]
    batch_dir, stream_dir = tmp_path / "batch", tmp_path / "stream"
    batch_dir.mkdir(), stream_dir.mkdir()
    spark.createDataFrame(rows, SCHEMA).repartition(2).write.format("pulsar-throttled-probe") \
        .options(**sink_options(broker, topic, probeDir=str(batch_dir))).mode("append").save()
    assert inputs_seen(batch_dir) == ["RecordBatch", "RecordBatch"]

    source = create_topic(admin, f"sink-arrow-src-{unique}", 2)
    sent = produce(pulsar_client, source, 30, batch=5)
    query = (read_stream(spark, source_options(broker, source, startingOffsets="earliest")).writeStream
             .format("pulsar-throttled-probe").options(**sink_options(broker, topic, probeDir=str(stream_dir)))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    assert inputs_seen(stream_dir) and set(inputs_seen(stream_dir)) == {"RecordBatch"}

    got = read_back(pulsar_client, topic, len(rows) + len(sent))
    ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731
    assert Counter(g[1:] for g in got) == Counter((v, k, properties_of(p), ms(t), o) for k, v, p, t, o in rows) + \
        Counter((s.payload, s.key, properties_of(s.properties), None, None) for s in sent)


def test_the_enrich_example_reads_and_writes_under_quotas_effectively_once(retry_job: RetryJob, pulsar_client):
    """examples/enrich_topic.py's main with its documented arguments (a read quota and a write quota, effectivelyOnce),
    in the retry job's Spark application after its runs (as spark-submit would run it, on that session): every message
    of the source once in the target, upper-cased and tagged, key, properties and partition kept."""
    job, sent = retry_job.job, retry_job.example_source_sent
    assert job.returncode == 0, job.stderr[-3000:]
    assert "Done: 60 messages in " in job.stdout, job.stdout
    got = read_back(pulsar_client, retry_job.example_target, len(sent))
    assert Counter((g[0], g[1], g[2], g[3]) for g in got) == \
        Counter((s.partition, s.payload.upper(), s.key, properties_of({**s.properties, "enrichedBy": "enrich_topic"})) for s in sent)
