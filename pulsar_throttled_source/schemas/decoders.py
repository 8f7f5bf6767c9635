"""Executor side: payloads into the reader's columns, whatever schema version wrote them.

AVRO payloads are Avro binary without a header; each message names its writer's schema version,
looked up once per worker process, and fastavro resolves it to the reader's schema (added fields
take their defaults, removed ones are dropped), as Pulsar's own AVRO consumers do. JSON payloads
are objects whose fields are read by name (missing: null). STRING payloads are UTF-8 text, the
primitives as schemas/primitives.py reads them. A KeyValue is either side decoded as its own type:
INLINE carries both in the payload, SEPARATED its key in the message key (base64 of the bytes)."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from .columns import RECORD_KINDS, ValueSchema
from .primitives import EPOCH, EPOCH_DATE, PRIMITIVES

Fix = Callable[[Any], Any]  # a decoded Python value into what Arrow takes for its column type
WriterSchema = Callable[[int], str | None]  # schema version -> its Avro definition (None: unknown)


class DecodeError(ValueError):
    """A payload the reader's schema cannot decode (the message id is added by the caller)."""


class PayloadDecoder:
    """Decodes one topic's payloads into a row: {field: value} for records, {"key": k, "value": v}
    for KeyValues, the value itself for the other types."""

    def __init__(self, schema: ValueSchema, writer_schema: WriterSchema) -> None:
        self.schema = schema
        # Decided once, not per message: whether the key comes from the message key.
        self._key_from_message = schema.kind == "KEY_VALUE" and schema.separated
        if schema.kind == "KEY_VALUE":
            self._key = _part(schema.side("key"), _side_of(writer_schema, "key"))
            self._value = _part(schema.side("value"), _side_of(writer_schema, "value"))
            self._decode: Callable[[bytes, int], Any] = self._inline  # SEPARATED: see decode()
        else:
            self._decode = _part(schema, writer_schema)

    def decode(self, payload: bytes | None, version: int, message_key: str = "") -> Any:
        """`payload` None is a null value (a tombstone); `message_key` is the message's key, which
        holds a SEPARATED KeyValue's key (base64)."""
        try:
            if self._key_from_message:
                return self._separated(payload, version, message_key)
            return None if payload is None else self._decode(payload, version)
        except DecodeError:
            raise
        except Exception as e:  # fastavro, json, struct and codecs raise many kinds; all mean "not this schema"
            raise DecodeError(f"{type(e).__name__}: {e}") from None

    def _inline(self, payload: bytes, version: int) -> dict[str, Any]:
        # [key length][key][value length][value], lengths 4-byte big-endian, -1 for a null side.
        key_length = int.from_bytes(payload[0:4], "big", signed=True)
        at = 4 + max(key_length, 0)
        value_length = int.from_bytes(payload[at:at + 4], "big", signed=True)
        if len(payload) < 8 or at + 4 + max(value_length, 0) != len(payload):
            raise DecodeError(f"not an INLINE KeyValue: lengths {key_length} and {value_length} in {len(payload)} bytes")
        key = None if key_length < 0 else self._key(payload[4:at], version)
        value = None if value_length < 0 else self._value(payload[at + 4:], version)
        return {"key": key, "value": value}

    def _separated(self, payload: bytes | None, version: int, message_key: str) -> dict[str, Any] | None:
        key = self._key(base64.b64decode(message_key, validate=True), version) if message_key else None
        value = None if payload is None else self._value(payload, version)
        return None if key is None and payload is None else {"key": key, "value": value}


def _side_of(writer_schema: WriterSchema, which: str) -> WriterSchema:
    """A KeyValue writer version's definition of one side (the admin API gives both at once)."""
    def side(version: int) -> str | None:
        definition = writer_schema(version)
        if definition is None:
            return None
        part = json.loads(definition).get(which)
        return json.dumps(part) if isinstance(part, dict) else ""
    return side


def _part(schema: ValueSchema, writer_schema: WriterSchema) -> Callable[[bytes, int], Any]:
    """payload, writer version -> value, for a payload of one schema type."""
    kind = schema.kind
    if kind in RECORD_KINDS:
        return _RecordDecoder(schema, writer_schema).decode
    if kind == "STRING":
        return lambda payload, version: payload.decode("utf-8")
    if kind in PRIMITIVES:
        read = PRIMITIVES[kind][1]
        return lambda payload, version: read(payload)
    return lambda payload, version: payload  # BYTES


class _RecordDecoder:
    """AVRO (resolved from the writer's version) and JSON (by field name) payloads into a dict."""

    def __init__(self, schema: ValueSchema, writer_schema: WriterSchema) -> None:
        self.schema = schema
        self._writer_schema = writer_schema
        if schema.kind == "AVRO":
            import fastavro

            self._parse = fastavro.parse_schema
            self._read = fastavro.schemaless_reader
            self._reader = fastavro.parse_schema(schema.reader_schema)
            self._writers: dict[int, Any] = {}
        self._fixes = _record_fixes(schema.reader_schema, json_payload=schema.kind == "JSON")

    def decode(self, payload: bytes, version: int) -> Any:
        row: Any
        if self.schema.kind == "AVRO":
            row = self._read(io.BytesIO(payload), self._writer(version), self._reader)
        else:
            row = json.loads(payload)
            if not isinstance(row, dict):
                raise DecodeError(f"a JSON {type(row).__name__}, not an object")
        for name, fix in self._fixes.items():
            if row.get(name) is not None:
                row[name] = fix(row[name])
        return row

    def _writer(self, version: int) -> Any:
        if version < 0:
            return self._reader  # written without a schema version: take it as the reader's
        writer = self._writers.get(version)
        if writer is None:
            definition = self._writer_schema(version)
            if not definition:
                raise DecodeError(f"schema version {version} of the topic is not known to the broker")
            parsed = json.loads(definition)
            # The reader's own version: the very same parsed schema as writer and reader lets fastavro
            # skip schema resolution, a good part of a small record's decode (bench/README.md, "Figures behind the code").
            same = parsed == self.schema.reader_schema
            writer = self._writers[version] = self._reader if same else self._parse(parsed)
        return writer


def _record_fixes(schema: Any, json_payload: bool) -> dict[str, Fix]:
    """Per top-level field, the fix its decoded values need (fields that need none are left out)."""
    fixes = {}
    for field in schema.get("fields", []):
        fix = _fix(field["type"], json_payload, {})
        if fix is not None:
            fixes[field["name"]] = fix
    return fixes


def _fix(schema: Any, json_payload: bool, named: dict[str, Any]) -> Fix | None:
    """What turns a decoded value of this Avro type into the Arrow column's Python value, or None
    when it already is one. fastavro converts logical types itself (datetimes, dates, decimals);
    JSON carries them as numbers and bytes as base64 text, as Jackson writes them."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return _fix(branches[0], json_payload, named) if len(branches) == 1 else None
    if isinstance(schema, str):
        if json_payload and schema in ("bytes", "fixed"):
            return _b64
        return named.get(schema)
    kind, logical = schema.get("type"), schema.get("logicalType")
    if kind == "record":
        found = {f["name"]: _fix(f["type"], json_payload, named) for f in schema.get("fields", [])}
        inner = {k: v for k, v in found.items() if v is not None}
        fix = _record_fix(inner) if inner else None
        if fix is not None:
            named[schema.get("name", "")] = fix
        return fix
    if kind == "array":
        item = _fix(schema["items"], json_payload, named)
        return (lambda values: [None if v is None else item(v) for v in values]) if item else None
    if kind == "map":
        value = _fix(schema["values"], json_payload, named)
        return (lambda m: {k: None if v is None else value(v) for k, v in m.items()}) if value else None
    if logical == "uuid":
        return str
    if logical in ("time-millis", "time-micros"):
        scale = 1000 if logical == "time-millis" else 1_000_000
        return lambda t: t if isinstance(t, int) else (t.hour * 3600 + t.minute * 60 + t.second) * scale + t.microsecond * scale // 1_000_000
    # fastavro converts logical values it decodes, but not a field's default (an added field read
    # from an older writer): ints are converted wherever they appear.
    if logical in ("timestamp-millis", "local-timestamp-millis", "timestamp-micros", "local-timestamp-micros", "date") or json_payload:
        if logical in ("timestamp-millis", "local-timestamp-millis"):
            tz = logical == "timestamp-millis"
            return lambda ms: _timestamp(ms * 1000, tz) if isinstance(ms, int) else ms
        if logical in ("timestamp-micros", "local-timestamp-micros"):
            tz = logical == "timestamp-micros"
            return lambda us: _timestamp(us, tz) if isinstance(us, int) else us
        if logical == "date":
            return lambda days: EPOCH_DATE + timedelta(days=days) if isinstance(days, int) else days
        if logical == "decimal" and json_payload:
            return lambda n: Decimal(str(n))
        if kind in ("bytes", "fixed") and json_payload:
            return _b64
    return None


def _record_fix(inner: dict[str, Fix]) -> Fix:
    def fix(record: dict[str, Any]) -> dict[str, Any]:
        for name, f in inner.items():
            if record.get(name) is not None:
                record[name] = f(record[name])
        return record
    return fix


def _timestamp(micros: int, tz: bool) -> datetime:
    moment = EPOCH + timedelta(microseconds=micros)
    return moment if tz else moment.replace(tzinfo=None)


def _b64(text: Any) -> Any:
    return base64.b64decode(text) if isinstance(text, str) else text
