"""Primitive and KeyValue schemas: payloads as the Java client writes them (the bytes below were
read back from a real broker after tests/integration/java/SchemaProducer.java wrote the values
named beside them), their column types, and the schema the admin API describes becoming a layout."""

from __future__ import annotations

import base64
import json
import logging
from datetime import date, datetime, timezone

import pyarrow as pa
import pytest
from builders import add_row
from fakes import FakeAdmin, FakeMessage

from pulsar_throttled_source.reading.decoded_rows import DecodedColumns
from pulsar_throttled_source.schemas.avro_types import spark_type
from pulsar_throttled_source.schemas.columns import ValueSchema
from pulsar_throttled_source.schemas.decoders import DecodeError, PayloadDecoder
from pulsar_throttled_source.schemas.schema_guard import SchemaMismatch, TopicSchemaGuard
from pulsar_throttled_source.schemas.topic_schema import schema_from_info, value_schema_of
from pulsar_throttled_source.topics import TopicName

# schema type, payload (hex) the Java producer wrote, the value it was given, the value read.
JAVA_WRITTEN = [
    ("INT8", "fb", "-5", -5),
    ("INT16", "fed4", "-300", -300),
    ("INT32", "fffffc18", "-1000", -1000),
    ("INT64", "0000018bcfe5687b", "1700000000123", 1700000000123),
    ("FLOAT", "3fc00000", "1.5", 1.5),
    ("DOUBLE", "3ff8000000000000", "1.5", 1.5),
    ("BOOLEAN", "01", "true", True),
    ("DATE", "0000018bcfe5687b", "new Date(1700000000123L)", datetime(2023, 11, 14, 22, 13, 20, 123000, timezone.utc)),
    ("TIME", "0000000000000001", "new Time(1L)", datetime(1970, 1, 1, 0, 0, 0, 1000, timezone.utc)),
    ("TIMESTAMP", "0000018bcfe5687b", "new Timestamp(1700000000123L)", datetime(2023, 11, 14, 22, 13, 20, 123000, timezone.utc)),
    ("INSTANT", "0000000065937d25075bcd15", "2024-01-02T03:04:05.123456789Z", datetime(2024, 1, 2, 3, 4, 5, 123456, timezone.utc)),
    ("LOCAL_DATE", "0000000000004d0c", "2024-01-02", date(2024, 1, 2)),
    ("LOCAL_TIME", "00000a0ba4a8ff15", "03:04:05.123456789", 11045123456789),
    ("LOCAL_DATE_TIME", "0000000000004d0c00000a0ba4a8ff15", "2024-01-02T03:04:05.123456789", datetime(2024, 1, 2, 3, 4, 5, 123456)),
]
READING = {"type": "record", "name": "Reading", "namespace": "SchemaProducer", "fields": [
    {"name": "reading", "type": "double"}, {"name": "sensor", "type": ["null", "string"], "default": None}]}


def rows_of(schema: ValueSchema, messages: list[FakeMessage], writer: str = "") -> list[dict]:
    columns = DecodedColumns(PayloadDecoder(schema, lambda version: writer), "persistent://public/default/t")
    for i, m in enumerate(messages):
        add_row(columns, m, b"id%d" % i, 1000, "producer")
    batch = columns.to_batch("persistent://public/default/t", -1)
    assert batch.schema == schema.arrow_schema
    return batch.to_pylist()


@pytest.mark.parametrize(("kind", "payload", "written", "expected"), JAVA_WRITTEN, ids=[c[0] for c in JAVA_WRITTEN])
def test_primitive_payloads_read_as_the_java_client_wrote_them(kind, payload, written, expected):
    schema = ValueSchema(kind)
    (row,) = rows_of(schema, [FakeMessage(value=bytes.fromhex(payload), schema_version=0)])
    assert row["value"] == expected, written
    assert spark_type(schema.arrow_schema.field("value").type) is not None  # every column type has a Spark type


def test_a_primitive_payload_of_the_wrong_length_is_undecodable_and_a_null_value_is_null():
    for kind in ("INT32", "BOOLEAN", "INSTANT"):
        with pytest.raises(DecodeError):
            PayloadDecoder(ValueSchema(kind), lambda v: "").decode(b"\x00\x01", 0)
    assert [r["value"] for r in rows_of(ValueSchema("INT64"), [FakeMessage(value=None, schema_version=0)])] == [None]


def test_inline_key_values_split_both_sides_and_keep_null_sides():
    schema = schema_from_info({"type": "KEY_VALUE", "data": json.dumps({"key": "", "value": ""}), "properties": {
        "key.schema.type": "INT32", "value.schema.type": "STRING", "kv.encoding.type": "INLINE"}}, False)
    assert [f.name for f in schema.value_fields] == ["key", "value"] and schema.arrow_schema.field("key").type == pa.int32()
    written = ["000000040000000700000005736576656e",  # KeyValue(7, "seven")
               "ffffffff000000056e6f6b6579",  # KeyValue(null, "nokey")
               "0000000400000008ffffffff"]  # KeyValue(8, null)
    rows = rows_of(schema, [FakeMessage(value=bytes.fromhex(p), schema_version=0) for p in written] + [FakeMessage(value=None, schema_version=0)])
    assert [(r["key"], r["value"]) for r in rows] == [(7, "seven"), (None, "nokey"), (8, None), (None, None)]
    with pytest.raises(DecodeError, match="not an INLINE KeyValue"):
        PayloadDecoder(schema, lambda v: "").decode(bytes.fromhex("00000004000000070000"), 0)


def test_record_sides_decode_as_structs_separated_keys_come_from_the_message_key():
    data = json.dumps({"key": "", "value": READING})
    schema = schema_from_info({"type": "KEY_VALUE", "data": data, "properties": {
        "key.schema.type": "STRING", "value.schema.type": "AVRO", "kv.encoding.type": "SEPARATED"}}, False)
    assert schema.separated and schema.arrow_schema.field("value").type == pa.struct(
        [pa.field("reading", pa.float64()), pa.field("sensor", pa.string())])
    messages = [FakeMessage(value=bytes.fromhex("000000000000f83f020261"), schema_version=0, key="azE="),  # KeyValue("k1", Reading("a", 1.5))
                FakeMessage(value=None, schema_version=0, key="azI=")]  # KeyValue("k2", null): a null value, the key kept
    rows = rows_of(schema, messages, writer=data)
    assert [(r["key"], r["value"], r["__key"]) for r in rows] == [("k1", {"reading": 1.5, "sensor": "a"}, "azE="), ("k2", None, "azI=")]
    assert base64.b64decode("azE=") == b"k1"

    inline = schema_from_info({"type": "KEY_VALUE", "data": json.dumps({"key": READING, "value": READING}), "properties": {
        "key.schema.type": "AVRO", "value.schema.type": "JSON", "kv.encoding.type": "INLINE"}}, False)
    # KeyValue(Reading("a", 1), Reading("b", 2)): an Avro key, a JSON value.
    payload = bytes.fromhex("0000000b000000000000f03f0202610000001c7b2273656e736f72223a2262222c2272656164696e67223a322e307d")
    (row,) = rows_of(inline, [FakeMessage(value=payload, schema_version=0)], writer=json.dumps({"key": READING, "value": READING}))
    assert (row["key"], row["value"]) == ({"reading": 1.0, "sensor": "a"}, {"reading": 2.0, "sensor": "b"})


def test_key_value_topics_agree_only_on_the_same_sides_and_encoding():
    def kv(key: str, value: str, encoding: str = "INLINE") -> dict:
        return {"type": "KEY_VALUE", "data": json.dumps({"key": "", "value": ""}),
                "properties": {"key.schema.type": key, "value.schema.type": value, "kv.encoding.type": encoding}}
    topics = [TopicName.parse("a"), TopicName.parse("b")]
    assert value_schema_of(FakeAdmin(schemas={"a": kv("INT32", "STRING"), "b": kv("INT32", "STRING")}), topics, False) is not None
    for other in (kv("INT64", "STRING"), kv("INT32", "STRING", "SEPARATED")):
        with pytest.raises(ValueError, match=r"/a: KEY_VALUE<INT32, STRING> INLINE; .*/b: KEY_VALUE<INT\d\d, STRING>"):
            value_schema_of(FakeAdmin(schemas={"a": kv("INT32", "STRING"), "b": other}), topics, False)
    assert value_schema_of(FakeAdmin(schemas={"a": kv("PROTOBUF_NATIVE", "STRING")}), topics[:1], False) is None  # raw, with a WARN
    assert value_schema_of(FakeAdmin(schemas={"a": {"type": "INT8", "data": ""}}), topics[:1], False) == ValueSchema("INT8")


def test_later_topics_must_carry_the_query_schema_type_asked_once_each(caplog):
    avro = {"type": "AVRO", "data": json.dumps(READING)}
    evolved = {"type": "AVRO", "data": json.dumps(dict(READING, fields=[*READING["fields"], {"name": "x", "type": "int", "default": 0}]))}
    admin = FakeAdmin(schemas={"a": avro, "b": evolved, "empty": None, "j": {"type": "JSON", "data": json.dumps(READING)}})
    guard = TopicSchemaGuard(admin, schema_from_info(avro, False))
    a, b, empty, j = (TopicName.parse(n) for n in ("a", "b", "empty", "j"))
    guard.check([a, b, empty])
    guard.check([a, b, empty])
    assert admin.schemas_asked == ["a", "b", "empty", "empty"]  # no schema yet: asked again, the others once
    for _ in range(2):  # refused at every refresh, not only the first (a background refresh sees it first)
        with pytest.raises(SchemaMismatch, match="Topic persistent://public/default/j carries schema type JSON, but this query decodes AVRO"):
            guard.check([a, j])

    raw = TopicSchemaGuard(FakeAdmin(schemas={"a": avro, "empty": None}), None)
    with caplog.at_level(logging.WARNING, logger="pulsar_throttled_source"):
        raw.check([a, empty])
        raw.check([a, empty])
    assert caplog.text.count("carries schema type AVRO, but this query reads raw bytes") == 1
