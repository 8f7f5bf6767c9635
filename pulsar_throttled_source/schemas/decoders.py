"""Executor side: payloads into the reader's columns, whatever schema version wrote them.

AVRO payloads are Avro binary without a header; each message names its writer's schema version,
looked up once per worker process, and fastavro resolves it to the reader's schema (added fields
take their defaults, removed ones are dropped), as Pulsar's own AVRO consumers do. JSON payloads
are objects whose fields are read by name (missing: null). STRING payloads are UTF-8 text."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from .columns import RECORD_KINDS, ValueSchema

Fix = Callable[[Any], Any]  # a decoded Python value into what Arrow takes for its column type
WriterSchema = Callable[[int], str | None]  # schema version -> its Avro definition (None: unknown)

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
EPOCH_DATE = date(1970, 1, 1)


class DecodeError(ValueError):
    """A payload the reader's schema cannot decode (the message id is added by the caller)."""


class PayloadDecoder:
    """Decodes one topic's payloads into a row: {field: value} for records, the value for STRING."""

    def __init__(self, schema: ValueSchema, writer_schema: WriterSchema) -> None:
        self.schema = schema
        self.field_names = [f.name for f in schema.value_fields]
        self._writer_schema = writer_schema
        if schema.kind == "AVRO":
            import fastavro

            self._parse = fastavro.parse_schema
            self._read = fastavro.schemaless_reader
            self._reader = fastavro.parse_schema(schema.reader_schema)
            self._writers: dict[int, Any] = {}
        self._fixes = _record_fixes(schema.reader_schema, json_payload=schema.kind == "JSON") if schema.kind in RECORD_KINDS else {}

    def decode(self, payload: bytes, version: int) -> Any:
        kind = self.schema.kind
        try:
            if kind == "STRING":
                return payload.decode("utf-8")
            row: Any
            if kind == "AVRO":
                row = self._read(io.BytesIO(payload), self._writer(version), self._reader)
            else:
                row = json.loads(payload)
                if not isinstance(row, dict):
                    raise DecodeError(f"a JSON {type(row).__name__}, not an object")
            for name, fix in self._fixes.items():
                if row.get(name) is not None:
                    row[name] = fix(row[name])
            return row
        except DecodeError:
            raise
        except Exception as e:  # fastavro, json and codecs raise many kinds; all mean "not this schema"
            raise DecodeError(f"{type(e).__name__}: {e}") from None

    def _writer(self, version: int) -> Any:
        if version < 0:
            return self._reader  # written without a schema version: take it as the reader's
        writer = self._writers.get(version)
        if writer is None:
            definition = self._writer_schema(version)
            if definition is None:
                raise DecodeError(f"schema version {version} of the topic is not known to the broker")
            parsed = json.loads(definition)
            # The reader's own version: the very same parsed schema as writer and reader lets fastavro
            # skip schema resolution (measured ~30% of a small record's decode).
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
