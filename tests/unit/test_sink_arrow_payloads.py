"""A topic with a schema written by an Arrow writer: the payloads made from whole Arrow columns (writing.arrow_messages)
are byte for byte the row path's (payload_encoding.encoder over Spark Rows), per topic where a topic column names
several; the producers declare each topic's schema. Batches are built with PySpark's own Arrow types for the columns."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace

import pulsar
import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, StringType, StructField, StructType
from test_sink_schema_checks import COLUMNS, POINT, POINT_TYPE, READING, TOPIC, planned, rows

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName
from pulsar_throttled_source.writing import write_task
from pulsar_throttled_source.writing.arrow_messages import _python_values, as_dicts, batch_messages
from pulsar_throttled_source.writing.message_columns import write_columns
from pulsar_throttled_source.writing.payload_encoding import DeclaredSchema, TopicPayloads, encoder
from pulsar_throttled_source.writing.payload_schema import TopicSchema
from pulsar_throttled_source.writing.write_options import parse_write_options

BASE = {"service.url": "pulsar://127.0.0.1:6650", "admin.url": "http://127.0.0.1:8080"}
SESSION_TZ = "America/New_York"  # Spark's session time zone, which its Arrow timestamps carry


def arrow_value(value):
    """A Spark Row's value as Arrow takes it: a Row a dict, a naive local timestamp the instant it is, a dict map pairs."""
    if isinstance(value, Row):
        return {k: arrow_value(v) for k, v in value.asDict().items()}
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.astimezone()
    if isinstance(value, dict):
        return [(k, arrow_value(v)) for k, v in value.items()]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def arrow_batch(schema: StructType, spark_rows: list, local_columns: tuple[str, ...] = ("local",)) -> pa.RecordBatch:
    arrow = to_arrow_schema(schema, timezone=SESSION_TZ)
    columns = []
    for i, f in enumerate(schema.fields):
        values = [r[i] if f.name in local_columns else arrow_value(r[i]) for r in spark_rows]  # timestamp_ntz: naive as it is
        columns.append(pa.array(values, arrow.field(i).type))
    return pa.RecordBatch.from_arrays(columns, schema=arrow)


@pytest.mark.parametrize("kind", ["AVRO", "JSON"])
def test_an_arrow_batch_makes_the_row_paths_payloads_for_a_record_topic(kind):
    cols, encoding = planned(COLUMNS, TopicSchema(kind, json.dumps(READING)))
    cols = replace(cols, encoding=encoding)  # the `topic` option's, as planned on the driver
    payloads = TopicPayloads(cols, TopicName.parse(TOPIC), parse_write_options(BASE).admin)
    assert not payloads.raw
    by_row = [encoder(encoding)(r) for r in rows()]
    messages = list(batch_messages([arrow_batch(COLUMNS, rows())], cols, payloads))
    assert [m.value for m in messages] == by_row and all(by_row)
    assert [m.key for m in messages] == ["mk", "k2"]


def test_a_struct_value_and_a_primitive_from_arrow_and_nulls_without_payload():
    cols, encoding = planned(StructType([StructField("key", StringType()), StructField("value", POINT_TYPE)]),
                             TopicSchema("AVRO", json.dumps(POINT)))
    cols = replace(cols, encoding=encoding)
    payloads = TopicPayloads(cols, TopicName.parse(TOPIC), parse_write_options(BASE).admin)
    spark_rows = [("k", Row(x=2.5, y=-1.0)), ("k", None)]
    batch = arrow_batch(StructType([StructField("key", StringType()), StructField("value", POINT_TYPE)]), spark_rows)
    assert [m.value for m in batch_messages([batch], cols, payloads)] == [encoder(encoding)(r) for r in spark_rows] != [None, None]
    schema = StructType([StructField("value", DoubleType())])
    cols, encoding = planned(schema, TopicSchema("DOUBLE"))
    payloads = TopicPayloads(replace(cols, encoding=encoding), TopicName.parse(TOPIC), parse_write_options(BASE).admin)
    made = [m.value for m in batch_messages([arrow_batch(schema, [(1.5,), (None,)])], replace(cols, encoding=encoding), payloads)]
    assert made == [b"?\xf8\x00\x00\x00\x00\x00\x00", None]


class SchemaAdmin:
    """The admin API's schema of each topic (a topic column's topics are looked up by the tasks), and who asked."""

    def __init__(self, schemas: dict[str, dict]) -> None:
        self.schemas, self.asked = schemas, []

    def at(self, endpoint, retry_timeout_s: float = 0.0, known_good: bool = False) -> SchemaAdmin:
        return self

    def topic_schema(self, topic: TopicName) -> dict | None:
        self.asked.append(str(topic))
        return self.schemas.get(str(topic))

    def close(self) -> None:
        pass


TOPIC_COLUMN = StructType([StructField("topic", StringType()), StructField("value", POINT_TYPE)])
A, B = "persistent://public/default/a", "persistent://public/default/b"


@pytest.fixture
def admin(monkeypatch) -> SchemaAdmin:
    found = SchemaAdmin({A: {"type": "AVRO", "data": json.dumps(POINT)}, B: {"type": "JSON", "data": json.dumps(POINT)}})
    monkeypatch.setattr(PulsarAdmin, "at", found.at)
    return found


def test_a_topic_column_gets_each_topics_payloads_in_the_rows_order(admin):
    cols = write_columns(TOPIC_COLUMN, False, frozenset())
    spark_rows = [("a", Row(x=1.0, y=None)), ("b", Row(x=2.0, y=3.0)), (None, Row(x=9.0, y=9.0)), ("a", Row(x=4.0, y=5.0))]
    messages = list(batch_messages([arrow_batch(TOPIC_COLUMN, spark_rows)], cols, TopicPayloads(cols, None, parse_write_options(BASE).admin)))
    by_topic = TopicPayloads(cols, None, parse_write_options(BASE).admin)
    expected = [by_topic.named(r[0]).encode(r) if r[0] else None for r in spark_rows]  # type: ignore[union-attr]
    assert [m.value for m in messages] == expected and expected[0] != expected[3] and None not in (expected[0], expected[1])
    assert json.loads(messages[1].value) == {"x": 2.0, "y": 3.0}  # b's payloads are JSON, a's Avro
    assert sorted(admin.asked) == [A, A, B, B]  # each topic once per task (two TopicPayloads here)


def test_both_writers_send_the_same_payloads_on_producers_declaring_each_topics_schema(admin, monkeypatch):
    sent: list[tuple[str, bytes | None]] = []
    declared: dict[str, object] = {}

    class Producer:
        def __init__(self, destination: str) -> None:
            self.destination = destination

        def send_async(self, value, callback, **_kwargs) -> None:
            sent.append((self.destination, value))
            callback(pulsar.Result.Ok, None)

        def flush(self) -> None:
            pass

    def producer_for(config, destination, kwargs):
        declared[destination] = dict(kwargs).get("schema")
        return ("k", destination), Producer(destination)

    monkeypatch.setattr(write_task, "partition_names", lambda config, topic: [topic])
    monkeypatch.setattr(write_task, "producer_for", producer_for)
    monkeypatch.setattr(write_task, "done_with", lambda keys, failed: None)
    cols = write_columns(TOPIC_COLUMN, False, frozenset())
    spark_rows = [("a", Row(x=1.0, y=None)), ("b", Row(x=2.0, y=3.0)), ("a", Row(x=4.0, y=5.0))]
    options = parse_write_options(BASE)
    by_rows = write_task.write_rows(spark_rows, options, cols, task=0)
    from_rows, sent[:] = list(sent), []
    by_batches = write_task.write_batches([arrow_batch(TOPIC_COLUMN, spark_rows)], options, cols, task=0)
    assert sent == from_rows and len(sent) == 3 and by_rows.messages == by_batches.messages == {A: 2, B: 1}
    assert declared[A] == DeclaredSchema("AVRO", json.dumps(POINT)) and declared[B] == DeclaredSchema("JSON", json.dumps(POINT))


def test_maps_become_dicts_at_any_depth_with_any_pyarrow():
    kind = pa.struct([("m", pa.map_(pa.string(), pa.list_(pa.map_(pa.string(), pa.int64())))), ("n", pa.int64())])
    values = pa.array([{"m": [("a", [[("x", 1)], None])], "n": 2}, None, {"m": None, "n": 3}], kind)
    expected = [{"m": {"a": [{"x": 1}, None]}, "n": 2}, None, {"m": None, "n": 3}]
    assert [as_dicts(v, kind) for v in values.to_pylist()] == expected

    class OldPyarrow:  # before pyarrow 20: to_pylist takes no maps_as_pydicts
        type = values.type

        def to_pylist(self, **kwargs):
            if kwargs:
                raise TypeError("to_pylist() got an unexpected keyword argument 'maps_as_pydicts'")
            return values.to_pylist()

    assert _python_values(OldPyarrow()) == _python_values(values) == expected
