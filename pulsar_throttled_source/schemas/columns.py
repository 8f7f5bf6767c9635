"""The columns of a query, declared once here (MESSAGE_COLUMNS) for both layouts:
- the raw layout, of a topic without a schema (or `decodeSchema=false`): the message's columns with the
  payload as bytes in `value` (RAW_ARROW_SCHEMA, RAW_SPARK_SCHEMA_DDL; built by reading/arrow_rows.py);
- a topic with a schema: the schema's fields (a record's fields as top-level columns, a typed `value`, or
  a KeyValue's `key` and `value`), then the message's metadata under pulsar-spark's names (`__key`,
  `__topic`, ...; METADATA_FIELDS), so a record field can never clash with them (ValueSchema)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from .avro_types import record_fields, spark_type
from .primitives import PRIMITIVES

RECORD_KINDS = ("AVRO", "JSON")  # payloads described by an Avro record definition
PART_KINDS = (*RECORD_KINDS, "STRING", "BYTES", *PRIMITIVES)  # what one side of a KeyValue can be
DECODED_KINDS = (*RECORD_KINDS, "STRING", *PRIMITIVES, "KEY_VALUE")
CORRUPT_RECORD = "__corruptRecord"  # decodeErrorMode=permissive: the payload that could not be decoded

# A message's columns, in order: the name in the raw layout, the name after a schema's fields (None: the
# payload, which the decoded fields replace) and the Arrow type.
MESSAGE_COLUMNS: tuple[tuple[str, str | None, pa.DataType], ...] = (
    ("key", "__key", pa.string()),
    ("value", None, pa.binary()),
    ("topic", "__topic", pa.string()),
    ("partition", "__partition", pa.int32()),
    ("messageId", "__messageId", pa.binary()),
    ("publishTime", "__publishTime", pa.timestamp("us", tz="UTC")),
    ("eventTime", "__eventTime", pa.timestamp("us", tz="UTC")),
    ("properties", "__messageProperties", pa.map_(pa.string(), pa.string())),
    ("orderingKey", "__orderingKey", pa.string()),
    ("producerName", "__producerName", pa.string()),
)
METADATA_COLUMNS = tuple(raw for raw, decoded, _ in MESSAGE_COLUMNS if decoded is not None)  # all but the payload
PARTITION_COLUMNS = ("topic", "partition")  # the same for every row of a read task: not read per message
RAW_ARROW_SCHEMA = pa.schema([pa.field(raw, arrow) for raw, _, arrow in MESSAGE_COLUMNS])
# DataSource.schema() as DDL: Spark parses it without a round trip through Python types.
RAW_SPARK_SCHEMA_DDL = ", ".join(f"{f.name} {spark_type(f.type).simpleString()}" for f in RAW_ARROW_SCHEMA)
METADATA_FIELDS = [pa.field(decoded, arrow) for _, decoded, arrow in MESSAGE_COLUMNS if decoded is not None]
METADATA_NAMES = frozenset(f.name for f in METADATA_FIELDS) | {CORRUPT_RECORD}


@dataclass(frozen=True)
class ValueSchema:
    """How a query's payloads become columns: `kind` is the topic schema's type (AVRO, JSON,
    STRING, a primitive, KEY_VALUE), `definition` the Avro record the reader decodes into (the
    topic's latest schema when the query was defined; for KEY_VALUE the admin API's
    {"key": ..., "value": ...}), `corrupt_records` whether undecodable payloads go to a column.
    A KEY_VALUE schema also names each side's type and where the key is: in the payload (INLINE)
    or in the message key (SEPARATED)."""

    kind: str
    definition: str = ""
    corrupt_records: bool = False
    key_kind: str = ""
    value_kind: str = ""
    separated: bool = False

    @cached_property
    def reader_schema(self) -> Any:
        return json.loads(self.definition) if self.definition else None

    def side(self, which: str) -> ValueSchema:
        """One side ("key" or "value") of a KEY_VALUE schema, as a schema of its own."""
        part = self.reader_schema.get(which) if isinstance(self.reader_schema, dict) else None
        definition = json.dumps(part) if isinstance(part, dict) else ""
        return ValueSchema(self.key_kind if which == "key" else self.value_kind, definition)

    @cached_property
    def column_type(self) -> pa.DataType:
        """The type of the whole payload as one column (a record is a struct)."""
        if self.kind in RECORD_KINDS:
            return pa.struct(record_fields(self.reader_schema))
        if self.kind in PRIMITIVES:
            return PRIMITIVES[self.kind][0]
        if self.kind == "KEY_VALUE":
            return pa.struct([pa.field("key", self.side("key").column_type), pa.field("value", self.side("value").column_type)])
        return {"STRING": pa.string(), "BYTES": pa.binary(), "NONE": pa.binary()}[self.kind]

    @cached_property
    def value_fields(self) -> list[pa.Field]:
        if self.kind in RECORD_KINDS:
            fields = record_fields(self.reader_schema)
            clashes = sorted(f.name for f in fields if f.name in METADATA_NAMES)
            if clashes:
                raise ValueError(f"The schema's field(s) {', '.join(clashes)} clash with the metadata columns "
                                 f"({', '.join(sorted(METADATA_NAMES))}); read the topic with decodeSchema=false.")
            return fields
        if self.kind == "KEY_VALUE":
            return list(self.column_type)
        return [pa.field("value", self.column_type)]

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        extra = [pa.field(CORRUPT_RECORD, pa.binary())] if self.corrupt_records else []
        return pa.schema([*self.value_fields, *METADATA_FIELDS, *extra])

    def spark_schema(self) -> Any:
        from pyspark.sql.types import StructField, StructType

        return StructType([StructField(f.name, spark_type(f.type), True) for f in self.arrow_schema])
