"""Issue 16: the schema types only Java producers write (the Python client has STRING, BYTES, AVRO
and JSON): every primitive as a typed `value`, KeyValues (INLINE and SEPARATED, primitive and
record sides) as `key` and `value`, and a plain topic's binary keys, empty keys and null values.

One Java producer (java/SchemaProducer.java, on the broker's own client jars) writes every topic,
batched, as producers in the field send; each topic is then read by its own query, a few at a time."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from helpers import create_topic, wait_sources_started
from java_producer import JavaProducer
from streaming import Collected, source_options, start_collecting

UTC = timezone.utc


def tab(*fields: str) -> str:
    """One SchemaProducer.java command line: its fields are tab-separated (a value may hold spaces)."""
    return "\t".join(fields)


def ms(t: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=t)


# Java schema name -> [(text the producer is given, the column value it must read as)]; every topic
# also gets a null value (Java's value(null)), which must read as null. TIME and TIMESTAMP are read
# as DATE is, LOCAL_TIME as INT64 is (same payload layout and column type): their decoding is in
# tests/unit/test_schema_primitives.py, on bytes this producer wrote, and costs no query here.
PRIMITIVES: dict[str, list[tuple[str, Any]]] = {
    "int8": [("-128", -128), ("0", 0), ("127", 127)],
    "int16": [("-32768", -32768), ("7", 7), ("32767", 32767)],
    "int32": [("-2147483648", -2147483648), ("42", 42)],
    "int64": [("-9223372036854775808", -2**63), ("9223372036854775807", 2**63 - 1)],
    "float": [("1.5", 1.5), ("-0.25", -0.25)],
    "double": [("3.141592653589793", 3.141592653589793), ("-1e300", -1e300)],
    "boolean": [("true", True), ("false", False)],
    "date": [("1700000000123", ms(1700000000123)), ("-86400000", ms(-86400000))],
    # Spark keeps microseconds: an instant's nanoseconds below them are cut (documented).
    "instant": [("2024-01-02T03:04:05.123456789Z", datetime(2024, 1, 2, 3, 4, 5, 123456, UTC)),
                ("1969-12-31T23:59:59.500Z", datetime(1969, 12, 31, 23, 59, 59, 500000, UTC))],
    "local_date": [("2024-02-29", date(2024, 2, 29)), ("1960-01-01", date(1960, 1, 1))],
    "local_date_time": [("2024-01-02T03:04:05.123456789", datetime(2024, 1, 2, 3, 4, 5, 123456)),
                        ("1960-01-01T00:00", datetime(1960, 1, 1))],
}
# KeyValue schemas: [(the "<key>|<value>" given, (key, value) read)]; a record is "<sensor>,<reading>".
KEY_VALUES: dict[str, list[tuple[str, tuple[Any, Any]]]] = {
    "kv_int_string": [("7|seven", (7, "seven")), ("null|no key", (None, "no key")), ("8|null", (8, None))],
    "kv_string_avro": [("k1|a,1.5", ("k1", {"sensor": "a", "reading": 1.5})), ("k2|null", ("k2", None)),
                       ("null|b,2", (None, {"sensor": "b", "reading": 2.0}))],
    "kv_avro_json": [("a,1|b,2", ({"sensor": "a", "reading": 1.0}, {"sensor": "b", "reading": 2.0})),
                     ("null|c,3", (None, {"sensor": "c", "reading": 3.0}))],
}
# A plain topic: (key given, value given) -> (key column, value column) in the raw layout.
PLAIN = [("hex:00ff10", "v:binary key", "AP8Q", b"binary key"),  # keyBytes: its base64 text (a client limit)
         ("str:", "v:empty key", None, b"empty key"),  # key "": null (a client limit)
         ("str:k", "null", "k", None),  # a tombstone
         ("none", "v:", None, b"")]  # an empty payload, not a null value


@pytest.fixture(scope="module")
def written(broker, admin) -> dict[str, tuple[str, Counter]]:
    """Java schema name -> (topic, the rows its query must deliver), every topic written by one producer."""
    import uuid

    unique = uuid.uuid4().hex[:8]
    producer = JavaProducer("SchemaProducer.java", broker.service_url)
    expected: dict[str, tuple[str, Counter]] = {}
    try:
        for name, cases in {**PRIMITIVES, **KEY_VALUES}.items():
            topic = create_topic(admin, f"types-{name.replace('_', '-')}-{unique}", 2)
            rows: Counter = Counter()
            for i, (text, value) in enumerate([*cases, ("null", None)]):
                key = f"k{i}"
                producer.do(tab("send", topic, name, f"str:{key}" if name != "kv_string_avro" else "none",
                                text if text == "null" else f"v:{text}"))
                rows[_row(name, value, key)] += 1
            expected[name] = (topic, rows)
        topic = create_topic(admin, f"types-plain-{unique}", 0)
        for key, value, _, _ in PLAIN:
            producer.do(tab("send", topic, "bytes", key, value))
        expected["plain"] = (topic, Counter((key, value) for _, _, key, value in PLAIN))
        producer.do("flush")
    finally:
        producer.close()
    return expected


def _row(name: str, value: Any, key: str) -> tuple:
    if name in KEY_VALUES:
        kv = (None, None) if value is None else value
        return tuple(_frozen(v) for v in kv)  # SEPARATED: the key is the KeyValue's own
    return (_frozen(value), key)


def _frozen(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def _delivered(name: str, row: Any) -> tuple:
    if name == "plain":
        return (row.key, None if row.value is None else bytes(row.value))
    if name in KEY_VALUES:
        return tuple(_frozen(v.asDict() if hasattr(v, "asDict") else v) for v in (row.key, row.value))
    value = row.value
    if isinstance(value, datetime) and name not in ("local_date_time",):
        value = value.astimezone(UTC)  # Spark gives a timestamp in the session's local time
    return (value, row["__key"])


AT_ONCE = 4  # queries running together: each starts a Python planner process, on 2 cores


def test_every_primitive_key_value_and_plain_message_reads_as_written(spark, broker, written, tmp_path):
    sinks: dict[str, Collected] = {}
    names = list(written)
    for wave in range(0, len(names), AT_ONCE):
        queries = {}
        for name in names[wave:wave + AT_ONCE]:
            sinks[name] = Collected()
            queries[name] = start_collecting(spark, source_options(broker, written[name][0], startingOffsets="earliest"),
                                             sinks[name], tmp_path / name, availableNow=True)
            wait_sources_started(queries[name])  # side by side, but their planner processes started one at a time
        for name, query in queries.items():
            assert query.awaitTermination(180), name
            assert query.exception() is None, f"{name}: {query.exception()}"
    for name, (_, expected) in written.items():
        delivered = Counter(_delivered(name, row) for row in sinks[name].rows)
        assert delivered == expected, name
