"""Issue 34: a batch query over what is no longer stored: a start in a ledger retention deleted, a topic
deleted before the query or between its planning and its read tasks. Each is a clear error naming the topic
and the option (failOnDataLoss=true), or reads what is still stored (failOnDataLoss=false); in seconds, not
after pollTimeoutMs."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter

import pytest
from helpers import create_topic, produce, trim_until, wait_until
from streaming import source_options

from pulsar_throttled_source.batch import PulsarBatchReader
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.reading.read_errors import DataLossError
from pulsar_throttled_source.topics import TopicName

SOON_S = 20  # "well under pollTimeoutMs" (120 s), with a Spark job on two busy cores


def read_batch(spark, opts: dict[str, str]) -> Counter:
    return Counter(bytes(r.value) for r in spark.read.format("pulsar-throttled").options(**opts).load().collect())


def timed(call):
    started = time.monotonic()
    try:
        return call()
    finally:
        assert time.monotonic() - started < SOON_S


def test_a_start_in_a_ledger_retention_deleted(spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"batchtrim-{unique}", 0)
    first = produce(pulsar_client, topic, 50, prefix="first")  # fills the test broker's ledger (50 entries)
    (ledger,) = {s.position[0] for s in first}
    wait_until(lambda: int(admin.internal_stats(TopicName.parse(topic))["ledgers"][-1]["ledgerId"]) > ledger, 30,
               what="the broker to open the next ledger")
    later = produce(pulsar_client, topic, 10, prefix="later")
    # A subscription at the ledger of `later` keeps it: retention deletes the first ledger alone.
    admin.create_subscription(TopicName.parse(topic), f"keep-{unique}", EntryPosition(later[0].position[0], -1))
    trim_until(admin, topic, lambda layout: layout.first is not None and layout.first.ledger_id > ledger)

    start = json.dumps({topic: {"ledgerId": ledger, "entryId": 10}})
    with pytest.raises(Exception, match=rf"Data loss in {topic}: the entries after {ledger}:9 .* no longer stored.*"
                                        r"The batch query's range \(options 'startingOffsets'.*failOnDataLoss=false"):
        timed(lambda: read_batch(spark, source_options(broker, topic, startingOffsets=start)))
    # failOnDataLoss=false: what is still stored after the start.
    assert timed(lambda: read_batch(spark, source_options(broker, topic, startingOffsets=start, failOnDataLoss="false"))) == \
        Counter(s.payload for s in later)
    # A range wholly inside the deleted ledger: loss, or nothing.
    end = json.dumps({topic: {"ledgerId": ledger, "entryId": 20}})
    with pytest.raises(Exception, match=rf"Data loss in {topic}"):
        timed(lambda: read_batch(spark, source_options(broker, topic, startingOffsets=start, endingOffsets=end)))
    assert timed(lambda: read_batch(spark, source_options(broker, topic, startingOffsets=start, endingOffsets=end,
                                                          failOnDataLoss="false"))) == Counter()
    assert read_batch(spark, source_options(broker, topic)) == Counter(s.payload for s in later)  # earliest: what is stored


def test_a_topic_deleted_before_the_query_and_a_partition_it_does_not_have(spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"batchgone-{unique}", 2)
    sent = produce(pulsar_client, topic, 10)
    assert read_batch(spark, source_options(broker, topic)) == Counter(s.payload for s in sent)  # and Python workers warm
    p2 = f"{topic}-partition-2"
    with pytest.raises(Exception, match=rf"'startingOffsets' names partition\(s\) {p2} that the query does not read"):
        timed(lambda: read_batch(spark, source_options(broker, topic, startingOffsets=json.dumps({p2: {"ledgerId": 1, "entryId": 0}}))))
    admin.delete_topic(TopicName.parse(topic), partitioned=True)
    for fail in ("true", "false"):
        # Refused at load() (spark.read's too), failOnDataLoss or not: a deleted topic and a misspelt one look the same.
        with pytest.raises(Exception, match=rf"Topic {topic} does not exist in namespace public/default on .*never creates topics"):
            timed(lambda: read_batch(spark, source_options(broker, topic, failOnDataLoss=fail)))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_topic_deleted_between_planning_and_the_read_tasks(broker, admin, pulsar_client, unique, caplog, fail):
    topic = create_topic(admin, f"batchdel-{unique}-{fail}", 2)
    produce(pulsar_client, topic, 40, batch=4)
    opts = source_options(broker, topic, failOnDataLoss=fail, readPath="python")
    reader = PulsarBatchReader(parse_options({k.lower(): v for k, v in opts.items()}))
    parts = reader.partitions()  # planned: both partitions, 5 entries each
    assert len(parts) == 2
    admin.delete_topic(TopicName.parse(topic), partitioned=True)
    caplog.set_level(logging.WARNING, logger="pulsar_throttled_source.reading.read_errors")
    started = time.monotonic()
    for part in parts:
        if fail == "true":
            with pytest.raises(DataLossError, match=rf"planned entries of {part.partition} .* no longer stored"):
                list(reader.read(part))
        else:
            assert sum(b.num_rows for b in reader.read(part)) == 0
    assert time.monotonic() - started < SOON_S
    if fail == "false":
        assert sum("continuing without them" in r.getMessage() for r in caplog.records) == 2
    assert not any(f"batchdel-{unique}-{fail}" in name for name in admin.list_topics("public/default"))  # not recreated
