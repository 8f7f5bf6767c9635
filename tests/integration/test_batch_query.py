"""Issue 34: batch queries, spark.read.format("pulsar-throttled"), over the messages between
startingOffsets and endingOffsets, exactly once: what a notebook does first to look at a topic."""

from __future__ import annotations

import json
import time
from collections import Counter

import pulsar
import pytest
from helpers import Sent, create_topic, mixed_backlog, produce
from java_producer import COMMITTED, HISTORY
from streaming import source_options

from pulsar_throttled_source.batch import PulsarBatchReader
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.protobuf_wire import first_chunk_position
from pulsar_throttled_source.topics import TopicName


def read_batch(spark, opts: dict[str, str]) -> list:
    return spark.read.format("pulsar-throttled").options(**opts).load().collect()


def entry_of(s: Sent) -> tuple[int, int]:
    """The entry a message belongs to: a chunked message's first chunk."""
    return first_chunk_position(s.message_id) or s.position[:2]


def test_a_partitioned_topic_from_earliest_to_latest_and_a_range_inside_it(spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"batch-{unique}", 2)
    sent = mixed_backlog(pulsar_client, topic)  # single messages, producer batches, chunked messages
    rows = read_batch(spark, source_options(broker, topic))  # a batch query starts at earliest by default
    assert Counter(bytes(r.value) for r in rows) == Counter(s.payload for s in sent)
    assert {r.topic for r in rows} == {f"{topic}-partition-0", f"{topic}-partition-1"}
    # Each task's range carries its partition's messages per entry (the publish counters): its reader's receiver
    # queue is sized in messages, as the broker counts permits (reading/receiver_queue.py; issue 44).
    planned = PulsarBatchReader(parse_options({k.lower(): str(v) for k, v in source_options(broker, topic).items()}))
    for r in planned.partitions():
        stats = admin.stats(TopicName.parse(r.partition))
        added = admin.internal_stats(TopicName.parse(r.partition))["entriesAddedCounter"]
        assert r.msgs_per_entry == stats["msgInCounter"] / added > 1, r.partition

    # A range inside partition 0: from its 3rd entry up to (not including) its 7th.
    p0 = f"{topic}-partition-0"
    entries = sorted({entry_of(s) for s in sent if s.partition == 0})
    first, stop = entries[2], entries[6]
    opts = source_options(broker, topic, startingOffsets=json.dumps({p0: {"ledgerId": first[0], "entryId": first[1]}}),
                          endingOffsets=json.dumps({p0: {"ledgerId": stop[0], "entryId": stop[1]}}))
    inside = Counter(s.payload for s in sent if s.partition == 0 and first <= entry_of(s) < stop)
    assert Counter(bytes(r.value) for r in read_batch(spark, opts)) == inside  # partition 1 starts at latest: nothing


def test_a_pattern_over_several_topics_and_a_schema_topic_as_columns(spark, broker, admin, pulsar_client, unique):
    a, b = (create_topic(admin, f"batchpat-{unique}-{name}", n) for name, n in (("a", 2), ("b", 0)))
    sent = produce(pulsar_client, a, 40, batch=5) + produce(pulsar_client, b, 15)
    rows = read_batch(spark, source_options(broker, None, topicsPattern=f"persistent://public/default/batchpat-{unique}-.*"))
    assert Counter(bytes(r.value) for r in rows) == Counter(s.payload for s in sent)

    class Order(pulsar.schema.Record):
        item = pulsar.schema.String()
        qty = pulsar.schema.Integer()

    typed = create_topic(admin, f"batchavro-{unique}", 0)
    producer = pulsar_client.create_producer(typed, schema=pulsar.schema.AvroSchema(Order))
    for i in range(12):
        producer.send(Order(item=f"i{i}", qty=i))
    producer.close()
    rows = read_batch(spark, source_options(broker, typed))
    assert sorted((r.item, r.qty) for r in rows) == sorted((f"i{i}", i) for i in range(12))


def test_wrong_ranges_and_stream_only_options_are_clear_errors_at_once(spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"batchbad-{unique}", 0)
    sent = produce(pulsar_client, topic, 10)
    ledger, last = max(s.position[:2] for s in sent)
    partition = topic  # non-partitioned: the topic is its own partition
    cases = {
        "beyond the end": ({"endingOffsets": json.dumps({partition: {"ledgerId": ledger, "entryId": last + 5}})},
                           rf"endingOffsets' for partition {partition}: {ledger}:{last + 5} is beyond the partition's end"),
        "start after end": ({"startingOffsets": json.dumps({partition: {"ledgerId": ledger, "entryId": 6}}),
                             "endingOffsets": json.dumps({partition: {"ledgerId": ledger, "entryId": 3}})},
                            rf"start \({ledger}:6\) is after the end \({ledger}:3\)"),
        "a quota": ({"dispatchThrottlingRatePerTopicInMsg": "10"}, r"throttle a stream's micro-batches; a batch query"),
        "a trigger limit": ({"maxEntriesPerTrigger": "10"}, r"maxEntriesPerTrigger throttle a stream's micro-batches"),
    }
    for name, (extra, message) in cases.items():
        started = time.monotonic()
        with pytest.raises(Exception, match=message):
            read_batch(spark, source_options(broker, topic, **extra))
        assert time.monotonic() - started < 30, name
    # The same positions as an exclusive end at the partition's end and an empty range are fine.
    end = {"endingOffsets": json.dumps({partition: {"ledgerId": ledger, "entryId": last + 1}})}
    assert len(read_batch(spark, source_options(broker, topic, **end))) == 10
    same = json.dumps({partition: {"ledgerId": ledger, "entryId": 4}})
    assert read_batch(spark, source_options(broker, topic, startingOffsets=same, endingOffsets=same)) == []
    with pytest.raises(Exception, match="'endingOffsets' applies to batch queries"):
        spark.readStream.format("pulsar-throttled").options(**source_options(broker, topic, endingOffsets="latest")).load() \
            .writeStream.format("noop").start().awaitTermination(30)


def test_a_time_range_reads_the_messages_published_between_the_two_times(spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"batchtime-{unique}", 2)

    def boundary() -> int:
        time.sleep(0.05)  # publish times are the broker's milliseconds: keep each group clear of the boundary
        at = int(time.time() * 1000)
        time.sleep(0.05)
        return at

    before = produce(pulsar_client, topic, 12, prefix="before")
    t1 = boundary()
    between = produce(pulsar_client, topic, 20, batch=5, prefix="between")  # batched: entries of 5
    t2 = boundary()
    after = produce(pulsar_client, topic, 9, prefix="after")

    def payloads(**extra: str) -> Counter:
        return Counter(bytes(r.value) for r in read_batch(spark, source_options(broker, topic, **extra)))

    # startingTime is inclusive (published at or after), endingTime exclusive (published before), as Kafka's timestamps.
    assert payloads(startingTime=str(t1), endingTime=str(t2)) == Counter(s.payload for s in between)
    assert payloads(endingTime=str(t1)) == Counter(s.payload for s in before)  # from earliest
    assert payloads(startingTime=str(t2)) == Counter(s.payload for s in after)  # to latest
    assert payloads(startingTime=str(t1), endingTime=str(t1)) == Counter()

    started = time.monotonic()
    with pytest.raises(Exception, match="'endingOffsets' and 'endingTime' are exclusive"):
        read_batch(spark, source_options(broker, topic, endingOffsets="latest", endingTime=str(t2)))
    with pytest.raises(Exception, match=r"start .* is after the end .*'startingTime' and 'endingTime'"):
        read_batch(spark, source_options(broker, topic, startingTime=str(t2), endingTime=str(t1)))
    assert time.monotonic() - started < 30
    with pytest.raises(Exception, match="'endingTime' applies to batch queries"):
        spark.readStream.format("pulsar-throttled").options(**source_options(broker, topic, endingTime=str(t2))).load() \
            .writeStream.format("noop").start().awaitTermination(30)


def test_a_transactional_topic_reads_what_was_committed_once_and_stops_before_an_open_transaction(spark, broker, admin, txn_jvm, unique):
    """A producer's transactions on each partition of a topic (Pulsar's Java client): committed messages
    are read once, aborted ones never, and `latest` ends before a transaction still open when the query
    plans (its messages are not readable yet), without waiting for it."""
    topic = create_topic(admin, f"batch-txn-{unique}", 2)
    txn_jvm.on(f"{topic}-partition-0").do(*HISTORY)
    txn_jvm.on(f"{topic}-partition-1").do(*HISTORY, "begin", "send open0")  # left open
    started = time.monotonic()
    rows = read_batch(spark, source_options(broker, topic))
    assert Counter(bytes(r.value) for r in rows) == COMMITTED + COMMITTED
    assert time.monotonic() - started < 60
    txn_jvm.do("commit")
    rows = read_batch(spark, source_options(broker, topic))  # committed now: read
    assert Counter(bytes(r.value) for r in rows) == COMMITTED + COMMITTED + Counter({b"open0": 1})
