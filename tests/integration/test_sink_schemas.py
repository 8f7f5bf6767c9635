"""Issue 53, the sink into topics with a schema: rows encoded with the topic's AVRO, JSON or INT64 schema by a batch write
and a stream (this source's own decoded rows written back), read back with the plain Python client and the matching
schema class: every field, key, property, event time and ordering key as written, a tombstone kept, nothing lost or
duplicated, the topic's one schema version on every message; columns that do not fit are refused before anything is sent."""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections import Counter

import pulsar
import pytest
import requests
from helpers import create_topic
from pulsar.schema import Array, AvroSchema, Double, JsonSchema, Long, Record, String
from streaming import read_stream, source_options

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
INT64 = lambda payload: struct.unpack(">q", payload)[0]  # noqa: E731 (pulsar-client for Python has no INT64 schema class)
VERSION_0 = "\x00" * 8  # Message.schema_version(): the topic's first (and only) schema version


class Reading(Record):
    sensor = String(required=True)
    reading = Double()
    count = Long()
    tags = Array(String())


READING_COLUMNS = "sensor string, reading double, count bigint, tags array<string>"
MESSAGE_COLUMNS = "key string, properties map<string,string>, eventTime timestamp, orderingKey string"


def upload_schema(admin, topic: str, kind: str, definition: str) -> None:
    """The topic's schema as an application's producer would have registered it."""
    local = topic.rsplit("/", 1)[1]
    requests.post(f"{admin.base}/admin/v2/schemas/public/default/{local}/schema",
                  json={"type": kind, "schema": definition, "properties": {}}, timeout=30).raise_for_status()


def schema_versions(admin, topic: str) -> int:
    local = topic.rsplit("/", 1)[1]
    answer = requests.get(f"{admin.base}/admin/v2/schemas/public/default/{local}/schemas", timeout=30)
    answer.raise_for_status()
    return len(answer.json()["getSchemaResponses"])


def read_back(client: pulsar.Client, topic: str, schema, expected: int) -> list[tuple]:
    """Every message of `topic` read with `schema` (pulsar-client's class; else a function of the payload's bytes):
    (value or None, key, properties, event time ms, ordering key)."""
    decode = None if isinstance(schema, pulsar.schema.Schema) else schema
    got: list[tuple] = []
    for partition in client.get_topic_partitions(topic):
        reader = client.create_reader(partition, pulsar.MessageId.earliest, **({} if decode else {"schema": schema}))
        try:
            while reader.has_message_available():
                m = reader.read_next(10_000)
                # The topic's version on each message: the producers declared its schema (for INT64 the broker gives none)
                assert m.has_null_value() or m.schema_version() == (VERSION_0 if decode is None else ""), f"{topic}: {m.message_id()}"
                value = None if m.has_null_value() else decode(m.data()) if decode else m.value()
                if isinstance(value, Record):
                    value = (value.sensor, value.reading, value.count, tuple(value.tags) if value.tags is not None else None)
                got.append((value, m.partition_key() or None, tuple(sorted(m.properties().items())) or None,
                            m.event_timestamp() or None, m.ordering_key() or None))
        finally:
            reader.close()
    assert len(got) == expected, f"{len(got)} messages in {topic}, expected {expected}"
    return got


def sink_options(broker, **extra: str) -> dict[str, str]:
    return {"service.url": broker.service_url, "admin.url": broker.admin_url, **extra}


def reading_rows(topics: list[str]) -> list[tuple]:
    """Rows of the record layout with every message column, round robin over `topics`; the last: a tombstone per topic."""
    rows = []
    for i in range(60):
        rows.append((topics[i % len(topics)], f"s{i % 7}", i / 4 if i % 5 else None, i * 1000 if i % 3 else None,
                     [f"t{i}", "x"] if i % 4 else None, f"k{i % 9}", {"i": str(i)} if i % 2 else None,
                     T0 + dt.timedelta(seconds=i) if i % 6 else None, f"o{i % 3}" if i % 4 == 0 else None))
    rows += [(topic, None, None, None, None, "gone", None, None, None) for topic in topics]  # every field null: no payload
    return rows


def expected_messages(rows: list[tuple], topic: str) -> Counter:
    ms = lambda t: None if t is None else int(t.timestamp() * 1000)  # noqa: E731
    return Counter((None if sensor is None else (sensor, reading, count, tuple(tags) if tags else None), key,
                    tuple(sorted(props.items())) if props else None, ms(at), ordering)
                   for to, sensor, reading, count, tags, key, props, at, ordering in rows if to == topic)


@pytest.fixture(scope="module")
def record_topics(admin) -> dict[str, str]:
    unique = uuid.uuid4().hex[:8]
    topics = {"avro": create_topic(admin, f"sink-avro-{unique}", 2), "json": create_topic(admin, f"sink-json-{unique}", 1),
              "avro-copy": create_topic(admin, f"sink-avro-copy-{unique}", 2)}
    for name, topic in topics.items():
        schema = JsonSchema(Reading) if name == "json" else AvroSchema(Reading)
        upload_schema(admin, topic, name.split("-")[0].upper(), schema.schema_info().schema())
    return topics


@pytest.fixture(scope="module")
def batch_rows(spark, broker, record_topics) -> list[tuple]:
    """A batch write with a topic column over the AVRO and the JSON topic: each topic's schema is read and checked by the
    task that first writes to it, and its rows encoded with it."""
    rows = reading_rows([record_topics["avro"], record_topics["json"]])
    df = spark.createDataFrame(rows, f"topic string, {READING_COLUMNS}, {MESSAGE_COLUMNS}").repartition(3)
    df.write.format("pulsar-throttled").options(**sink_options(broker)).mode("append").save()
    return rows


def test_a_batch_write_encodes_records_with_each_rows_topics_schema(admin, pulsar_client, record_topics, batch_rows):
    for topic, schema in ((record_topics["avro"], AvroSchema(Reading)), (record_topics["json"], JsonSchema(Reading))):
        expected = expected_messages(batch_rows, topic)
        assert Counter(read_back(pulsar_client, topic, schema, sum(expected.values()))) == expected
        assert schema_versions(admin, topic) == 1  # the producers declared the topic's own schema: no version added


def test_a_stream_of_this_sources_decoded_rows_writes_back_into_an_avro_topic(spark, broker, admin, pulsar_client, record_topics,
                                                                             batch_rows, tmp_path):
    """The AVRO topic read by this source (its fields, then __key, __eventTime, __messageProperties, __orderingKey, ...) and
    written as it is read into a topic of the same schema: every field and message column kept, the tombstone too."""
    source, target = record_topics["avro"], record_topics["avro-copy"]
    expected = expected_messages(batch_rows, source)
    assert sum(expected.values()) == 31 and expected[(None, "gone", None, None, None)] == 1
    df = read_stream(spark, source_options(broker, source, startingOffsets="earliest", maxEntriesPerTrigger="10"))
    assert {"sensor", "__key", "__eventTime", "__messageProperties", "__orderingKey", "__topic"} <= set(df.columns)
    query = (df.writeStream.format("pulsar-throttled").options(**sink_options(broker, topic=target))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    assert Counter(read_back(pulsar_client, target, AvroSchema(Reading), sum(expected.values()))) == expected
    assert schema_versions(admin, target) == 1


def test_a_primitive_schema_and_columns_that_do_not_fit_before_anything_is_sent(spark, broker, admin, pulsar_client, record_topics, unique):
    longs = create_topic(admin, f"sink-int64-{unique}", 2)
    upload_schema(admin, longs, "INT64", "")
    rows = [(f"k{i}", i * 10**12 - 7, {"n": str(i)}) for i in range(-20, 20)] + [("gone", None, None)]
    df = spark.createDataFrame(rows, "key string, value bigint, properties map<string,string>")
    df.write.format("pulsar-throttled").options(**sink_options(broker, topic=longs)).mode("append").save()
    got = read_back(pulsar_client, longs, INT64, len(rows))
    assert schema_versions(admin, longs) == 1
    assert Counter((g[0], g[1], g[2]) for g in got) == Counter((v, k, tuple(p.items()) if p else None) for k, v, p in rows)

    avro = record_topics["avro-copy"]

    def refused(frame, topic: str) -> str:
        with pytest.raises(Exception) as err:
            frame.write.format("pulsar-throttled").options(**sink_options(broker, topic=topic)).mode("append").save()
        return str(err.value)

    good = spark.createDataFrame([("s", 1.0, 2, ["t"], "k")], f"{READING_COLUMNS}, key string")
    assert f"Column 'count' does not fit field 'count' of topic {avro}'s AVRO schema: the column is string" in \
        refused(good.withColumn("count", good["count"].cast("string")), avro)
    assert f"Column(s) 'extra' are not fields of topic {avro}'s AVRO schema" in refused(good.selectExpr("*", "1 as extra"), avro)
    assert f"Field(s) 'sensor' of topic {avro}'s AVRO schema have no column, and are required" in refused(good.drop("sensor"), avro)
    assert f"Column 'value' is string, which does not fit topic {longs}'s INT64 schema" in refused(df.selectExpr("key", "'x' as value"), longs)
    assert len(read_back(pulsar_client, longs, INT64, len(rows))) == len(rows)  # nothing more sent
