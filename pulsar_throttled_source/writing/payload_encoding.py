"""Executor side: a row's payload made with its topic's schema (writing.payload_schema decided how), and the schema
the producer declares, so the broker checks it against the topic's and every message carries the topic's schema version.

- AVRO: the Avro binary datum without a header (what Pulsar's AVRO schema writes), by fastavro's schemaless_writer.
- JSON: the record as a JSON object, as Pulsar's Java JSON schema writes it (Jackson): timestamps as epoch
  milliseconds or microseconds, dates as epoch days, bytes as base64 text (what schemas.decoders reads back).
- Primitives: Pulsar's encodings (big-endian, fixed width; the inverse of schemas.primitives); STRING as UTF-8.
- A null `value`, or a row whose record columns are all null (how the reader shows a message without payload), is a
  message without payload: a compacted topic's tombstone for its key.
Spark gives a `timestamp` as a naive datetime in local time: made aware before it is encoded.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple

import _pulsar  # the client's own schema classes build their SchemaInfo from it too
import pulsar

from ..admin_endpoint import AdminEndpoint
from ..topics import TopicName
from .message_columns import WriteColumns
from .payload_schema import PayloadEncoding, TopicSchema, payload_encoding, topic_schema

Prepare = Callable[[Any], Any]  # a column's Python value into what the encoder takes
Encode = Callable[[Any], "bytes | None"]  # a row into its payload (None: no payload)
Make = Callable[..., "bytes | None"]  # the values of a payload's columns, one argument each, into the payload

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)
_US = timedelta(microseconds=1)
_PACKED = {"INT8": ">b", "INT16": ">h", "INT32": ">i", "INT64": ">q", "FLOAT": ">f", "DOUBLE": ">d", "LOCAL_TIME": ">q"}


class EncodeError(ValueError):
    """A row the topic's schema cannot encode (a null in a required field, a value out of range, ...)."""


class TopicPayload(NamedTuple):
    """How one topic's payloads are made: from a row (`encode`), or from the values of the encoding's columns, one
    argument each (`make`, which writing.arrow_messages maps over an Arrow batch's columns); the schema declared."""

    encoding: PayloadEncoding
    make: Make
    encode: Encode
    schema: DeclaredSchema | None


class TopicPayloads:
    """One task's payload makers and declared schemas per topic: the `topic` option's as planned on the driver; each
    topic a topic column names checked against its schema before its first row is sent (one admin request each)."""

    def __init__(self, columns: WriteColumns, topic: TopicName | None, admin: AdminEndpoint) -> None:
        self._columns = columns
        self._topic = topic
        self._admin = admin
        self._found: dict[str, TopicPayload] = {}
        self._named: dict[str | None, TopicPayload | None] = {}
        # Every payload is the `value` column as it is: the `topic` option's topic has no schema, or takes it raw.
        self.raw = topic is not None and (columns.encoding is None or columns.encoding.how == "raw")

    def of(self, topic: TopicName) -> TopicPayload:
        found = self._found.get(str(topic.base))
        if found is None:
            encoding = self._columns.encoding or self._encoding(topic)
            make = payload_maker(encoding)
            found = self._found[str(topic.base)] = TopicPayload(encoding, make, _row_encoder(make, encoding.positions),
                                                                producer_schema(encoding.schema))
        return found

    def named(self, topic: str | None) -> TopicPayload | None:
        """The payloads of the topic a row's topic column names (with the `topic` option: that topic's), or None where
        it names no topic: the sending core refuses that row, naming the column."""
        if topic not in self._named:
            try:
                name = self._topic or TopicName.parse(topic or "", "topic")
            except ValueError:
                return None
            self._named[topic] = self.of(name)
        return self._named[topic]

    def _encoding(self, topic: TopicName) -> PayloadEncoding:
        if self._topic is not None and self._columns.encoding is None:  # columns checked for a topic without a schema
            return PayloadEncoding(str(topic), TopicSchema(), "raw", (self._columns.value,))
        from ..metadata.admin import PulsarAdmin

        admin = PulsarAdmin.at(self._admin, retry_timeout_s=0.0)
        try:
            schema = topic_schema(admin, topic.base)
        finally:
            admin.close()
        return payload_encoding(self._columns, str(topic.base), schema)


def encoder(encoding: PayloadEncoding) -> Encode:
    """The function that makes one row's payload."""
    return _row_encoder(payload_maker(encoding), encoding.positions)


def _row_encoder(make: Make, positions: tuple[int, ...]) -> Encode:
    if len(positions) == 1:
        at = positions[0]
        return lambda row: make(row[at])
    return lambda row: make(*[row[p] for p in positions])


def payload_maker(encoding: PayloadEncoding) -> Make:
    """The function that makes a payload from the values of the columns at encoding.positions, one argument each."""
    how = encoding.how
    if how == "raw":
        return _raw
    if how == "primitive":
        pack = _primitive(encoding.schema.kind)
        return lambda value: None if value is None else pack(value)
    json_payload = encoding.schema.kind == "JSON"
    write = _json_writer() if json_payload else _avro_writer(encoding.schema)
    record = encoding.schema.record
    if how == "struct":
        prepare = _prepare(record, encoding.types[0], json_payload)
        assert prepare is not None
        return lambda value: None if value is None else write(prepare(value), encoding.topic)
    fields = {f["name"]: f["type"] for f in record["fields"]}
    prepares = [(name, _prepare(fields[name], t, json_payload)) for name, t in zip(encoding.fields, encoding.types, strict=True)]

    def from_columns(*values: Any) -> bytes | None:
        if all(v is None for v in values):
            return None
        return write({name: _prepared(v, prepare) for (name, prepare), v in zip(prepares, values, strict=True)}, encoding.topic)

    return from_columns


def _raw(value: Any) -> bytes | None:
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else bytes(value)


def _avro_writer(schema: TopicSchema) -> Callable[[dict[str, Any], str], bytes]:
    import fastavro
    from fastavro.validation import validate

    parsed = fastavro.parse_schema(json.loads(schema.definition))

    def write(record: dict[str, Any], topic: str) -> bytes:
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, record)
        except Exception as e:
            try:  # fastavro's writer does not say which field: its validator does
                validate(record, parsed, raise_errors=True)
                detail = f"{type(e).__name__}: {e}"
            except Exception as invalid:
                detail = "; ".join(str(error) for error in getattr(invalid, "errors", None) or [invalid])
            raise EncodeError(f"A row cannot be encoded with topic {topic}'s AVRO schema: {detail}") from None
        return out.getvalue()

    return write


def _json_writer() -> Callable[[dict[str, Any], str], bytes]:
    def write(record: dict[str, Any], topic: str) -> bytes:
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()

    return write


def _prepare(avro: Any, column_type: Any, json_payload: bool) -> Prepare | None:
    """What turns a column's value into the encoder's for this Avro type, or None when it already is one. Spark gives
    structs as Rows, binary as bytearray and a timestamp as naive local time; JSON carries logical types as numbers."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DateType,
        DecimalType,
        MapType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if isinstance(avro, list):
        avro = next(b for b in avro if b != "null")
    logical = avro.get("logicalType") if isinstance(avro, dict) else None
    if isinstance(column_type, StructType):
        fields = {f["name"]: f["type"] for f in avro["fields"]}
        inner = [(f.name, _prepare(fields[f.name], f.dataType, json_payload)) for f in column_type.fields]
        return lambda row: {name: _prepared(row[name], p) for name, p in inner}
    if isinstance(column_type, ArrayType):
        item = _prepare(avro["items"], column_type.elementType, json_payload)
        return (lambda values: [None if v is None else item(v) for v in values]) if item else None
    if isinstance(column_type, MapType):
        value = _prepare(avro["values"], column_type.valueType, json_payload)
        return (lambda m: {k: None if v is None else value(v) for k, v in m.items()}) if value else None
    if isinstance(column_type, BinaryType):
        return (lambda b: base64.b64encode(b).decode()) if json_payload else bytes
    if isinstance(column_type, TimestampType | TimestampNTZType):
        aware = isinstance(column_type, TimestampType)
        if not json_payload:
            return (lambda t: t if t.tzinfo is not None else t.astimezone()) if aware else None
        per = 1000 if logical in ("timestamp-millis", "local-timestamp-millis") else 1
        return lambda t: _epoch_us(t, aware) // per
    if json_payload and isinstance(column_type, DateType):
        return lambda d: (d - _EPOCH_DATE).days
    if json_payload and isinstance(column_type, DecimalType):
        return _json_number
    return None


def _prepared(value: Any, prepare: Prepare | None) -> Any:
    return value if value is None or prepare is None else prepare(value)


def _json_number(d: Decimal) -> int | float:
    return int(d) if d == d.to_integral_value() else float(d)


def _epoch_us(t: datetime, aware: bool) -> int:
    """Microseconds since the epoch: an aware (or naive local, a `timestamp`) instant, or a naive `timestamp_ntz` as UTC."""
    if aware:
        return (t.astimezone() - _EPOCH) // _US if t.tzinfo is None else (t - _EPOCH) // _US
    return (t.replace(tzinfo=None) - _EPOCH_NAIVE) // _US


def _primitive(kind: str) -> Callable[[Any], bytes]:
    """A `value` into a primitive schema's payload, as schemas.primitives reads it back."""
    if kind in _PACKED:
        fmt = _PACKED[kind]
        return lambda v: struct.pack(fmt, v)
    if kind == "STRING":
        return lambda v: v.encode()
    if kind == "BOOLEAN":
        return lambda v: b"\x01" if v else b"\x00"
    if kind in ("DATE", "TIME", "TIMESTAMP"):  # epoch milliseconds
        return lambda t: struct.pack(">q", _epoch_us(t, True) // 1000)
    if kind == "INSTANT":  # seconds and nanoseconds
        return lambda t: struct.pack(">qi", *_seconds_and_nanos(_epoch_us(t, True)))
    if kind == "LOCAL_DATE":  # epoch days
        return lambda d: struct.pack(">q", (d - _EPOCH_DATE).days)
    if kind == "LOCAL_DATE_TIME":  # epoch days and nanoseconds of the day
        return lambda t: struct.pack(">qq", *_days_and_nanos(_epoch_us(t, False)))
    raise ValueError(f"no encoding for primitive schema {kind}")


def _seconds_and_nanos(us: int) -> tuple[int, int]:
    seconds, micros = divmod(us, 1_000_000)
    return seconds, micros * 1000


def _days_and_nanos(us: int) -> tuple[int, int]:
    days, of_day = divmod(us, 86_400_000_000)
    return days, of_day * 1000


class DeclaredSchema(pulsar.schema.Schema):
    """A topic's schema as its producer declares it; the payloads arrive encoded (encoder above), so it passes them on.
    Equal for one type and definition: the worker's producer cache keys producers by it (writing.producers)."""

    def __init__(self, kind: str, definition: str) -> None:  # not super().__init__(): it would re-serialize the definition
        self.key = (kind, definition)
        self._record_cls = bytes
        self._schema_info = _pulsar.SchemaInfo(getattr(_pulsar.SchemaType, kind), kind, definition)

    def encode(self, data: bytes) -> bytes:
        return data

    def decode(self, data: bytes) -> bytes:
        return data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeclaredSchema) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"DeclaredSchema({self.key[0]})"

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return DeclaredSchema, self.key


def producer_schema(schema: TopicSchema) -> DeclaredSchema | None:
    """The schema a producer on the topic declares: the topic's own type and definition (as the admin API gave it, so
    the broker finds that version rather than adding one), or None for no schema and for the types pulsar-client has no
    SchemaType for (BOOLEAN, the temporal ones): those payloads are sent as bytes, without a schema version."""
    if schema.kind in ("NONE", "BYTES") or not hasattr(_pulsar.SchemaType, schema.kind):
        return None
    return DeclaredSchema(schema.kind, schema.definition)
