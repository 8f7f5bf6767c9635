"""Arrow record batches (what PySpark hands an Arrow writer: DataSourceArrowWriter, DataSourceStreamArrowWriter)
made into messages column by column, for the same sending core as rows (write_task).

A row writer gets Spark Rows that PySpark built value by value from the same Arrow batches; reading the columns
whole skips that (about half a write task's time at 100-byte values). The message of a row is the same either way:
a string value is its UTF-8 bytes, an event time its epoch milliseconds (from the timestamp's UTC microseconds;
the row path gets a local datetime and converts it back), a property map its pairs.

A topic with a schema gets its payloads made by its payload_encoding maker, mapped over the payload's columns (per
topic where a topic column names several): the columns' Python values are the row path's but for a timestamp, aware
in the session's time zone (the row path's is naive local time), a struct, a dict (a Row), and a map, a dict here
too (pyarrow gives pairs); the encoder takes either.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .message_columns import Message, WriteColumns

if TYPE_CHECKING:
    from .payload_encoding import TopicPayloads


def batch_messages(batches: Iterable[Any], columns: WriteColumns, payloads: TopicPayloads | None = None) -> Iterator[Message]:
    """The messages of every row of every batch (pyarrow.RecordBatch), in order; `payloads` (None: every payload is the
    `value` column as it is) make the payloads of topics with a schema."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        topics = _column(batch, columns.topic)
        if payloads is None or payloads.raw:
            values = _column(batch, columns.value, _as_binary)
        else:
            values = _payloads(batch, topics, payloads)
        properties = _column(batch, columns.properties)
        if columns.properties >= 0:
            properties = [columns.properties_of(p) for p in properties]
        yield from map(Message, topics, _column(batch, columns.partition), values, _column(batch, columns.key), properties,
                       _column(batch, columns.event_time, _epoch_ms), _column(batch, columns.ordering_key))


def _payloads(batch: Any, topics: list[str | None], payloads: TopicPayloads) -> list[bytes | None]:
    """Each row's payload made with its topic's schema, a column at a time for each topic in the batch (a topic's
    schema is checked before its first row is sent); a row naming no topic gets none (the sending core refuses it)."""
    made: list[bytes | None] = [None] * batch.num_rows
    values: dict[int, list[Any]] = {}  # column position -> its Python values
    by_topic = {topic: payloads.named(topic) for topic in dict.fromkeys(topics)}
    for topic, payload in by_topic.items():
        if payload is None:
            continue
        at = payload.encoding.positions
        for p in at:
            if p not in values:
                values[p] = _python_values(batch.column(p))
        if len(by_topic) == 1:
            return list(map(payload.make, *(values[p] for p in at)))
        rows = [i for i, t in enumerate(topics) if t == topic]
        for i, payload_bytes in zip(rows, map(payload.make, *([values[p][i] for i in rows] for p in at)), strict=True):
            made[i] = payload_bytes
    return made


def _column(batch: Any, index: int, convert: Any = None) -> list[Any]:
    """Column `index` of `batch` as Python values (nulls: None); -1 (no such column): all None."""
    if index < 0:
        return [None] * batch.num_rows
    values = batch.column(index)
    return (convert(values) if convert else values).to_pylist()


def _python_values(values: Any) -> list[Any]:
    """A payload column's values for the encoder: a map (at any depth) as a dict, as a Row's."""
    if not _has_map(values.type):
        return values.to_pylist()
    try:
        return values.to_pylist(maps_as_pydicts="lossy")
    except TypeError:  # pyarrow before 20: maps come as lists of pairs
        return [as_dicts(v, values.type) for v in values.to_pylist()]


def _has_map(arrow_type: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_map(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(_has_map(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _has_map(arrow_type.value_type)
    return False


def as_dicts(value: Any, arrow_type: Any) -> Any:
    """`value` (pyarrow's Python value of `arrow_type`) with every map in it a dict rather than a list of pairs."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {k: as_dicts(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_struct(arrow_type):
        return {f.name: as_dicts(value[f.name], f.type) for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [as_dicts(v, arrow_type.value_type) for v in value]
    return value


def _as_binary(values: Any) -> Any:
    """A string column as its UTF-8 bytes (Arrow's string and binary share their layout: a cast, no copy)."""
    import pyarrow as pa

    return values if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type) else values.cast(pa.binary())


def _epoch_ms(values: Any) -> Any:
    """A timestamp column as epoch milliseconds (floored, as the row path's), a list; a bigint column as it is."""
    import pyarrow as pa

    if not pa.types.is_timestamp(values.type):
        return values
    per_ms = {"s": 0, "ms": 1, "us": 1_000, "ns": 1_000_000}[values.type.unit]
    ticks = values.cast(pa.int64())
    if per_ms == 1:
        return ticks
    return pa.array([None if t is None else (t * 1000 if per_ms == 0 else t // per_ms) for t in ticks.to_pylist()], pa.int64())
