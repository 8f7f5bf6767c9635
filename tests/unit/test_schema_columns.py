"""Topic schemas as columns: Avro types to Arrow/Spark types, payload decoding across schema
versions (Avro resolution, JSON by field name), the choice of layout from the topics' schemas, and
the rows built from decoded messages (null values, undecodable payloads)."""

from __future__ import annotations

import io
import json
import logging
from datetime import date, datetime, timezone
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from builders import add_row
from fakes import FakeAdmin, FakeMessage

from pulsar_throttled_source.reading.decoded_rows import DecodedColumns, UndecodablePayload
from pulsar_throttled_source.schemas.avro_types import UnsupportedSchema, record_fields
from pulsar_throttled_source.schemas.columns import ValueSchema
from pulsar_throttled_source.schemas.decoders import DecodeError, PayloadDecoder
from pulsar_throttled_source.schemas.topic_schema import value_schema_of
from pulsar_throttled_source.topics import TopicName

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": ["null", "string"], "default": None},
]}
V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": ["null", "string"], "default": None},
    {"name": "qty", "type": "int", "default": 1},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
]}
RICH = {"type": "record", "name": "Rich", "fields": [
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}},
    {"name": "previous", "type": ["null", "Address"], "default": None},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "DONE"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "blob", "type": "bytes"},
    {"name": "ratio", "type": "float"},
]}


def avro(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_avro_types_become_the_columns_spark_avro_would_give():
    fields = {f.name: f.type for f in record_fields(RICH)}
    assert fields["address"] == pa.struct([pa.field("city", pa.string())])
    assert fields["previous"] == fields["address"]  # a named type referenced again, nullable union
    assert fields["status"] == pa.string() and fields["ref"] == pa.string()
    assert fields["tags"] == pa.list_(pa.string()) and fields["attrs"] == pa.map_(pa.string(), pa.int64())
    assert fields["day"] == pa.date32() and fields["price"] == pa.decimal128(9, 2)
    assert fields["blob"] == pa.binary() and fields["ratio"] == pa.float32()
    spark = ValueSchema("AVRO", json.dumps(RICH)).spark_schema().simpleString()
    assert spark.startswith("struct<address:struct<city:string>,previous:struct<city:string>,status:string,"
                            "tags:array<string>,attrs:map<string,bigint>,day:date,price:decimal(9,2),ref:string,")
    assert spark.endswith(",__key:string,__topic:string,__partition:int,__messageId:binary,__publishTime:timestamp,"
                          "__eventTime:timestamp,__messageProperties:map<string,string>,__orderingKey:string,__producerName:string>")


def test_constructs_without_a_column_type_and_clashing_fields_fail_with_their_name():
    two = {"type": "record", "name": "R", "fields": [{"name": "either", "type": ["int", "string"]}]}
    with pytest.raises(UnsupportedSchema, match="'either' is an Avro union of 2 non-null types"):
        record_fields(two)
    clash = {"type": "record", "name": "R", "fields": [{"name": "__topic", "type": "string"}]}
    with pytest.raises(ValueError, match="__topic clash with the metadata columns.*decodeSchema=false"):
        _ = ValueSchema("AVRO", json.dumps(clash)).arrow_schema


def test_avro_written_with_an_older_version_is_read_into_the_latest():
    writers = {0: json.dumps(V1), 1: json.dumps(V2)}
    decoder = PayloadDecoder(ValueSchema("AVRO", json.dumps(V2)), writers.get)
    old = decoder.decode(avro(V1, {"id": 1, "item": "tea"}), 0)
    new = decoder.decode(avro(V2, {"id": 2, "item": None, "qty": 3, "placed": 1_700_000_000_123}), 1)
    assert old == {"id": 1, "item": "tea", "qty": 1, "placed": datetime(1970, 1, 1, tzinfo=timezone.utc)}  # defaults
    assert new["qty"] == 3 and new["placed"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc)
    with pytest.raises(DecodeError, match="schema version 7 of the topic is not known"):
        decoder.decode(avro(V1, {"id": 1, "item": None}), 7)
    with pytest.raises(DecodeError):
        decoder.decode(b"\xff\xff\xff\xff", 1)


def test_json_fields_are_read_by_name_with_logical_types_as_jackson_writes_them():
    schema = {"type": "record", "name": "J", "fields": [
        {"name": "when", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "blob", "type": ["null", "bytes"]},
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}},
        {"name": "added", "type": ["null", "string"], "default": None},
    ]}
    decoder = PayloadDecoder(ValueSchema("JSON", json.dumps(schema)), lambda v: None)
    row = decoder.decode(b'{"when": 1000, "day": 1, "blob": "AAE=", "inner": {"at": 2000}, "extra": 5}', 0)
    assert row["when"] == datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc) and row["day"] == date(1970, 1, 2)
    assert row["blob"] == b"\x00\x01" and row["inner"]["at"] == datetime(1970, 1, 1, 0, 0, 2, tzinfo=timezone.utc)
    assert "added" not in row  # missing: null in its column
    for bad in (b"not json", b"[1, 2]"):
        with pytest.raises(DecodeError):
            decoder.decode(bad, 0)


def test_rows_hold_decoded_fields_null_values_and_undecodable_payloads_as_asked():
    writers = {0: json.dumps(V1), 1: json.dumps(V2)}
    for corrupt_records in (True, False):
        schema = ValueSchema("AVRO", json.dumps(V2), corrupt_records)
        columns = DecodedColumns(PayloadDecoder(schema, writers.get), "persistent://public/default/t-partition-1")
        add_row(columns, FakeMessage(value=avro(V1, {"id": 1, "item": "tea"}), schema_version=0, key="k", props={"p": "1"}), b"id1", 1000, "producer")
        add_row(columns, FakeMessage(value=None), b"id2", 1000, "producer")  # a tombstone
        add_row(columns, FakeMessage(value=b"\xff\xff\xff\xff"), b"id3", 1000, "producer")
        if not corrupt_records:  # payloads are decoded as the batch is built
            with pytest.raises(UndecodablePayload, match="message 5:7:2 of .*t-partition-1 .*decodeErrorMode=permissive"):
                columns.to_batch("persistent://public/default/t-partition-1", 1)
            continue
        batch = columns.to_batch("persistent://public/default/t-partition-1", 1)
        assert batch.schema == schema.arrow_schema
        rows = batch.to_pylist()
        assert [(r["id"], r["item"], r["qty"], r["__key"]) for r in rows] == [(1, "tea", 1, "k"), (None, None, None, None), (None, None, None, None)]
        assert [r["__corruptRecord"] for r in rows] == [None, None, b"\xff\xff\xff\xff"]
        assert rows[0]["__partition"] == 1 and rows[0]["__messageProperties"] == [("p", "1")]


def test_the_layout_follows_the_topics_schema_and_topics_must_agree(caplog):
    avro_v2 = {"type": "AVRO", "data": json.dumps(V2), "version": 1}
    topics = [TopicName.parse("a"), TopicName.parse("b")]
    same = value_schema_of(FakeAdmin(schemas={"a": avro_v2, "b": dict(avro_v2, data=json.dumps(V2, indent=2))}), topics, False)
    assert same is not None and same.kind == "AVRO" and [f.name for f in same.value_fields] == ["id", "item", "qty", "placed"]
    assert value_schema_of(FakeAdmin(schemas={"a": None, "b": {"type": "BYTES", "data": ""}}), topics, False) is None
    assert value_schema_of(FakeAdmin(schemas={"a": {"type": "STRING", "data": ""}}), topics[:1], False).kind == "STRING"
    with pytest.raises(ValueError, match="carry different schemas .*a: AVRO.*b: NONE.*decodeSchema=false"):
        value_schema_of(FakeAdmin(schemas={"a": avro_v2, "b": None}), topics, False)
    with pytest.raises(ValueError, match="carry different schemas"):
        value_schema_of(FakeAdmin(schemas={"a": avro_v2, "b": {"type": "AVRO", "data": json.dumps(V1)}}), topics, False)
    with caplog.at_level(logging.WARNING, logger="pulsar_throttled_source"):
        assert value_schema_of(FakeAdmin(schemas={"a": {"type": "PROTOBUF_NATIVE", "data": "x"}}), topics[:1], False) is None
    assert "PROTOBUF_NATIVE schema, which this source does not decode yet" in caplog.text


def test_decimals_and_uuids_reach_arrow_as_their_column_types():
    schema = ValueSchema("AVRO", json.dumps(RICH))
    record = {"address": {"city": "Oslo"}, "previous": None, "status": "DONE", "tags": ["a"], "attrs": {"x": 1},
              "day": date(2024, 2, 29), "price": Decimal("12.50"), "ref": "0f8fad5b-d9cb-469f-a165-70867728950e",
              "blob": b"\x00", "ratio": 0.5}
    columns = DecodedColumns(PayloadDecoder(schema, lambda v: json.dumps(RICH)), "persistent://public/default/r")
    add_row(columns, FakeMessage(value=avro(RICH, record), schema_version=0), b"id", 1000, "producer")
    (row,) = columns.to_batch("persistent://public/default/r", -1).to_pylist()
    assert row["price"] == Decimal("12.50") and row["ref"] == "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert row["address"] == {"city": "Oslo"} and row["attrs"] == [("x", 1)] and row["day"] == date(2024, 2, 29)
