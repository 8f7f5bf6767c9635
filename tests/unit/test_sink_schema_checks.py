"""The sink's payloads for a topic with a schema: rows encoded with AVRO, JSON and the primitive schemas decode back,
field for field, with the reader's own decoders (schemas.decoders, schemas.primitives); columns that do not fit the
topic's schema are refused before anything is sent, naming the column, the field and the topic."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import builders
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    Row,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pulsar_throttled_source.schemas.columns import ValueSchema
from pulsar_throttled_source.schemas.decoders import PayloadDecoder
from pulsar_throttled_source.schemas.primitives import PRIMITIVES
from pulsar_throttled_source.writing.message_columns import write_columns
from pulsar_throttled_source.writing.payload_encoding import DeclaredSchema, EncodeError, encoder, producer_schema
from pulsar_throttled_source.writing.payload_schema import TopicSchema, payload_encoding, record_fields

UTC = dt.timezone.utc
TOPIC = "persistent://public/default/readings"
POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "double"}, {"name": "y", "type": ["null", "double"], "default": None}]}
READING = {
    "type": "record", "name": "Reading", "namespace": "sink.test",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": ["null", "double"], "default": None},  # a field named as a message column
        {"name": "count", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}], "default": None},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "raw", "type": ["null", "bytes"], "default": None},
        {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}], "default": None},
        {"name": "where", "type": ["null", POINT], "default": None},
        {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        {"name": "attrs", "type": ["null", {"type": "map", "values": "long"}], "default": None},
        {"name": "kind", "type": ["null", {"type": "enum", "name": "Kind", "symbols": ["HOT", "COLD"]}], "default": None},
        {"name": "note", "type": ["null", "string"], "default": None},  # optional: no column below
    ],
}
READING_FIELDS = [f["name"] for f in READING["fields"]]
POINT_TYPE = builders.columns(("x", DoubleType()), ("y", DoubleType()))
COLUMNS = builders.columns(
    ("sensor", StringType()), ("value", DoubleType()),
    ("count", IntegerType()),  # an int column fits a long field
    ("at", TimestampType()), ("local", TimestampNTZType()), ("day", DateType()),
    ("raw", BinaryType()), ("price", DecimalType(7, 2)), ("where", POINT_TYPE),
    ("tags", ArrayType(StringType())), ("attrs", MapType(StringType(), LongType())),
    ("kind", StringType()), ("__key", StringType()),
)
AT = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def planned(columns: StructType, schema: TopicSchema):
    cols = write_columns(columns, True, record_fields(schema))
    return cols, payload_encoding(cols, TOPIC, schema)


def rows() -> list[Row]:
    full = Row("s-1", 21.5, 7, AT.astimezone().replace(tzinfo=None), dt.datetime(2026, 1, 2, 3, 4, 5, 123456),
               dt.date(2024, 2, 29), bytearray(b"\x00\xff"), Decimal("12345.67"), Row(x=1.0, y=None), ["a", "b"], {"n": 3},
               "COLD", "mk")
    sparse = Row("s-2", None, 0, AT.astimezone().replace(tzinfo=None), None, None, None, None, None, None, None, None, "k2")
    return [full, sparse]


def expected() -> list[dict]:
    first = {"sensor": "s-1", "value": 21.5, "count": 7, "at": AT, "local": dt.datetime(2026, 1, 2, 3, 4, 5, 123456),
             "day": dt.date(2024, 2, 29), "raw": b"\x00\xff", "price": Decimal("12345.67"), "where": {"x": 1.0, "y": None},
             "tags": ["a", "b"], "attrs": {"n": 3}, "kind": "COLD", "note": None}
    second = dict.fromkeys(first) | {"sensor": "s-2", "count": 0, "at": AT}
    return [first, second]


@pytest.mark.parametrize("kind", ["AVRO", "JSON"])
def test_record_columns_encode_to_payloads_the_readers_decoder_reads_back_field_for_field(kind):
    definition = json.dumps(READING)
    cols, encoding = planned(COLUMNS, TopicSchema(kind, definition))
    assert encoding.how == "record" and "value" in encoding.fields  # a field named as the message's value: the field's
    assert cols.names[cols.key] == "__key" and cols.value == -1
    encode = encoder(encoding)
    decoder = PayloadDecoder(ValueSchema(kind, json.dumps(READING, sort_keys=True)), lambda version: definition)
    decoded = [decoder.decode(encode(row), 0) for row in rows()]
    for got in decoded:  # a JSON object carries no field it was not given: the reader's columns show null
        for name in READING_FIELDS:
            got.setdefault(name, None)
    assert decoded == expected()


def test_a_whole_record_in_a_struct_value_and_a_tombstone_in_either_layout():
    schema = TopicSchema("AVRO", json.dumps(POINT))
    cols, encoding = planned(builders.columns(("key", StringType()), ("value", POINT_TYPE)), schema)
    assert encoding.how == "struct"
    encode = encoder(encoding)
    decoder = PayloadDecoder(ValueSchema("AVRO", json.dumps(POINT)), lambda version: json.dumps(POINT))
    assert decoder.decode(encode(("k", Row(x=2.5, y=-1.0))), 0) == {"x": 2.5, "y": -1.0}
    assert encode(("k", None)) is None  # a null value: a message without payload
    _, by_fields = planned(builders.columns(("key", StringType()), ("x", DoubleType())), schema)
    assert encoder(by_fields)(("k", None)) is None  # every record column null: how the reader shows a tombstone


PRIMITIVE_CASES = [
    ("STRING", StringType(), "é€"), ("INT8", IntegerType(), None), ("INT32", IntegerType(), -2**31), ("INT64", LongType(), 2**63 - 1),
    ("INT64", IntegerType(), 42), ("DOUBLE", DoubleType(), -1e300), ("BOOLEAN", BooleanType(), True),
    ("TIMESTAMP", TimestampType(), AT), ("INSTANT", TimestampType(), dt.datetime(1969, 12, 31, 23, 59, 59, 500001, tzinfo=UTC)),
    ("LOCAL_DATE", DateType(), dt.date(1960, 1, 1)), ("LOCAL_DATE_TIME", TimestampNTZType(), dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    ("LOCAL_TIME", LongType(), 3_600_000_000_000),
]


@pytest.mark.parametrize("kind,column_type,value", [c for c in PRIMITIVE_CASES if c[2] is not None], ids=lambda c: str(c))
def test_primitive_values_encode_as_pulsar_does(kind, column_type, value):
    cols, encoding = planned(builders.columns(("value", column_type)), TopicSchema(kind))
    given = value.astimezone().replace(tzinfo=None) if isinstance(column_type, TimestampType) else value  # as Spark gives it
    payload = encoder(encoding)((given,))
    read = PRIMITIVES[kind][1] if kind != "STRING" else bytes.decode
    assert read(payload) == value
    assert encoder(encoding)((None,)) is None


def test_the_producer_declares_the_topics_own_schema_where_the_client_has_its_type():
    declared = producer_schema(TopicSchema("AVRO", json.dumps(POINT)))
    assert isinstance(declared, DeclaredSchema) and declared == producer_schema(TopicSchema("AVRO", json.dumps(POINT)))
    assert declared.schema_info().schema() == json.dumps(POINT) and declared.encode(b"x") == b"x"
    assert hash(declared) == hash(producer_schema(TopicSchema("AVRO", json.dumps(POINT))))
    assert producer_schema(TopicSchema("INT64")) is not None
    assert producer_schema(TopicSchema()) is None and producer_schema(TopicSchema("BOOLEAN")) is None  # no SchemaType in the client


def test_a_null_in_a_required_field_fails_the_row_naming_the_field_and_the_topic():
    cols, encoding = planned(builders.columns(("x", DoubleType()), ("y", DoubleType())), TopicSchema("AVRO", json.dumps(POINT)))
    with pytest.raises(EncodeError, match=rf"topic {TOPIC}'s AVRO schema: Field\(Point\.x\) is None expected double$"):
        encoder(encoding)((None, 1.0))


AVRO = TopicSchema("AVRO", json.dumps(READING))


@pytest.mark.parametrize("columns,schema,message", [
    ([("sensor", StringType()), ("at", TimestampType())], AVRO, "Field(s) 'count' of topic " + TOPIC + "'s AVRO schema have no column, and are required"),
    ([("sensor", StringType()), ("count", LongType()), ("at", TimestampType()), ("extra", StringType())], AVRO,
     "Column(s) 'extra' are not fields of topic " + TOPIC + "'s AVRO schema (its fields: sensor, value, count"),
    ([("sensor", StringType()), ("count", StringType()), ("at", TimestampType())], AVRO,
     "Column 'count' does not fit field 'count' of topic " + TOPIC + "'s AVRO schema: the column is string, the field Avro long (read as bigint); a column of tinyint or smallint or int or bigint fits"),
    ([("sensor", StringType()), ("count", LongType()), ("at", StringType())], AVRO, "Column 'at' does not fit field 'at'"),
    ([("sensor", StringType()), ("count", LongType()), ("at", TimestampType()), ("where", StructType([StructField("x", StringType())]))], AVRO,
     "Column 'where.x' does not fit field 'where.x' of topic " + TOPIC + "'s AVRO schema: the column is string, the field Avro double"),
    ([("sensor", StringType()), ("count", LongType()), ("at", TimestampType()), ("where", StructType([StructField("y", DoubleType())]))], AVRO,
     "Field(s) 'where.x' of topic " + TOPIC + "'s AVRO schema have no column"),
    ([("sensor", StringType()), ("count", LongType()), ("at", TimestampType()), ("price", DecimalType(10, 3))], AVRO,
     "the field is decimal(9,2), the column decimal(10,3)"),
    ([("value", StructType([StructField("x", DoubleType()), StructField("z", DoubleType())]))], TopicSchema("JSON", json.dumps(POINT)),
     "Column(s) 'value.z' are not fields of topic " + TOPIC + "'s JSON schema"),
    ([("value", StringType())], TopicSchema("INT64"), "Column 'value' is string, which does not fit topic " + TOPIC + "'s INT64 schema: it takes bigint or int"),
    ([("value", StringType()), ("extra", StringType())], TopicSchema("STRING"), "Column(s) 'extra' cannot be written to topic " + TOPIC + ", which has a STRING schema"),
    ([("value", StructType([StructField("x", DoubleType())]))], TopicSchema("KEY_VALUE", "{}"), "binary only (payloads already encoded)"),
    ([("key", StringType())], TopicSchema("INT32"), "A write to topic " + TOPIC + " needs a 'value' column (int or smallint or tinyint"),
])
def test_columns_that_do_not_fit_the_topics_schema_are_named_with_the_field_and_the_topic(columns, schema, message):
    with pytest.raises(ValueError) as err:
        planned(builders.columns(*columns), schema)
    assert message in str(err.value)


def test_a_binary_value_is_a_payload_already_encoded_for_any_schema():
    for schema in (TopicSchema("AVRO", json.dumps(POINT)), TopicSchema("INT64"), TopicSchema("KEY_VALUE", "{}"), TopicSchema()):
        _, encoding = planned(builders.columns(("key", StringType()), ("value", BinaryType())), schema)
        assert encoding.how == "raw" and encoder(encoding)(("k", bytearray(b"\x01"))) == b"\x01"
