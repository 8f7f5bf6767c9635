"""Issue 39: what the query progress says (planning/progress.py) against a real broker and Spark 4.3: lag
that falls batch by batch to 0, a time lag that matches the publish times of the messages left, the
quota level that holds partitions back named as the lowest one, a caught-up query at 0 lag that
runs no empty batches although its report changes with the clock, and the metrics listener's Prometheus
endpoint showing each event's numbers. (4.0/4.1: test_spark_versions.py.)"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import Counter
from datetime import datetime, timezone

import pulsar
import pytest
from helpers import create_topic, produce, wait_until
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql.streaming import StreamingQueryListener
from streaming import Collected, identity, plan, sent_identity, source_options, start_collecting

from pulsar_throttled_source.metrics import PulsarThrottleMetrics
from pulsar_throttled_source.query_progress import source_report
from pulsar_throttled_source.reading.receiver_queue import receiver_queue_for
from pulsar_throttled_source.topics import TopicName

PARTITIONS = 2
ENTRIES = 20  # per partition, one message each
QUOTA = 5  # entries per partition per second (batch mode): 4 batches to read the backlog
SPACING_S = 0.05  # between sends: the messages' publish times spread over ~2 s


def planned_at(progress: dict) -> tuple[float, float]:
    """When the batch's latestOffset (and so the report) ran: from the trigger's start to the end of latestOffset."""
    start = datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
    return start, start + (progress.get("durationMs") or {}).get("latestOffset", 0) / 1000.0


def report_of(progress: dict) -> dict:
    return json.loads(progress["sources"][0]["latestOffset"])


def test_lag_falls_batch_by_batch_to_0_with_a_time_lag_of_the_messages_left_then_idles_without_batches(
        spark, broker, admin, pulsar_client, unique, tmp_path):
    topic = create_topic(admin, f"progress-lag-{unique}", PARTITIONS)
    producer = pulsar_client.create_producer(topic, batching_enabled=False,
                                             message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(PARTITIONS * ENTRIES):
        producer.send(f"m{i}".encode())
        time.sleep(SPACING_S)
    producer.close()
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch",
                          dispatchThrottlingRatePerTopicInMsg=QUOTA, quotaStatePath=tmp_path / "quota.sqlite")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="1 second")
    try:
        wait_until(lambda: sink.count() >= PARTITIONS * ENTRIES or not q.isActive, 120, what="the backlog read")
        wait_until(lambda: any(p["numInputRows"] and report_of(p)["entriesBehindLatest"] == 0 for p in q.recentProgress),
                   30, what="the batch that caught up")
        batches_then = len(sink.batches)
        offsets_then = len(list((tmp_path / "cp" / "offsets").iterdir()))
        time.sleep(4)  # idle: the report's clock moves, the offsets must not
        idle = q.lastProgress
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    assert q.exception() is None
    # A caught-up query: 0 behind, no level holding it back, and no batch run while idle.
    assert len(sink.batches) == batches_then and len(list((tmp_path / "cp" / "offsets").iterdir())) == offsets_then
    report = report_of(idle)
    assert (report["entriesBehindLatest"], report["secondsBehindLatest"], report["throttle"]["heldBy"]) == (0, 0.0, None)
    assert all(level["heldBack"] == 0 for level in report["throttle"]["levels"].values())

    # Lag falls batch by batch to 0: what each batch left is the backlog minus everything read so far.
    total, read = PARTITIONS * ENTRIES, 0
    behind = []
    for p in progress:
        read += p["numInputRows"]
        r = report_of(p)
        assert r["entriesBehindLatest"] == r["messagesBehindLatest"] == total - read, (p["batchId"], r)
        assert r["maxEntriesBehindLatest"] * PARTITIONS >= r["entriesBehindLatest"]
        assert r["avgEntriesBehindLatest"] == r["entriesBehindLatest"] / PARTITIONS
        assert r["partitions"] == PARTITIONS and r["readPath"] in ("native", "python")
        if r["entriesBehindLatest"]:
            assert r["throttle"]["heldBy"] == "topic" and r["throttle"]["levels"]["topic"]["heldBack"] == PARTITIONS
        behind.append(r["entriesBehindLatest"])
    assert behind == sorted(behind, reverse=True) and behind[-1] == 0 and len(behind) >= 3, behind

    # Time lag: the age, when the batch was planned, of the oldest message a later batch delivered. While the
    # lookup of a new first unread entry is still out (a busy machine), the report keeps an earlier first unread
    # entry's publish time (metadata/publish_times.py): over-stated, never under-stated. So each figure must be
    # the age of the first unread message after this batch or after an earlier one, and never below the first.
    published = {b: [(r.partition, r.publishTime.timestamp()) for r in rows] for b, rows in sink.batches.items()}
    oldest_after = {b: min((t for later, rows in published.items() if later > b for _, t in rows), default=None)
                    for b in [-1, *published]}  # -1: before the first batch
    checked = 0
    for p in progress:
        r = report_of(p)
        oldest = oldest_after.get(p["batchId"])
        if oldest is None:
            assert r["secondsBehindLatest"] == 0.0
            continue
        earliest, latest = planned_at(p)
        seconds = r["secondsBehindLatest"]
        assert seconds >= earliest - oldest - 0.2, (p["batchId"], r, earliest - oldest)  # never under-stated
        candidates = [o for b, o in oldest_after.items() if b <= p["batchId"] and o is not None]
        assert any(earliest - o - 0.2 <= seconds <= latest - o + 0.2 for o in candidates), \
            (p["batchId"], r, [(round(earliest - o, 3), round(latest - o, 3)) for o in candidates])
        print(f"batch {p['batchId']}: {r['entriesBehindLatest']} behind, time lag {seconds} s, "
              f"expected {earliest - oldest:.3f}..{latest - oldest:.3f} s")
        checked += 1
    assert checked >= 2

LEVEL_QUOTAS = {  # the level under test gets the lowest quota; the others allow more
    "topic": {"dispatchThrottlingRatePerTopicInMsg": 3, "dispatchThrottlingRateInMsg": 100},
    "sourceWide": {"dispatchThrottlingRateInMsg": 4, "dispatchThrottlingRatePerTopicInMsg": 50},
    "subscription": {"dispatchThrottlingRatePerSubscriptionInMsg": 3, "dispatchThrottlingRatePerTopicInMsg": 50,
                     "dispatchThrottlingRateInMsg": 100},
    "brokerTopic": {"quotaSource": "both", "dispatchThrottlingRatePerTopicInMsg": 50},  # the broker's policy: 3
}


@pytest.fixture(scope="module")
def backlog_topic(admin, pulsar_client) -> str:
    """One backlog every level test reads from the start (each with its own quota store)."""
    topic = create_topic(admin, f"progress-levels-{int(time.time() * 1000)}", PARTITIONS)
    produce(pulsar_client, topic, PARTITIONS * 40)
    return topic


@pytest.mark.parametrize("level", list(LEVEL_QUOTAS))
def test_the_level_named_as_holding_partitions_back_is_the_one_with_the_lowest_quota(
        spark, broker, admin, backlog_topic, tmp_path, level):
    if level == "brokerTopic":
        name = TopicName.parse(backlog_topic)
        admin.set_dispatch_rate(name, {"dispatchThrottlingRateInMsg": 3})
        wait_until(lambda: (admin.dispatch_rate(name, applied=True) or {}).get("dispatchThrottlingRateInMsg") == 3,
                   60, what="the topic dispatch rate to apply")
    sink = Collected()
    opts = source_options(broker, backlog_topic, startingOffsets="earliest", throttlingMode="batch",
                          quotaStatePath=tmp_path / "quota.sqlite", subscription=f"progress-{level}", **LEVEL_QUOTAS[level])
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="1 second")
    try:
        wait_until(lambda: any(p["numInputRows"] for p in q.recentProgress) or not q.isActive, 90, what="a batch")
        first = next(p for p in q.recentProgress if p["numInputRows"])
    finally:
        q.stop()
        if level == "brokerTopic":
            admin.remove_dispatch_rate(TopicName.parse(backlog_topic))
    assert q.exception() is None
    throttle = report_of(first)["throttle"]
    assert throttle["heldBy"] == level, throttle
    assert throttle["levels"][level]["heldBack"] == PARTITIONS and throttle["levels"][level]["windowUsed"] == 1.0, throttle
    assert all(v["heldBack"] == 0 for k, v in throttle["levels"].items() if k != level), throttle
    assert throttle["floorHeld"] is False and throttle["readLimitHeld"] == 0


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples}


class ScrapeAfterEach(StreamingQueryListener):
    """Added after the metrics listener: Spark's listener bus calls listeners one after the other, in the
    order added, on one thread, so each scrape shows what the metrics listener made of the same event."""

    def __init__(self, url: str) -> None:
        self.url, self.lock, self.seen = url, threading.Lock(), []

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = json.loads(event.progress.json)
        scraped = scrape(self.url)
        with self.lock:
            self.seen.append((progress, scraped))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def events(self) -> list[tuple[dict, dict]]:
        with self.lock:
            return list(self.seen)


def test_the_metrics_listener_exports_the_numbers_of_every_progress_event(spark, broker, admin, pulsar_client, unique, tmp_path):
    topic = create_topic(admin, f"progress-metrics-{unique}", PARTITIONS)
    sent = produce(pulsar_client, topic, PARTITIONS * 10)  # 10 entries per partition: 2 batches at the quota
    metrics = PulsarThrottleMetrics(port=0, addr="127.0.0.1", registry=CollectorRegistry())
    url = f"http://127.0.0.1:{metrics.port}/metrics"
    recorder = ScrapeAfterEach(url)
    spark.streams.addListener(metrics)
    spark.streams.addListener(recorder)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch", progressPerPartition="true",
                          dispatchThrottlingRatePerTopicInMsg=QUOTA, quotaStatePath=tmp_path / "quota.sqlite")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="500 milliseconds")
    try:
        wait_until(lambda: any(p["numInputRows"] and source_report(p)["entriesBehindLatest"] == 0 for p, _ in recorder.events())
                   or not q.isActive, 120, what="the batch that caught up, exported")
    finally:
        q.stop()
        try:  # an ended query's series go
            wait_until(lambda: not any(dict(labels)["query_id"] == q.id for _, labels in scrape(url)), 30, what="the series to go")
        finally:
            spark.streams.removeListener(recorder)
            spark.streams.removeListener(metrics)
            metrics.close()
    assert q.exception() is None
    assert Counter(bytes(r.value) for r in sink.rows) == Counter(s.payload for s in sent)

    total, behind = 0.0, []
    for progress, scraped in recorder.events():
        report = source_report(progress)
        if report is None:
            continue  # no plan yet: nothing to export
        query = {"query_id": progress["id"], "query_name": "", "source": "0"}

        def exported(name: str, **labels: str) -> float | None:
            return scraped.get((f"pulsar_throttled_{name}", frozenset({**query, **labels}.items())))

        total += progress["sources"][0]["numInputRows"]
        assert exported("batch_input_rows") == progress["sources"][0]["numInputRows"]
        assert exported("input_rows_total") == total
        for field, name in [("entriesBehindLatest", "entries_behind_latest"), ("maxEntriesBehindLatest", "max_entries_behind_latest"),
                            ("avgEntriesBehindLatest", "avg_entries_behind_latest"), ("messagesBehindLatest", "messages_behind_latest"),
                            ("secondsBehindLatest", "seconds_behind_latest"), ("partitions", "partitions"),
                            ("partitionsBehind", "partitions_behind")]:
            assert exported(name) == report[field], (field, progress["batchId"], report)
        assert exported("topic_entries_behind_latest", topic=topic) == report["entriesBehindLatest"]
        assert exported("read_path_info", read_path=report["readPath"]) == 1
        assert exported("trigger_floor_held") == 0 and exported("read_limit_held_partitions") == 0
        for level, values in report["throttle"]["levels"].items():
            assert exported("level_held_back_partitions", level=level) == values["heldBack"]
            assert exported("level_window_used_ratio", level=level) == values["windowUsed"]
            assert exported("level_debt_messages", level=level) == values["debtMessages"]
        if progress["numInputRows"]:
            behind.append(exported("entries_behind_latest"))
    # The lag falls batch by batch to 0, the topic level holding the partitions back until then.
    assert behind == sorted(behind, reverse=True) and behind[-1] == 0 and behind[0] > 0, behind
    assert total == len(sent)


def test_an_unthrottled_query_of_a_batched_topic_counts_messages_and_queues_its_readers_in_them(
        spark, broker, admin, pulsar_client, unique, tmp_path):
    """Issue 44: an unthrottled query asks the publish counters too (every policyRefreshIntervalMs): its progress
    says how many messages, not entries, are left, and its read tasks' readers queue their range in messages
    (reading/receiver_queue.py), so the broker reads on before a task has emptied a batched entry."""
    topic = create_topic(admin, f"progress-batched-{unique}", 0)
    sent = produce(pulsar_client, topic, 600, batch=4)  # ~150 entries: more than one broker read (100)
    entries = int(admin.internal_stats(TopicName.parse(topic))["entriesAddedCounter"])
    per_entry = len(sent) / entries
    assert per_entry > 2 and entries > 100, entries  # batched: what the report must count
    ranges = plan(broker, topic)
    assert [r.msgs_per_entry for r in ranges] == [per_entry]
    assert [receiver_queue_for(r) for r in ranges] == [len(sent)]  # the range's messages, not its entries

    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=max(1, entries // 3))
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    try:
        assert q.awaitTermination(120), "the AvailableNow query did not finish"
        assert q.exception() is None, q.exception()
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    assert Counter(identity(r) for r in sink.rows) == Counter(sent_identity(s) for s in sent)  # each message once
    left = len(sent)
    assert len(progress) >= 3
    for p in progress:
        left -= p["numInputRows"]
        r = report_of(p)
        assert r["messagesBehindLatest"] == round(r["entriesBehindLatest"] * per_entry), r
        if left:
            assert r["messagesBehindLatest"] > r["entriesBehindLatest"], r
