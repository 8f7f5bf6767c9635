"""Issue 32: a topic deleted while a read task reads it ends the matter in seconds, not after
pollTimeoutMs (120 s by default); a restart after retention deleted a fully read ledger is not loss."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest
from helpers import create_topic, produce, wait_until
from native_path import read_paths
from pyspark.sql.streaming.datasource import ReadAllAvailable
from streaming import Collected, failure_of, source_options, start_collecting

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.reading.read import read_range, read_ranges
from pulsar_throttled_source.reading.read_errors import DataLossError
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

SOON_S = 15  # "well under pollTimeoutMs" (120 s), on two busy cores
QUERY_SOON_S = 20  # the same for a whole query: under the client's operation timeout (30 s) too


def _rows_of(sink: Collected, prefix: bytes) -> Counter[bytes]:
    return Counter(bytes(r.value) for r in sink.rows if bytes(r.value).startswith(prefix))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_topic_deleted_while_its_backlog_is_read_under_a_quota(spark, broker, admin, pulsar_client, tmp_path, unique, fail):
    """A pattern-less query of two 2-partition topics at 20 entries a second per partition; one topic is
    deleted while its backlog is read. failOnDataLoss=true: the query fails naming it; false: the batch
    that read it ends and the next one runs, well under pollTimeoutMs, and every message of the other
    topic arrives exactly once."""
    keep = create_topic(admin, f"delq-{unique}-keep", 2)
    gone = create_topic(admin, f"delq-{unique}-gone", 2)
    kept = produce(pulsar_client, keep, 1600, batch=4, prefix="keep")  # 200 entries per partition: read on after the deletion
    produce(pulsar_client, gone, 1600, batch=2, prefix="gone")  # 400 entries per partition: minutes at the quota
    sink = Collected()
    opts = source_options(broker, None, topics=f"{keep},{gone}", startingOffsets="earliest", failOnDataLoss=fail,
                          throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="20",
                          **{"pulsar.reader.receiverQueueSize": "5"})
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        # A query that ended before the deletion (a loaded machine: a Python worker that never started) says why.
        wait_until(lambda: not q.isActive or sum(_rows_of(sink, b"gone").values()) >= 100, 90, what="the backlog being read")
        assert q.isActive, f"the query ended before the deletion: {q.exception()}"
        with sink.lock:
            last_done = max(sink.batches)
        deleted_at = time.monotonic()
        admin.delete_topic(TopicName.parse(gone), partitioned=True)
        if fail == "true":
            message = failure_of(q, QUERY_SOON_S)
            print(f"failed {time.monotonic() - deleted_at:.1f} s after the deletion")
            assert gone in message, message
        else:
            # The batch under way when the topic went ends, and the one after it runs.
            wait_until(lambda: max(sink.batches) >= last_done + 2, QUERY_SOON_S, what="the batch after the deletion")
            print(f"next batch {time.monotonic() - deleted_at:.1f} s after the deletion")
            wait_until(lambda: sum(_rows_of(sink, b"keep").values()) >= len(kept), 60, what="the kept topic read")
            assert q.isActive, q.exception()
            assert _rows_of(sink, b"keep") == Counter(s.payload for s in kept)  # exactly once
            assert max(_rows_of(sink, b"gone").values()) == 1  # what was read of the deleted topic, once
    finally:
        if q.isActive:
            q.stop()


@pytest.mark.parametrize("read_path", read_paths("native", "python"))
@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_read_task_whose_topic_is_deleted_under_it_ends_in_seconds(broker, admin, pulsar_client, unique, caplog, fail, read_path):
    """The task has read part of its range (its reader holds 5 messages at a time, so the rest is still
    on the broker) when the topic is deleted: it fails naming the partition, or (failOnDataLoss=false)
    ends its range with a WARN, within seconds; pollTimeoutMs is 120 s."""
    topic = create_topic(admin, f"deltask-{unique}-{fail}-{read_path}", 2)
    sent = produce(pulsar_client, topic, 400, batch=4)  # 50 entries per partition
    opts = source_options(broker, topic, startingOffsets="earliest", failOnDataLoss=fail, readPath=read_path,
                          maxRowsPerArrowBatch="10", **{"pulsar.reader.receiverQueueSize": "5"})
    parsed = parse_options({k.lower(): str(v) for k, v in opts.items()})
    reader = AdmissionControlStreamReader(parsed)
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    reader.stop()
    task = read_range(parts[0])
    rows = next(task).num_rows
    admin.delete_topic(TopicName.parse(topic), partitioned=True)
    deleted_at = time.monotonic()
    caplog.set_level(logging.WARNING, logger="pulsar_throttled_source.reading.read_errors")
    if fail == "true":
        with pytest.raises(DataLossError, match=rf"planned entries of {parts[0].partition} .* no longer stored"):
            for batch in task:
                rows += batch.num_rows
    else:
        rows += sum(batch.num_rows for batch in task)
        assert any("continuing without them" in r.getMessage() for r in caplog.records)
    assert time.monotonic() - deleted_at < SOON_S
    assert 0 < rows < sum(1 for s in sent if s.partition == 0)  # what was read before the deletion, once


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_batch_planned_before_its_topic_was_deleted_gets_no_task_for_it(broker, admin, pulsar_client, unique, fail):
    """The deletion falls between a micro-batch's plan and its tasks (what the query above meets when
    it is slow), with a reader on the topic open, whose reconnect re-creates a partition empty (broker
    topic auto-creation). The tasks are made on the driver at once: with failOnDataLoss=true that fails
    naming the topic; with false the deleted topic gets no task and the other topic's tasks read its
    messages exactly once. Before: tasks without an entry list, each waiting pollTimeoutMs (120 s)."""
    keep = create_topic(admin, f"delplan-{unique}-keep", 2)
    gone = create_topic(admin, f"delplan-{unique}-gone", 2)
    kept = produce(pulsar_client, keep, 40, batch=4, prefix="keep")
    produce(pulsar_client, gone, 40, batch=4, prefix="gone")
    opts = source_options(broker, None, topics=f"{keep},{gone}", startingOffsets="earliest", failOnDataLoss=fail)
    metadata_refresh_s = int(opts["metadataRefreshIntervalMs"]) / 1000
    reader = AdmissionControlStreamReader(parse_options({k.lower(): str(v) for k, v in opts.items()}))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    import pulsar

    still_open = pulsar_client.create_reader(f"{gone}-partition-0", pulsar.MessageId.earliest)  # a running or parked task's
    try:
        admin.delete_topic(TopicName.parse(gone), partitioned=True)
        # Tasks made a little later (a loaded driver): once the catalog's snapshot shows the deletion.
        catalog = reader.planner.catalog
        wait_until(lambda: not any(p.startswith(f"{gone}-partition-") for p in catalog.snapshot().layouts),
                   30 + metadata_refresh_s, what="the catalog's snapshot without the deleted topic")
        deleted_at = time.monotonic()
        if fail == "true":
            with pytest.raises(DataLossError, match=rf"{gone}"):
                reader.partitions(start, end)
            assert time.monotonic() - deleted_at < SOON_S
            return
        tasks = reader.partitions(start, end)
        assert {t.partition for t in tasks} == {f"{keep}-partition-0", f"{keep}-partition-1"}
        rows = [bytes(v) for t in tasks for batch in read_ranges(t) for v in batch.column("value").to_pylist()]
        assert time.monotonic() - deleted_at < SOON_S
        assert Counter(rows) == Counter(s.payload for s in kept)  # exactly once
    finally:
        still_open.close()
        reader.stop()


def _rolled_over_topic(admin, pulsar_client, name: str) -> tuple[str, list, int]:
    """A topic whose first ledger is full (50 entries, the test broker's ledger size) and closed, and
    whose next ledger is open and empty: what a caught-up query sees right after a rollover."""
    topic = create_topic(admin, name, 0)
    sent = produce(pulsar_client, topic, 50, prefix="first")
    (ledger,) = {s.position[0] for s in sent}
    wait_until(lambda: int(admin.internal_stats(TopicName.parse(topic))["ledgers"][-1]["ledgerId"]) > ledger, 30,
               what="the broker to open the next ledger")
    return topic, sent, ledger


def _keep_ledgers_after(admin, topic: str, unique: str, ledger: int) -> None:
    """Another subscription holds everything after `ledger`, so retention deletes that ledger alone."""
    from pulsar_throttled_source.positions import EntryPosition

    stats = admin.internal_stats(TopicName.parse(topic))
    admin.create_subscription(TopicName.parse(topic), f"other-{unique}", EntryPosition(int(stats["ledgers"][-1]["ledgerId"]), -1))


def test_a_caught_up_query_restarts_after_retention_deleted_its_last_read_ledger(spark, broker, admin, pulsar_client, tmp_path, unique):
    """Issue 32: the query held the last entry of a closed ledger; retention deleted that ledger while it
    was stopped; the restart reads the messages written since, once, and reports no loss
    (failOnDataLoss=true): the offset proves the next ledger, still stored, follows the one read."""
    from helpers import trim_until

    topic, sent, ledger = _rolled_over_topic(admin, pulsar_client, f"retained-{unique}")
    _keep_ledgers_after(admin, topic, unique, ledger)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(120) and q.exception() is None
    assert Counter(bytes(r.value) for r in sink.rows) == Counter(s.payload for s in sent)
    later = produce(pulsar_client, topic, 10, prefix="later")
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id > ledger)
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(120), "the restarted query did not finish"
    assert q.exception() is None, q.exception()
    assert Counter(bytes(r.value) for r in sink.rows) == Counter(s.payload for s in sent + later)


def test_unread_entries_deleted_while_stopped_are_still_loss(spark, broker, admin, pulsar_client, tmp_path, unique):
    from helpers import trim_until

    topic, _, ledger = _rolled_over_topic(admin, pulsar_client, f"unread-{unique}")
    _keep_ledgers_after(admin, topic, unique, ledger)
    sink = Collected()
    # One batch of 20 entries an hour: the query stops inside the first ledger.
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="20",
                          ratePeriodInSecond="3600", quotaStatePath=str(tmp_path / "quota.sqlite"))
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in q.recentProgress) >= 20, 90, what="the first batch")
    finally:
        q.stop()
    produce(pulsar_client, topic, 10, prefix="later")
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id > ledger)
    q = start_collecting(spark, {**opts, "dispatchThrottlingRatePerTopicInMsg": "-1"}, sink, tmp_path / "cp", availableNow=True)
    message = failure_of(q, 120)
    assert f"Data loss in {topic}" in message and f"entries after {ledger}:" in message, message
