"""A write's payload against its topic's schema: which columns make the payload and how, checked before the first row
is sent (on the driver for the `topic` option, by a task for each topic a topic column names).

The schema is the admin API's (schemas.topic_schema reads it, as the reader does). A topic
- without a schema (or BYTES) takes a binary or string `value` and no other payload column;
- with an AVRO or JSON schema takes its record's fields as columns (the reader's layout of that topic: the message's
  columns then by their `__` names where a field has the same name), or the whole record in a struct `value`
  column; a missing required field (neither nullable nor with a default), a column that is no field, or a type that
  does not fit is an error naming the column, the field and the topic;
- with a primitive schema (STRING, INT64, ...) takes a `value` of the type the reader reads it as;
- of any schema type takes a binary `value` as payloads already encoded (e.g. read with decodeSchema=false).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..admin_endpoint import AdminEndpoint
from ..schemas.avro_types import UnsupportedSchema, arrow_type, spark_type
from ..schemas.topic_schema import schema_from_info
from ..topics import TopicName
from .message_columns import WriteColumns, write_columns
from .recent_answers import RecentAnswers

if TYPE_CHECKING:
    from ..metadata.admin import PulsarAdmin

RECORD_KINDS = ("AVRO", "JSON")
RAW = ("binary", "string")  # Spark types of a `value` that is the payload itself
# A primitive schema -> the Spark types of a `value` it encodes (schemas/primitives.py reads them back as the first)
PRIMITIVE_COLUMNS: dict[str, tuple[str, ...]] = {
    "STRING": ("string",), "INT8": ("tinyint",), "INT16": ("smallint", "tinyint"), "INT32": ("int", "smallint", "tinyint"),
    "INT64": ("bigint", "int", "smallint", "tinyint"), "FLOAT": ("float",), "DOUBLE": ("double", "float"),
    "BOOLEAN": ("boolean",), "DATE": ("timestamp",), "TIME": ("timestamp",), "TIMESTAMP": ("timestamp",),
    "INSTANT": ("timestamp",), "LOCAL_DATE": ("date",), "LOCAL_TIME": ("bigint",), "LOCAL_DATE_TIME": ("timestamp_ntz",),
}
_INTS = ("tinyint", "smallint", "int", "bigint")
# An Avro type (or logical type) -> the Spark types of a column it encodes (the reader's type first)
_AVRO_COLUMNS: dict[str, tuple[str, ...]] = {
    "string": ("string",), "uuid": ("string",), "enum": ("string",), "bytes": ("binary",), "fixed": ("binary",),
    "int": _INTS[:3], "long": _INTS, "float": ("float",), "double": ("double", "float"), "boolean": ("boolean",),
    "date": ("date",), "time-millis": ("int",), "time-micros": ("bigint",),
    "timestamp-millis": ("timestamp",), "timestamp-micros": ("timestamp",),
    "local-timestamp-millis": ("timestamp_ntz",), "local-timestamp-micros": ("timestamp_ntz",),
}


@dataclass(frozen=True)
class TopicSchema:
    """A topic's schema as the admin API gives it: `kind` (NONE: none, or BYTES) and its definition's text, which the
    producer declares as it is (so its messages carry the topic's schema version)."""

    kind: str = "NONE"
    definition: str = ""

    @cached_property
    def record(self) -> dict[str, Any]:
        """The record definition with named types expanded where they are used (fastavro's parse_schema)."""
        import fastavro

        expanded = fastavro.parse_schema(json.loads(self.definition), expand=True)
        if not isinstance(expanded, dict) or expanded.get("type") != "record":
            raise ValueError(f"The topic's {self.kind} schema is not an Avro record ({self.definition[:80]}): write its "
                             "payloads already encoded, from a binary 'value' column.")
        return expanded


@dataclass(frozen=True)
class PayloadEncoding:
    """How one topic's payloads are made from a row: `how` is "raw" (the `value` column's bytes or UTF-8 text as they
    are), "record" (the columns at `positions` are the record's `fields`), "struct" (a `value` struct holds the record)
    or "primitive"; `types` are those columns' Spark types (timestamps differ by time zone)."""

    topic: str
    schema: TopicSchema
    how: str
    positions: tuple[int, ...]
    fields: tuple[str, ...] = ()
    types: tuple[Any, ...] = ()


def topic_schema(admin: PulsarAdmin, topic: TopicName) -> TopicSchema:
    """The topic's latest schema (one admin request)."""
    info = admin.topic_schema(topic)
    kind = schema_from_info(info, False).kind  # the reader's reading of it: no schema and BYTES are both NONE
    return TopicSchema(kind, str(info.get("data") or "") if info and kind != "NONE" else "")


def record_fields(schema: TopicSchema) -> frozenset[str] | None:
    """The record's field names for write_columns (None: no schema, the raw layout; empty: a non-record schema)."""
    if schema.kind == "NONE":
        return None
    return frozenset(f["name"] for f in schema.record.get("fields", [])) if schema.kind in RECORD_KINDS else frozenset()


# A stream's topic schema, read when Spark asks for the writer that plans a micro-batch, is trusted this long: Spark asks
# for a second writer to commit the same micro-batch, and the next batch's plan follows within seconds. A schema
# changed mid-stream is seen within this time (the producers a worker keeps go on with the schema they registered).
STREAM_SCHEMA_REUSE_S = 60.0
_READ: RecentAnswers[tuple[str, TopicName], TopicSchema] = RecentAnswers()  # (admin URL, topic) -> its schema


def planned_columns(dataframe: Any, topic: TopicName | None, admin: AdminEndpoint, reuse_for_s: float = 0.0,
                    clock: Callable[[], float] = time.monotonic) -> WriteColumns:
    """The write's columns, and with the `topic` option its payload encoding (from its schema, read here unless this
    process read it less than `reuse_for_s` ago), or an error naming what does not fit. Each row's topic (a topic
    column) is checked by the task that first writes to it."""
    if topic is None:
        return write_columns(dataframe, False, frozenset())
    schema = _schema_of(topic, admin, reuse_for_s, clock)
    columns = write_columns(dataframe, True, record_fields(schema))
    return replace(columns, encoding=payload_encoding(columns, str(topic), schema))


def _schema_of(topic: TopicName, admin: AdminEndpoint, reuse_for_s: float, clock: Callable[[], float]) -> TopicSchema:
    from ..metadata.admin import PulsarAdmin

    now, key = clock(), (admin.url, topic)
    read = _READ.get(key, now, reuse_for_s)
    if read is not None:
        return read
    session = PulsarAdmin.at(admin)
    try:
        schema = topic_schema(session, topic)
    finally:
        session.close()
    _READ.put(key, now, schema)
    return schema


def payload_encoding(columns: WriteColumns, topic: str, schema: TopicSchema) -> PayloadEncoding:
    """How `topic`'s payloads are made from the columns, or a ValueError naming the column, the field and the topic."""
    names, types = columns.names, [f.dataType for f in columns.dataframe.fields]
    given = [*((columns.value,) if columns.value >= 0 else ()), *columns.payload]
    value_type = types[columns.value].simpleString() if columns.value >= 0 else ""
    if columns.value >= 0 and not columns.payload and (value_type == "binary" or (value_type == "string" and schema.kind in ("NONE", "JSON", "STRING"))):
        return PayloadEncoding(topic, schema, "raw", (columns.value,))
    of_topic = f"topic {topic}'s {schema.kind} schema"
    if schema.kind in RECORD_KINDS:
        record = schema.record
        if columns.value >= 0 and not columns.payload and value_type.startswith("struct<"):
            _check_record(types[columns.value], record, of_topic, "value.", "")
            return PayloadEncoding(topic, schema, "struct", (columns.value,), (), (types[columns.value],))
        if not given:
            raise ValueError(f"A write to {of_topic} needs its record's fields as columns ({_field_list(record)}), or the "
                             "whole record in a struct 'value' column.")
        fields = tuple(names[i] for i in given)
        _check_fields(fields, [types[i] for i in given], record, of_topic)
        return PayloadEncoding(topic, schema, "record", tuple(given), fields, tuple(types[i] for i in given))
    if columns.payload:
        listed = ", ".join(repr(names[i]) for i in columns.payload)
        kind = "no schema" if schema.kind == "NONE" else f"a {schema.kind} schema"
        raise ValueError(f"Column(s) {listed} cannot be written to topic {topic}, which has {kind}: its payload is the "
                         "'value' column. Drop or rename them (the message's own columns: key, topic, partition, eventTime, "
                         "properties, orderingKey, or their __ names).")
    allowed = PRIMITIVE_COLUMNS.get(schema.kind, ())
    if columns.value < 0:
        raise ValueError(f"A write to topic {topic} needs a 'value' column ({' or '.join(allowed or RAW)}; null: a message without payload).")
    if value_type in allowed:
        return PayloadEncoding(topic, schema, "primitive", (columns.value,), ("value",), (types[columns.value],))
    if schema.kind == "NONE":
        raise ValueError(f"Column 'value' is {value_type}; topic {topic} has no schema and takes binary or string payloads.")
    takes = f"{' or '.join(allowed)}, or binary (payloads already encoded)" if allowed else \
        "binary only (payloads already encoded): encoding this schema type is not supported"
    raise ValueError(f"Column 'value' is {value_type}, which does not fit {of_topic}: it takes {takes}.")


def _field_list(record: dict[str, Any]) -> str:
    return ", ".join(f["name"] for f in record.get("fields", []))


def _check_fields(columns: tuple[str, ...], types: list[Any], record: dict[str, Any], of_topic: str, column_path: str = "",
                  path: str = "") -> None:
    """`path` is where the record is in the topic's record ("" at the top), `column_path` in the DataFrame's columns."""
    fields = {f["name"]: f for f in record.get("fields", [])}
    extra = [c for c in columns if c not in fields]
    if extra:
        raise ValueError(f"Column(s) {', '.join(repr(column_path + c) for c in extra)} are not fields of {of_topic} (its fields"
                         f"{' under ' + path.rstrip('.') if path else ''}: {_field_list(record)}). Drop or rename them; the "
                         "message's own columns are key, topic, partition, eventTime, properties, orderingKey (or their __ "
                         "names, which a write into a record with a field of the same name needs).")
    missing = [name for name, f in fields.items() if name not in columns and not _optional(f)]
    if missing:
        raise ValueError(f"Field(s) {', '.join(repr(path + m) for m in missing)} of {of_topic} have no column, and are "
                         "required (neither nullable nor with a default): add a column for each.")
    for column, column_type in zip(columns, types, strict=True):
        reason = _fits(column_type, fields[column]["type"], of_topic, column_path + column, path + column)
        if reason:
            raise ValueError(f"Column '{column_path + column}' does not fit field '{path + column}' of {of_topic}: {reason}.")


def _check_record(struct: Any, record: dict[str, Any], of_topic: str, column_path: str, path: str) -> None:
    _check_fields(tuple(f.name for f in struct.fields), [f.dataType for f in struct.fields], record, of_topic, column_path, path)


def _optional(field: dict[str, Any]) -> bool:
    kind = field["type"]
    return "default" in field or (isinstance(kind, list) and "null" in kind)


def _fits(column_type: Any, avro: Any, of_topic: str, column: str, where: str) -> str | None:
    """Why a column of `column_type` cannot be encoded as `avro`, or None when it can."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            return f"a union of {len(branches)} non-null types cannot be written from one column"
        avro = branches[0]
    logical = avro.get("logicalType") if isinstance(avro, dict) else None
    name = avro if isinstance(avro, str) else str(logical if logical in _AVRO_COLUMNS or logical == "decimal" else avro.get("type"))
    got = column_type.simpleString()
    if isinstance(avro, dict) and avro.get("type") == "record":
        if not isinstance(column_type, StructType):
            return f"the field is a record, the column {got} (a struct of its fields fits)"
        _check_record(column_type, avro, of_topic, column + ".", where + ".")
        return None
    if isinstance(avro, dict) and avro.get("type") == "array":
        if not isinstance(column_type, ArrayType):
            return f"the field is an array, the column {got}"
        return _fits(column_type.elementType, avro["items"], of_topic, column + "[]", where + "[]")
    if isinstance(avro, dict) and avro.get("type") == "map":
        if not (isinstance(column_type, MapType) and column_type.keyType.simpleString() == "string"):
            return f"the field is a map with string keys, the column {got}"
        return _fits(column_type.valueType, avro["values"], of_topic, column + "{}", where + "{}")
    if name == "decimal":
        precision, scale = avro["precision"], avro.get("scale", 0)
        if got.startswith("decimal(") and column_type.scale == scale and column_type.precision <= precision:
            return None
        return f"the field is decimal({precision},{scale}), the column {got} (cast it to decimal({precision},{scale}))"
    allowed = _AVRO_COLUMNS.get(name)
    if allowed is None:
        return f"Avro type {avro!r} is not one the sink encodes"
    if got in allowed:
        return None
    try:
        reader = spark_type(arrow_type(avro)).simpleString()
    except UnsupportedSchema:
        reader = allowed[0]
    return f"the column is {got}, the field Avro {name} (read as {reader}); a column of {' or '.join(allowed)} fits: cast it"

