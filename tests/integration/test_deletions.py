"""Issue 32: a topic deleted while a throttled query reads its backlog ends the matter in seconds,
not after pollTimeoutMs (120 s by default): with failOnDataLoss=true the query fails naming the
topic; with false it goes on with the other topic, whose every message arrives exactly once."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from helpers import create_topic, produce, wait_until
from streaming import Collected, failure_of, source_options, start_collecting

from pulsar_throttled_source.topics import TopicName

SOON_S = 20  # "well under pollTimeoutMs" (120 s), and under the client's operation timeout (30 s)


def rows_of(sink: Collected, prefix: bytes) -> int:
    return sum(1 for r in sink.rows if bytes(r.value).startswith(prefix))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_topic_deleted_while_its_backlog_is_read_under_a_quota(spark, broker, admin, pulsar_client, tmp_path, unique, fail):
    keep = create_topic(admin, f"delq-{unique}-keep", 2)
    gone = create_topic(admin, f"delq-{unique}-gone", 2)
    kept = produce(pulsar_client, keep, 800, batch=4, prefix="keep")  # 100 entries per partition
    produce(pulsar_client, gone, 1600, batch=2, prefix="gone")  # 400 entries per partition: minutes at the quota
    sink = Collected()
    # 20 entries a second per partition: the deleted topic's backlog is still being read when it goes.
    opts = source_options(broker, None, topics=f"{keep},{gone}", startingOffsets="earliest", failOnDataLoss=fail,
                          throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="20", **{"pulsar.reader.receiverQueueSize": "5"})
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: rows_of(sink, b"gone") >= 100, 90, what="the backlog being read")
        deleted_at = time.monotonic()
        admin.delete_topic(TopicName.parse(gone), partitioned=True)
        if fail == "true":
            message = failure_of(q, SOON_S)
            print(f"failed {time.monotonic() - deleted_at:.1f} s after the deletion")
            assert gone in message, message
            return
        wait_until(lambda: rows_of(sink, b"keep") >= len(kept), SOON_S, what="the kept topic read")
        assert time.monotonic() - deleted_at < SOON_S
        assert q.isActive, q.exception()
        got = Counter(bytes(r.value) for r in sink.rows if bytes(r.value).startswith(b"keep"))
        assert got == Counter(s.payload for s in kept)  # exactly once
        gone_rows = Counter(bytes(r.value) for r in sink.rows if bytes(r.value).startswith(b"gone"))
        assert max(gone_rows.values()) == 1  # what was read of the deleted topic, once
    finally:
        if q.isActive:
            q.stop()


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
