"""Issue 3: the source reads real topics exactly once, per partition, for every trigger."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from helpers import create_topic, produce, trim_everything, trim_until, wait_until
from streaming import (
    Collected,
    entry_of,
    failure_of,
    identity,
    read_stream,
    sent_identity,
    source_options,
    start_collecting,
    wait_caught_up,
)

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.topics import TopicName


@pytest.fixture(scope="module")
def backlog_topic(admin, pulsar_client):
    """4 partitions, batched and non-batched messages, at least 3 ledgers per partition."""
    topic = create_topic(admin, f"source-{int(time.time() * 1000)}", 4)
    sent = produce(pulsar_client, topic, 2400, batch=10, prefix="batched")  # ~60 entries per partition
    sent += produce(pulsar_client, topic, 400, prefix="single")  # +100 entries per partition
    for name, stats in admin.partitioned_internal_stats(TopicName.parse(topic)).items():
        assert len(PartitionLayout.from_internal_stats(name, stats).ledgers) >= 3, name
    return topic, sent


def assert_exactly(rows, sent) -> None:
    got = Counter(identity(r) for r in rows)
    duplicates = [k for k, n in got.items() if n > 1]
    assert not duplicates, f"{len(duplicates)} duplicated messages, e.g. {duplicates[:2]}"
    assert set(got) == {sent_identity(s) for s in sent}


def run_available_now(spark, opts, checkpoint, sink: Collected, timeout: float = 180) -> None:
    q = start_collecting(spark, opts, sink, checkpoint, availableNow=True)
    assert q.awaitTermination(timeout), "AvailableNow query did not finish"
    assert q.exception() is None


@pytest.mark.parametrize("read_path", ["auto", "python"])  # auto: the native read path where it is installed (make test)
def test_available_now_reads_everything_exactly_once(spark, broker, backlog_topic, tmp_path, read_path):
    topic, sent = backlog_topic
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=97, readPath=read_path)
    run_available_now(spark, opts, tmp_path / "cp", sink)
    assert_exactly(sink.rows, sent)
    assert len(sink.batches) > 3  # the entry cap split the backlog into several micro-batches
    row = next(r for r in sink.rows if r.value == b"batched-0")
    assert row.topic == f"{topic}-partition-{row.partition}" and row.publishTime is not None and row.eventTime is None


def test_trigger_once_reads_everything_in_one_batch(spark, broker, backlog_topic, tmp_path):
    topic, sent = backlog_topic
    sink = Collected()
    q = start_collecting(spark, source_options(broker, topic, startingOffsets="earliest"), sink, tmp_path / "cp", once=True)
    assert q.awaitTermination(180)
    assert len(sink.batches) == 1
    assert_exactly(sink.rows, sent)


def test_processing_time_trigger_and_new_data_while_running(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"live-{unique}", 2)
    sent = produce(pulsar_client, topic, 300, batch=7)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=20)
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: sink.count() >= 300, 120, what="backlog read")
        sent += produce(pulsar_client, topic, 50, prefix="late")
        wait_until(lambda: sink.count() >= 350, 60, what="new data read")
        wait_caught_up(q)
    finally:
        q.stop()
    assert_exactly(sink.rows, sent)
    per_batch_entries = [len({entry_of(bytes(r.messageId)) for r in rows}) for rows in sink.batches.values()]
    assert max(per_batch_entries) <= 20


def test_restart_on_checkpoint_continues_exactly_once(spark, broker, backlog_topic, tmp_path):
    """The restart also moves the query from the native read path (auto, where installed) to the Python one."""
    topic, sent = backlog_topic
    checkpoint = tmp_path / "cp"
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=60)
    q = start_collecting(spark, opts, sink, checkpoint, processingTime="100 milliseconds")
    wait_until(lambda: len(sink.batches) >= 3, 120, what="three batches")
    q.stop()
    first_run = sink.count()
    assert 0 < first_run < len(sent)
    run_available_now(spark, {**opts, "readPath": "python"}, checkpoint, sink)
    assert_exactly(sink.rows, sent)


def test_partition_added_mid_stream_is_read_from_its_beginning(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"grow-{unique}", 2)
    sent = produce(pulsar_client, topic, 40)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: sink.count() >= 40, 60, what="first partitions")
        admin.update_partitions(TopicName.parse(topic), 3)
        sent += produce(pulsar_client, topic, 30, prefix="after")  # round-robin: 10 land in the new partition
        wait_until(lambda: sink.count() >= 70, 60, what="new partition read")
        wait_caught_up(q)
    finally:
        q.stop()
    assert_exactly(sink.rows, sent)
    assert {r.partition for r in sink.rows} == {0, 1, 2}


def test_topics_pattern_picks_up_new_topics(spark, broker, admin, pulsar_client, tmp_path, unique):
    first = create_topic(admin, f"pat-{unique}-a", 0)
    sent = produce(pulsar_client, first, 10)
    sink = Collected()
    opts = source_options(broker, None, topicsPattern=f"persistent://public/default/pat-{unique}-.*", startingOffsets="earliest")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: sink.count() >= 10, 60, what="first topic")
        second = create_topic(admin, f"pat-{unique}-b", 2)
        sent += produce(pulsar_client, second, 10, prefix="second")
        wait_until(lambda: sink.count() >= 20, 60, what="second topic")
        wait_caught_up(q)
    finally:
        q.stop()
    assert_exactly(sink.rows, sent)
    assert {r.partition for r in sink.rows} == {-1, 0, 1}


def test_starting_latest_time_and_positions(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"starts-{unique}", 0)
    old = produce(pulsar_client, topic, 30)
    time.sleep(0.05)
    t0 = int(time.time() * 1000)
    time.sleep(0.05)
    new = produce(pulsar_client, topic, 20, prefix="new")
    # startingTime: exactly the messages published from t0 on
    sink = Collected()
    run_available_now(spark, source_options(broker, topic, startingTime=t0), tmp_path / "t", sink)
    assert_exactly(sink.rows, new)
    # startingOffsets JSON: a position is the first entry to read (here the 11th message)
    ledger, entry, _ = old[10].position
    sink = Collected()
    run_available_now(spark, source_options(broker, topic, startingOffsets=f'{{"{topic}": {{"ledgerId": {ledger}, "entryId": {entry}}}}}'),
                      tmp_path / "p", sink)
    assert_exactly(sink.rows, old[10:] + new)
    # latest: only what arrives after the query started
    sink = Collected()
    q = start_collecting(spark, source_options(broker, topic), sink, tmp_path / "l", processingTime="200 milliseconds")
    try:
        wait_until(lambda: q.lastProgress is not None, 60, what="first batch")
        later = produce(pulsar_client, topic, 5, prefix="later")
        wait_until(lambda: sink.count() >= 5, 60, what="later messages")
        wait_caught_up(q)
    finally:
        q.stop()
    assert_exactly(sink.rows, later)


def test_reported_latest_offset_carries_backlog(spark, broker, backlog_topic, tmp_path):
    topic, sent = backlog_topic
    # Counted from where the broker put each message: a producer batch cut short by its publish delay
    # (a loaded machine) makes one more entry than count / batch size.
    stored_entries = len({(s.partition, s.position[0], s.position[1]) for s in sent})
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=100, progressPerPartition="true")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="1 second")
    try:
        # The first batch that read rows (batch 0): a later one may finish while we look.
        wait_until(lambda: any(p["numInputRows"] > 0 for p in q.recentProgress), 60, what="progress")
        first = next(p for p in q.recentProgress if p["numInputRows"] > 0)
        report = json.loads(first["sources"][0]["latestOffset"])
    finally:
        q.stop()
    parts = report["perPartition"]
    assert set(parts) == {f"{topic}-partition-{i}" for i in range(4)}
    assert report["entriesBehindLatest"] == sum(p["entriesBehind"] for p in parts.values()) == stored_entries - 100
    assert report["throttle"]["readLimitHeld"] > 0  # maxEntriesPerTrigger cut the batch
    assert all(p["messagesBehind"] >= p["entriesBehind"] for p in parts.values())


def _start_error(spark, opts, tmp_path) -> str:
    try:
        q = read_stream(spark, opts).writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")) \
            .trigger(processingTime="200 milliseconds").start()
    except Exception as e:  # invalid options fail at load()/start()
        return str(e)
    return failure_of(q, 90)


def test_unknown_topic_is_a_clear_error(spark, broker, tmp_path, unique):
    started = time.monotonic()
    message = _start_error(spark, source_options(broker, f"no-such-topic-{unique}"), tmp_path)
    assert f"persistent://public/default/no-such-topic-{unique} does not exist" in message
    assert time.monotonic() - started < 60


def test_unreachable_admin_url_is_a_clear_error(spark, broker, backlog_topic, tmp_path):
    topic, _ = backlog_topic
    opts = {**source_options(broker, topic), "admin.url": "http://127.0.0.1:9", "adminTimeoutMs": "2000"}
    message = _start_error(spark, opts, tmp_path)
    assert "Cannot reach the Pulsar admin API at http://127.0.0.1:9" in message and "admin.url" in message


def test_invalid_option_fails_at_load(spark, broker, backlog_topic, tmp_path):
    topic, _ = backlog_topic
    message = _start_error(spark, source_options(broker, topic, dispatchThrottlingRatePerTopicInMsg="0"), tmp_path)
    assert "dispatchThrottlingRatePerTopicInMsg" in message and "positive integer, or -1" in message


def test_starting_offsets_naming_a_missing_partition(spark, broker, backlog_topic, tmp_path):
    topic, _ = backlog_topic
    opts = source_options(broker, topic, startingOffsets=f'{{"{topic}-partition-9": "earliest"}}')
    message = _start_error(spark, opts, tmp_path)
    assert f"{topic}-partition-9" in message and "does not read" in message


def test_unreachable_broker_read_times_out_clearly(spark, broker, backlog_topic, tmp_path):
    topic, _ = backlog_topic
    opts = {**source_options(broker, topic, startingOffsets="earliest", pollTimeoutMs="3000",
                             **{"pulsar.client.operationTimeoutSeconds": "3", "pulsar.client.connectionTimeoutMs": "1000"}),
            "service.url": "pulsar://127.0.0.1:9"}
    started = time.monotonic()
    message = _start_error(spark, opts, tmp_path)
    assert "pulsar://127.0.0.1:9" in message
    assert time.monotonic() - started < 120


def backfill_of_three_ledgers(broker, admin, pulsar_client, tmp_path, name: str, unique: str):
    """A 3-ledger topic (50, 50, 20 entries) whose first ledger only this query needs: another
    subscription holds the rest. Options read it at one ledger per hour (batch mode)."""
    topic = create_topic(admin, f"{name}-{unique}", 0)
    sent = produce(pulsar_client, topic, 120)
    first, second = sorted({s.position[0] for s in sent})[:2]
    admin.create_subscription(TopicName.parse(topic), f"other-group-{unique}", EntryPosition(second, -1))
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch",
                          dispatchThrottlingRatePerTopicInMsg="50", ratePeriodInSecond="3600",
                          quotaStatePath=str(tmp_path / "quota.sqlite"))
    return topic, sent, first, opts


def test_restart_after_retention_deleted_the_ledger_read_is_not_loss(spark, broker, admin, pulsar_client, tmp_path, unique):
    """A throttled backfill (no durable subscription) stops after reading a whole ledger; retention
    then deletes that ledger, while another subscription keeps the rest. The restart must not
    report loss: the offset says "before the next ledger", not "after entry 49 of a gone ledger"."""
    topic, sent, first, opts = backfill_of_three_ledgers(broker, admin, pulsar_client, tmp_path, "read-then-trimmed", unique)
    sink = Collected()
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        # The hour's quota: one batch. Its progress is posted once Spark committed it: a batch stopped
        # before its commit is re-run on restart, and its deleted entries would then be loss.
        wait_until(lambda: sum(p["numInputRows"] for p in q.recentProgress) >= 50, 90, what="the first ledger")
    finally:
        q.stop()
    assert sink.count() in (50, 100), sink.count()  # 100: the run crossed a whole hour
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id > first)
    unthrottled = {**opts, "dispatchThrottlingRatePerTopicInMsg": "-1"}
    q = start_collecting(spark, unthrottled, sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(120), "the restarted query did not finish"
    assert q.exception() is None, q.exception()  # failOnDataLoss=true: a loss report fails it
    assert Counter(identity(r) for r in sink.rows) == Counter(sent_identity(s) for s in sent)


def test_retention_deleting_an_uncommitted_first_batch_is_reported_as_loss(spark, broker, admin, pulsar_client, tmp_path, unique):
    """The same backfill, but the first batch fails after the sink stored it, before Spark commits
    it, and retention then deletes its ledger. Spark re-runs the batch on restart from a new
    initialOffset() call, where "earliest" now lies past the deleted ledger: the re-run must not read
    nothing in silence (an idempotent sink would lose the batch); it is loss, and the query says so."""
    topic, _, first, opts = backfill_of_three_ledgers(broker, admin, pulsar_client, tmp_path, "unread-then-trimmed", unique)
    stored = Collected()

    def store_then_crash(df, batch_id: int) -> None:
        stored.sink(df, batch_id)
        raise RuntimeError("injected crash after the sink stored the batch")

    q = read_stream(spark, opts).writeStream.foreachBatch(store_then_crash) \
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="200 milliseconds").start()
    assert "injected crash" in failure_of(q, 90)
    assert sorted(stored.batches) == [0] and stored.count() == 50
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id > first)
    q = start_collecting(spark, opts, Collected(), tmp_path / "cp", availableNow=True)
    message = failure_of(q, 120)
    assert f"Data loss in {topic}" in message and f"entries after {first}:-1" in message, message


def test_data_loss_fails_or_continues(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"loss-{unique}", 0)
    sent = produce(pulsar_client, topic, 120)  # 3 ledgers
    checkpoint = tmp_path / "cp"
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=10)
    q = start_collecting(spark, opts, sink, checkpoint, processingTime="100 milliseconds")
    wait_until(lambda: sink.count() >= 10, 60, what="first batch")
    q.stop()
    read_before = {bytes(r.value) for r in sink.rows}
    trim_everything(admin, topic)
    after = produce(pulsar_client, topic, 15, prefix="after")

    message = failure_of(start_collecting(spark, opts, sink, checkpoint, availableNow=True), 90)
    assert f"Data loss in {topic}" in message and "failOnDataLoss=false" in message

    sink2 = Collected()
    q = start_collecting(spark, {**opts, "failOnDataLoss": "false"}, sink2, checkpoint, availableNow=True)
    assert q.awaitTermination(120) and q.exception() is None
    got = [bytes(r.value) for r in sink2.rows]
    assert len(got) == len(set(got))
    assert {s.payload for s in after} <= set(got)  # continues with what is still stored
    assert not read_before & set(got)
    assert len(sent) > 0


def test_deleted_topic_fails_or_continues(spark, broker, admin, pulsar_client, tmp_path, unique):
    for fail in ("true", "false"):
        keep = create_topic(admin, f"del-{unique}-{fail}-keep", 0)
        gone = create_topic(admin, f"del-{unique}-{fail}-gone", 2)
        produce(pulsar_client, keep, 10)
        produce(pulsar_client, gone, 10)
        sink = Collected()
        opts = source_options(broker, None, topics=f"{keep},{gone}", startingOffsets="earliest", failOnDataLoss=fail)
        q = start_collecting(spark, opts, sink, tmp_path / fail, processingTime="200 milliseconds")
        try:
            wait_until(lambda: sink.count() >= 20, 60, what="both topics")
            admin.delete_topic(TopicName.parse(gone), partitioned=True)
            if fail == "true":
                message = failure_of(q, 60)
                assert gone in message and "deleted" in message
            else:
                more = produce(pulsar_client, keep, 5, prefix="more")
                wait_until(lambda: sink.count() >= 25, 60, what="query continues without the deleted topic")
                assert q.isActive
                assert {s.payload for s in more} <= {bytes(r.value) for r in sink.rows}
        finally:
            if q.isActive:
                q.stop()


LEGAL_LOCAL_NAMES = ["hash#tag", "q?x=1", "pct%41", "sp ace"]


def test_any_legal_topic_name_is_read(spark, broker, admin, pulsar_client, tmp_path, unique):
    """`#`, `?`, `%` and spaces are legal in Pulsar names: every admin call percent-encodes them. One query reads a
    topic of each (option topics), in several micro-batches: each name also goes through the checkpoint's offsets."""
    topics = {local: create_topic(admin, f"{local}-{unique}", 2) for local in LEGAL_LOCAL_NAMES}
    sent = {local: produce(pulsar_client, topic, 20, batch=4, prefix=local) + produce(pulsar_client, topic, 6, prefix=f"{local}-single")
            for local, topic in topics.items()}  # 11 entries a topic
    sink = Collected()
    run_available_now(spark, source_options(broker, None, topics=",".join(topics.values()), startingOffsets="earliest",
                                            maxEntriesPerTrigger=15), tmp_path / "cp", sink)
    assert len(sink.batches) >= 3, sink.batches.keys()
    for local, topic in topics.items():
        mine = [r for r in sink.rows if r.topic.startswith(f"{topic}-partition-")]
        assert_exactly(mine, sent[local])
        assert {r.topic for r in mine} == {f"{topic}-partition-0", f"{topic}-partition-1"}, local
    assert len(sink.rows) == sum(len(s) for s in sent.values())
