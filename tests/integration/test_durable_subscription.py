"""Issue 12 (items 3 and 8): with durableSubscription=true the source's subscription follows the
query's commits, so retention (here: none at all) deletes only what the query has read; its backlog
shows in the broker's stats; a restart after the fully read ledgers were deleted reports no loss."""

from __future__ import annotations

from collections import Counter

from helpers import create_topic, produce, trim_until, wait_until
from streaming import Collected, identity, sent_identity, source_options, start_collecting

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.topics import TopicName


def run_available_now(spark, opts, checkpoint, sink) -> None:
    q = start_collecting(spark, opts, sink, checkpoint, availableNow=True)
    assert q.awaitTermination(180) and q.exception() is None, q.exception()


def test_durable_subscription_keeps_unread_entries_and_reports_no_false_loss(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"durable-{unique}", 0)
    name = TopicName.parse(topic)
    sent = produce(pulsar_client, topic, 150)  # 3 full ledgers of 50
    sub = f"ingest-{unique}"
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=30, durableSubscription="true",
                          subscription=sub)
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: len(sink.batches) >= 3, 120, what="three batches")  # commit() moved the cursor twice
    finally:
        q.stop()
    # The backlog shows in Pulsar's own stats, and retention 0 + trim deletes nothing unread.
    backlog = admin.stats(name)["subscriptions"][sub]["msgBacklog"]
    assert 0 < backlog < len(sent) - sink.count() + 31, backlog  # the cursor trails the checkpoint by one batch
    first_ledger = min(s.position[0] for s in sent)
    cursor = PartitionLayout.from_internal_stats(topic, admin.internal_stats(name)).cursor(sub)
    assert cursor is not None and cursor.ledger_id > first_ledger, cursor  # the first ledger was read: it may go
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id > first_ledger)
    run_available_now(spark, opts, tmp_path / "cp", sink)  # failOnDataLoss=true: would fail on a report
    assert Counter(identity(r) for r in sink.rows) == Counter(sent_identity(s) for s in sent)

    # Caught up and stopped: retention deletes the ledgers the cursor has passed (Spark commits a
    # batch to the source when it plans the next one, so the last batch's data stays); no loss.
    cursor = PartitionLayout.from_internal_stats(topic, admin.internal_stats(name)).cursor(sub)
    assert cursor is not None and cursor.ledger_id > first_ledger + 1, cursor
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id >= cursor.ledger_id)
    after = produce(pulsar_client, topic, 10, prefix="after")
    run_available_now(spark, opts, tmp_path / "cp", sink)
    assert Counter(identity(r) for r in sink.rows) == Counter(sent_identity(s) for s in sent + after)
