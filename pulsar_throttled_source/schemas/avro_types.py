"""Avro schemas (the definitions Pulsar's AVRO and JSON schemas carry) as Arrow and Spark types,
the way Spark's own Avro reader maps them (spark-avro SchemaConverters): records are structs,
`["null", X]` is a nullable X, enums and uuids are strings, logical dates, timestamps and decimals
keep their meaning. Everything is nullable on the Spark side, as Spark's file sources make it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


class UnsupportedSchema(ValueError):
    """An Avro construct with no column type here (e.g. a union of two non-null types)."""


def arrow_type(schema: Any, named: dict[str, pa.DataType] | None = None, where: str = "value") -> pa.DataType:
    """The Arrow type of an Avro schema (parsed JSON). `named` collects named types (records, enums,
    fixed) for later references by name; `where` names the field in errors."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        short = schema.rsplit(".", 1)[-1]
        for name, found in named.items():
            if name.rsplit(".", 1)[-1] == short:
                return found
        if schema == "null":
            raise UnsupportedSchema(f"field '{where}' is always null: no column type for Avro 'null' alone")
        raise UnsupportedSchema(f"field '{where}' has unknown Avro type '{schema}'")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise UnsupportedSchema(f"field '{where}' is an Avro union of {len(branches)} non-null types "
                                    f"({', '.join(_type_name(b) for b in branches)}): only ['null', X] unions become columns")
        return arrow_type(branches[0], named, where)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if kind == "record":
        fields = [pa.field(f["name"], arrow_type(f["type"], named, f"{where}.{f['name']}" if where != "value" else f["name"]))
                  for f in schema.get("fields", [])]
        found = pa.struct(fields)
        named[_full_name(schema)] = found
        return found
    if kind == "enum":
        named[_full_name(schema)] = pa.string()
        return pa.string()
    if kind == "array":
        return pa.list_(arrow_type(schema["items"], named, f"{where}[]"))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(schema["values"], named, f"{where}{{}}"))
    if kind == "fixed":
        found = pa.decimal128(schema["precision"], schema.get("scale", 0)) if logical == "decimal" else pa.binary()
        named[_full_name(schema)] = found
        return found
    if logical in _LOGICAL and kind in _PRIMITIVES:
        return _LOGICAL[logical](schema)
    if isinstance(kind, (str, list, dict)):
        return arrow_type(kind, named, where)
    raise UnsupportedSchema(f"field '{where}' has an Avro type this source cannot read: {schema!r}")


def record_fields(schema: Any) -> list[pa.Field]:
    """The top-level columns of a record schema (its fields); raises UnsupportedSchema otherwise."""
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        raise UnsupportedSchema(f"the schema is not an Avro record but {_type_name(schema)}")
    record = arrow_type(schema)
    assert isinstance(record, pa.StructType)
    return [record.field(i) for i in range(record.num_fields)]


def spark_type(t: pa.DataType) -> Any:
    """The Spark type of an Arrow type built above (pure Python: no JVM is needed for it)."""
    from pyspark.sql import types as T

    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in t])
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type), spark_type(t.item_type), True)
    if pa.types.is_list(t):
        return T.ArrayType(spark_type(t.value_type), True)
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    simple = {pa.string(): T.StringType(), pa.binary(): T.BinaryType(), pa.bool_(): T.BooleanType(),
              pa.int32(): T.IntegerType(), pa.int64(): T.LongType(), pa.float32(): T.FloatType(),
              pa.float64(): T.DoubleType(), pa.date32(): T.DateType(), pa.int8(): T.ByteType(),
              pa.int16(): T.ShortType()}
    return simple[t]


_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
    "bytes": pa.binary(), "string": pa.string(),
}
_LOGICAL = {
    "date": lambda s: pa.date32(),
    "timestamp-millis": lambda s: pa.timestamp("us", tz="UTC"),
    "timestamp-micros": lambda s: pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": lambda s: pa.timestamp("us"),
    "local-timestamp-micros": lambda s: pa.timestamp("us"),
    "decimal": lambda s: pa.decimal128(s["precision"], s.get("scale", 0)),
    "uuid": lambda s: pa.string(),
    "time-millis": lambda s: pa.int32(),
    "time-micros": lambda s: pa.int64(),
}


def _full_name(schema: dict[str, Any]) -> str:
    name = str(schema.get("name", ""))
    namespace = schema.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


def _type_name(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema.get("logicalType") or schema.get("type"))
    return str(schema)
