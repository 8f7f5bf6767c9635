"""Issue 16: topics with a schema read as columns. Producers write as they do in the field: an
AVRO topic and a JSON topic each written by a service on schema version 1 and, at the same time,
one already upgraded to version 2 (an added field with a default), batched, over two partitions;
a STRING topic; a producer without a schema writing garbage into an AVRO topic (the broker accepts
it unless schema validation is enforced). Every test compares the exact rows delivered with what
was sent."""

from __future__ import annotations

from collections import Counter

import pulsar
import pytest
from helpers import create_topic, wait_until
from pulsar.schema import AvroSchema, Double, Integer, JsonSchema, Record, String
from streaming import Collected, failure_of, source_options, start_collecting


class Order(Record):  # version 1, as the older service still writes it
    _avro_namespace = "shop"
    item = String()
    qty = Integer()


OrderV1 = Order


class Order(Record):  # type: ignore[no-redef]  # version 2: the same record with a field added
    _avro_namespace = "shop"
    item = String()
    qty = Integer()
    price = Double(required_default=True)


OrderV2 = Order
N = 60  # per producer


def write_two_versions(client: pulsar.Client, topic: str, schema_class) -> Counter:
    """Two services at once, interleaved: one on version 1, one on version 2; returns the rows
    (item, qty, price) a reader on the latest version must see."""
    old = client.create_producer(topic, schema=schema_class(OrderV1), batching_max_messages=5,
                                 batching_max_publish_delay_ms=20, producer_name=f"{topic}-v1")
    new = client.create_producer(topic, schema=schema_class(OrderV2), batching_max_messages=5,
                                 batching_max_publish_delay_ms=20, producer_name=f"{topic}-v2")
    expected: Counter = Counter()
    for i in range(N):
        old.send_async(OrderV1(item=f"old-{i}", qty=i), None, partition_key=f"k{i % 7}")
        new.send_async(OrderV2(item=f"new-{i}", qty=i, price=i / 2), None, partition_key=f"k{i % 7}")
        expected[(f"old-{i}", i, None, f"k{i % 7}", f"{topic}-v1")] += 1  # version 1 has no price: the default, null
        expected[(f"new-{i}", i, i / 2, f"k{i % 7}", f"{topic}-v2")] += 1
    old.flush()
    new.flush()
    old.close()
    new.close()
    return expected


def read_all(spark, broker, topic: str, tmp_path, **extra: str):
    sink = Collected()
    query = start_collecting(spark, source_options(broker, topic, startingOffsets="earliest", **extra), sink,
                             tmp_path / "cp", availableNow=True)
    assert query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return sink.rows, query


@pytest.mark.parametrize("schema_class", [AvroSchema, JsonSchema], ids=["avro", "json"])
def test_two_schema_versions_read_into_the_latest_as_columns(spark, broker, admin, pulsar_client, unique, tmp_path, schema_class):
    topic = create_topic(admin, f"schema-{schema_class.__name__.lower()}-{unique}", 2)
    expected = write_two_versions(pulsar_client, topic, schema_class)
    rows, _ = read_all(spark, broker, topic, tmp_path, maxEntriesPerTrigger="7")
    assert Counter((r.item, r.qty, r.price, r["__key"], r["__producerName"]) for r in rows) == expected
    assert {r["__topic"] for r in rows} == {f"{topic}-partition-0", f"{topic}-partition-1"}
    assert all(r["__messageId"] and r["__publishTime"] for r in rows)


def test_string_topic_gives_a_typed_value_and_raw_layout_on_request(spark, broker, admin, pulsar_client, unique, tmp_path):
    topic = create_topic(admin, f"schema-string-{unique}", 0)
    producer = pulsar_client.create_producer(topic, schema=pulsar.schema.StringSchema())
    sent = ["héllo", "", "x" * 300, "last"]
    for text in sent:
        producer.send(text, properties={"n": str(len(text))})
    producer.close()
    rows, _ = read_all(spark, broker, topic, tmp_path)
    assert Counter((r.value, r["__messageProperties"]["n"]) for r in rows) == Counter((t, str(len(t))) for t in sent)
    raw, _ = read_all(spark, broker, topic, tmp_path / "raw", decodeSchema="false")
    assert Counter(bytes(r.value) for r in raw) == Counter(t.encode() for t in sent)
    assert raw[0].topic == topic and raw[0].properties["n"]


def test_undecodable_payloads_fail_naming_the_message_or_go_to_the_corrupt_record_column(spark, broker, admin, pulsar_client,
                                                                                        unique, tmp_path):
    topic = create_topic(admin, f"schema-garbage-{unique}", 0)
    good = pulsar_client.create_producer(topic, schema=AvroSchema(OrderV1))
    good.send(OrderV1(item="fine", qty=1))
    garbage = pulsar_client.create_producer(topic)  # no schema: the broker accepts any bytes
    garbage.send(b"\xff\xff\xff\xff")
    garbage.close()
    good.send(OrderV1(item="after", qty=2))
    good.close()

    query = start_collecting(spark, source_options(broker, topic, startingOffsets="earliest"), Collected(), tmp_path / "fail",
                             availableNow=True)
    error = failure_of(query, 120)
    assert "Cannot decode message" in error and topic in error and "decodeErrorMode=permissive" in error, error

    rows, _ = read_all(spark, broker, topic, tmp_path / "keep", decodeErrorMode="permissive")
    assert Counter((r.item, r.qty, r["__corruptRecord"]) for r in rows) == Counter(
        [("fine", 1, None), (None, None, b"\xff\xff\xff\xff"), ("after", 2, None)])


def test_plain_topic_metadata_keeps_tombstones_ordering_keys_and_producer_names(spark, broker, admin, pulsar_client, unique,
                                                                                tmp_path):
    topic = create_topic(admin, f"metadata-{unique}", 2)
    producer = pulsar_client.create_producer(topic, producer_name=f"writer-{unique}", batching_max_messages=4,
                                             batching_max_publish_delay_ms=20)
    sent: Counter = Counter()
    for i in range(40):
        if i % 5 == 0:  # a tombstone (Java: value(null)): null, not an empty payload
            producer.send_async(None, None, partition_key=f"gone-{i}")
            sent[(None, f"gone-{i}", None)] += 1
        elif i % 5 == 1:
            producer.send_async(b"", None, partition_key=f"empty-{i}", ordering_key=f"o{i}")
            sent[(b"", f"empty-{i}", f"o{i}")] += 1
        else:
            producer.send_async(f"v{i}".encode(), None, ordering_key=f"o{i}")
            sent[(f"v{i}".encode(), None, f"o{i}")] += 1
    producer.flush()
    producer.close()
    rows, _ = read_all(spark, broker, topic, tmp_path)
    assert Counter((None if r.value is None else bytes(r.value), r.key, r.orderingKey) for r in rows) == sent
    assert {r.producerName for r in rows} == {f"writer-{unique}"}


def test_a_pattern_query_reads_later_topics_of_its_schema_and_stops_on_another(spark, broker, admin, pulsar_client, unique,
                                                                                tmp_path):
    """A pattern's columns are those its topics carried when the query was defined: a topic that
    appears later with a newer version of the record is read into them; one with another schema
    type stops the query naming it, before any of its messages is read."""
    def write(topic: str, schema, record_class, items: list[str]) -> None:
        producer = pulsar_client.create_producer(topic, schema=schema(record_class))
        for i, item in enumerate(items):
            producer.send(record_class(item=item, qty=i) if record_class is OrderV1 else record_class(item=item, qty=i, price=1.0))
        producer.close()

    first = create_topic(admin, f"pattern-{unique}-eu", 0)
    write(first, AvroSchema, OrderV1, ["eu-0", "eu-1"])
    sink = Collected()
    opts = source_options(broker, None, topicsPattern=f"persistent://public/default/pattern-{unique}-.*", startingOffsets="earliest")
    query = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="500 milliseconds")
    try:
        wait_until(lambda: sink.count() >= 2 or not query.isActive, 60, what="the first topic's rows")
        later = create_topic(admin, f"pattern-{unique}-us", 0)
        write(later, AvroSchema, OrderV2, ["us-0", "us-1", "us-2"])  # version 2 of the record: read into version 1's columns
        wait_until(lambda: sink.count() >= 5 or not query.isActive, 60, what="the later topic's rows")
        assert Counter((r.item, r.qty, r["__topic"]) for r in sink.rows) == Counter(
            [("eu-0", 0, first), ("eu-1", 1, first), ("us-0", 0, later), ("us-1", 1, later), ("us-2", 2, later)])
        assert "price" not in sink.rows[0].asDict()

        other = create_topic(admin, f"pattern-{unique}-json", 0)
        write(other, JsonSchema, OrderV1, ["json-0"])
        error = failure_of(query, 60)
    finally:
        query.stop()
    assert f"Topic {other} carries schema type JSON, but this query decodes AVRO" in error, error
    assert sink.count() == 5  # nothing of the JSON topic was read
