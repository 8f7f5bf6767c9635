"""Arrow record batches (what PySpark hands an Arrow writer: DataSourceArrowWriter, DataSourceStreamArrowWriter)
made into messages column by column, for the same sending core as rows (write_task).

A row writer gets Spark Rows that PySpark built value by value from the same Arrow batches; reading the columns
whole skips that (about half a write task's time at 100-byte values). The message of a row is the same either way:
a string value is its UTF-8 bytes, an event time its epoch milliseconds (from the timestamp's UTC microseconds;
the row path gets a local datetime and converts it back), a property map its pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .message_columns import Message, WriteColumns


def batch_messages(batches: Iterable[Any], columns: WriteColumns) -> Iterator[Message]:
    """The messages of every row of every batch (pyarrow.RecordBatch), in order."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        properties = _column(batch, columns.properties)
        if columns.properties >= 0:
            properties = [columns.properties_of(p) for p in properties]
        yield from map(Message, _column(batch, columns.topic), _column(batch, columns.partition),
                       _column(batch, columns.value, _as_binary), _column(batch, columns.key), properties,
                       _column(batch, columns.event_time, _epoch_ms), _column(batch, columns.ordering_key))


def _column(batch: Any, index: int, convert: Any = None) -> list[Any]:
    """Column `index` of `batch` as Python values (nulls: None); -1 (no such column): all None."""
    if index < 0:
        return [None] * batch.num_rows
    values = batch.column(index)
    return (convert(values) if convert else values).to_pylist()


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
