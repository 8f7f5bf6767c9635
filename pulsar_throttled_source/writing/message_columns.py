"""Which columns of a DataFrame become which part of a message, checked once on the driver (write_columns), and
one row made into one message on an executor (WriteColumns.message).

The names are the reader's own in either layout (schemas.columns.MESSAGE_COLUMNS), so a DataFrame read by this
source writes back without renaming: `value` (binary or string), `key`/`__key`, `topic`/`__topic`,
`partition`/`__partition`, `eventTime`/`__eventTime`, `properties`/`__messageProperties`,
`orderingKey`/`__orderingKey`. What the broker sets (`messageId`, `publishTime`, `producerName` and their `__`
forms) is ignored. Any other column is an error naming it (nothing given is silently dropped), unless the topic
has a schema: then the other columns are the payload's, checked against the schema by writing.payload_schema.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..schemas.columns import MESSAGE_COLUMNS

READ_ONLY = ("messageId", "publishTime", "producerName")  # set by the broker or the producer, never by a row
# role -> the names it goes by (the raw layout's, then the decoded layout's)
ROLES: dict[str, tuple[str, ...]] = {raw: (raw,) if decoded is None else (raw, decoded)
                                     for raw, decoded, _ in MESSAGE_COLUMNS if raw not in READ_ONLY}
IGNORED = frozenset(name for raw, decoded, _ in MESSAGE_COLUMNS if raw in READ_ONLY for name in (raw, decoded) if name)
# Spark's simpleString of the types each role takes (every other role: string); a bigint event time is epoch milliseconds.
_ALLOWED_TYPES = {"value": ("binary", "string"), "partition": ("int", "tinyint", "smallint", "bigint"),
                  "eventTime": ("timestamp", "bigint"), "properties": ("map<string,string>",)}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MS = dt.timedelta(milliseconds=1)


class Message(NamedTuple):
    """One message to send: where (`topic` None: the write's option; `partition` None: the sink routes) and what.
    A tuple: one is made per row, and a tuple is made several times faster than a dataclass."""

    topic: str | None
    partition: int | None
    value: bytes | None  # None: a message without payload (a tombstone for a compacted topic)
    key: str | None
    properties: dict[str, str] | None
    event_time_ms: int | None
    ordering_key: str | None


@dataclass(frozen=True)
class WriteColumns:
    """The position of each role's column in a row (-1: absent) and how its values read."""

    names: tuple[str, ...]  # the DataFrame's columns, for messages
    value: int
    key: int = -1
    topic: int = -1
    partition: int = -1
    event_time: int = -1
    properties: int = -1
    ordering_key: int = -1
    value_is_string: bool = False
    value_is_raw: bool = True  # the `value` column is the payload (binary or string); else writing.payload_encoding makes it
    payload: tuple[int, ...] = ()  # a topic with a schema: the other columns (a record's fields)
    dataframe: Any = None  # the DataFrame's StructType (a topic column's topics are checked against it by the tasks)
    encoding: Any = None  # the `topic` option's writing.payload_schema.PayloadEncoding (None: the raw `value`)

    def message(self, row: Any) -> Message:
        value = row[self.value] if self.value >= 0 and self.value_is_raw else None
        if value is not None:
            value = value.encode() if self.value_is_string else bytes(value)
        return Message(
            topic=row[self.topic] if self.topic >= 0 else None,
            partition=row[self.partition] if self.partition >= 0 else None,
            value=value,
            key=row[self.key] if self.key >= 0 else None,
            properties=self.properties_of(row[self.properties]) if self.properties >= 0 else None,
            event_time_ms=_epoch_ms(row[self.event_time]) if self.event_time >= 0 else None,
            ordering_key=row[self.ordering_key] if self.ordering_key >= 0 else None,
        )

    def properties_of(self, value: Any) -> dict[str, str] | None:
        if not value:
            return None
        items = value.items() if isinstance(value, dict) else value  # a map: a dict (Row) or key-value pairs
        props = dict(items)
        nulls = sorted(k for k, v in props.items() if v is None or k is None)
        if nulls:
            raise ValueError(f"Column '{self.names[self.properties]}': a message property cannot be null (key(s) "
                             f"{', '.join(repr(k) for k in nulls)}); drop them or give a value.")
        return props


def _epoch_ms(value: Any) -> int | None:
    """An event time as epoch milliseconds: a timestamp (a naive one is local time, as Spark gives it) or a long."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.astimezone()
        return (aware - _EPOCH) // _MS
    return int(value)


def write_columns(schema: Any, topic_option: bool, schema_fields: frozenset[str] | None = None) -> WriteColumns:
    """The roles of `schema`'s columns (a pyspark StructType), or a clear error naming the columns at fault.
    `schema_fields` None: a topic without a schema (only the message's columns, a binary or string `value`); else the
    topic's record's field names, which are payload columns even where a message's column has the same name (as in the
    reader's layout of a schema, whose message columns take their `__` names)."""
    raw = schema_fields is None
    taken = schema_fields or frozenset()
    by_name = {f.name: f for f in schema.fields}
    known = {name: role for role, names in ROLES.items() for name in names if name not in taken}
    ignored = IGNORED - taken
    unknown = [name for name in by_name if name not in known and name not in ignored]
    if unknown and raw:
        accepted = ", ".join("/".join(names) for names in ROLES.values())
        raise ValueError(f"Column(s) {', '.join(repr(n) for n in unknown)} cannot be written to Pulsar: a write takes "
                         f"{accepted} ({', '.join(sorted(IGNORED))} are ignored). Drop or rename them (a topic without a "
                         "schema takes its payload from `value`; a topic with an AVRO or JSON schema, from its record's fields).")
    found: dict[str, str] = {}
    for name in by_name:
        role = known.get(name)
        if role is None:
            continue
        if role in found:
            raise ValueError(f"Columns '{found[role]}' and '{name}' both give the message's {role}; drop one of them.")
        found[role] = name
    if "value" not in found and raw:
        raise ValueError("A write needs a 'value' column (binary or string: the payload; null: a message without payload).")
    if "topic" not in found and not topic_option:
        raise ValueError("A write needs option 'topic' or a 'topic' (or '__topic') column naming each row's topic.")
    for role, name in found.items():
        if raw or role != "value":  # a schema's `value` (a struct, a primitive) is checked by writing.payload_schema
            _check_type(role, name, by_name[name].dataType.simpleString())
    names = tuple(by_name)
    value_type = by_name[found["value"]].dataType.simpleString() if "value" in found else ""

    def at(role: str) -> int:
        return names.index(found[role]) if role in found else -1

    return WriteColumns(names, value=at("value"), key=at("key"), topic=at("topic"), partition=at("partition"),
                        event_time=at("eventTime"), properties=at("properties"), ordering_key=at("orderingKey"),
                        value_is_string=value_type == "string", value_is_raw=value_type in _ALLOWED_TYPES["value"],
                        payload=tuple(names.index(n) for n in unknown), dataframe=schema)


def _check_type(role: str, name: str, type_name: str) -> None:
    allowed = _ALLOWED_TYPES.get(role, ("string",))
    if type_name not in allowed:
        raise ValueError(f"Column '{name}' is {type_name}; the message's {role} takes {' or '.join(allowed)}."
                         + (" Pulsar keys are strings in pulsar-client: cast it (e.g. base64 of the bytes)." if role == "key" else ""))
