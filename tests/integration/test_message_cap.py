"""maxOffsetsPerTrigger (maxMessagesPerTrigger here) on a real broker and Spark: a topic a batching producer wrote
10 messages per entry, read 7 messages per micro-batch under Trigger.AvailableNow on both read paths, so batches
end inside entries; and a query stopped after two batches and restarted from its checkpoint. Every batch holds 7
rows but the last, and every message arrives exactly once (the payload multiset)."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from helpers import create_topic, produce, wait_until
from native_path import read_paths
from streaming import Collected, available_now_side_by_side, source_options, start_collecting

CAP = 7
MESSAGES = 50  # over 2 partitions: 25 each, in entries of up to 10 (8 batches of 7 at most)


def batch_sizes(sink: Collected) -> list[int]:
    with sink.lock:
        return [len(sink.batches[b]) for b in sorted(sink.batches) if sink.batches[b]]


def check_batches(sink: Collected, sent: Counter) -> None:
    sizes = batch_sizes(sink)
    assert sizes and all(n == CAP for n in sizes[:-1]) and 0 < sizes[-1] <= CAP, sizes
    assert Counter(bytes(r.value) for r in sink.rows) == sent


@pytest.fixture(scope="module")
def batched_topic(admin, pulsar_client):
    topic = create_topic(admin, f"msgcap-{uuid.uuid4().hex[:10]}", 2)
    sent = produce(pulsar_client, topic, MESSAGES, batch=10, prefix="cap")
    # Batched as a producer batches: entries of many messages, so a cap of 7 must cut inside them.
    assert max(s.position[2] for s in sent) >= CAP, "the producer did not batch"
    return topic, Counter(s.payload for s in sent)


@pytest.mark.parametrize("read_path", read_paths("python", "native"))
def test_available_now_reads_seven_messages_per_batch_across_batched_entries(spark, broker, batched_topic, tmp_path, read_path):
    topic, sent = batched_topic
    opts = source_options(broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger=CAP, readPath=read_path,
                          quotaStatePath=tmp_path / "q.sqlite")
    _, sinks = available_now_side_by_side(spark, {read_path: (opts, tmp_path / "cp")})
    check_batches(sinks[read_path], sent)
    assert len(batch_sizes(sinks[read_path])) == -(-MESSAGES // CAP)


def test_a_query_stopped_after_two_batches_goes_on_from_its_checkpoint_exactly_once(spark, broker, batched_topic, tmp_path):
    topic, sent = batched_topic
    opts = source_options(broker, topic, startingOffsets="earliest", maxMessagesPerTrigger=CAP,
                          quotaStatePath=tmp_path / "q.sqlite")
    sink = Collected()  # both runs: a batch the restart runs again replaces its rows, as an idempotent sink's
    first = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    try:
        wait_until(lambda: len(batch_sizes(sink)) >= 2 or not first.isActive, 120, what="two batches")
    finally:
        first.stop()
    assert first.exception() is None, first.exception()
    assert sink.count() < MESSAGES, "the first run read everything: nothing left to restart from"
    # The checkpoint the restart starts from ends inside entries (4 + 3 messages of entries of up to 10).
    assert '"batchIndex"' in (tmp_path / "cp" / "offsets" / "1").read_text()
    second = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    try:
        assert second.awaitTermination(180), "the restarted AvailableNow query did not finish"
    finally:
        second.stop()
    assert second.exception() is None, second.exception()
    check_batches(sink, sent)
