"""Executor side: the rows of one read task as Arrow record batches, in the raw layout
(schemas/columns.RAW_ARROW_SCHEMA).

Built message by message on the read path's hot loop, so every per-message step is kept to
what Arrow cannot do in bulk (see bench/throughput.py for what each costs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ..protobuf_wire import BATCH_INDEX_TAG, batch_index_field, batch_size_field, varint
from ..schemas.columns import METADATA_COLUMNS, RAW_ARROW_SCHEMA

_BATCH_INDEX_TAG = bytes([BATCH_INDEX_TAG])  # built once: new_entry runs for every batched entry


class EntryIds:
    """How to build `MessageId.serialize()` for the messages of one batched entry from the entry's
    first id: the protobuf bytes differ only in the batch index field (tag 0x20), and splicing
    bytes (`head + varint(index) + tail`, done inline by python_read's hot loop) costs less than
    the native call (bench/README.md, "Figures behind the code"). An entry whose bytes do not have the expected shape leaves `head` None:
    the loop then calls serialize() itself, so the output is always serialize()'s."""

    __slots__ = ("head", "tail", "batch_size")

    def __init__(self) -> None:
        self.head: bytes | None = None
        self.tail = b""
        self.batch_size = 0  # the entry's messages, from its id (0: not said, or not batched)

    def new_entry(self, mid: Any, index: int) -> None:
        self.head = None
        self.batch_size = 0
        if index < 0:
            return  # not batched: one message, nothing to share
        whole = mid.serialize()
        self.batch_size = batch_size_field(whole)
        split = batch_index_field(whole)
        if split is None:
            return
        head, tail = whole[:split], whole[split + 1 + len(varint(index)):]
        if head + _BATCH_INDEX_TAG + varint(index) + tail == whole:
            self.head, self.tail = head + _BATCH_INDEX_TAG, tail


_NO_PROPERTIES: tuple[tuple[str, str], ...] = ()  # shared: Arrow only reads it
_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_TIMESTAMP_US = RAW_ARROW_SCHEMA.field("publishTime").type


class Columns:
    """The messages of one Arrow batch, with what the read loop knows of each without asking the
    message (its id's bytes, its entry's publish time and producer). The message's own fields are
    read at to_batch, one column at a time with `map` over the messages: the native calls stay, the
    Python work around each of them goes (bench/profile_read.py)."""

    __slots__ = ("msgs", "ids", "publish_ms", "producers")

    def __init__(self) -> None:
        self.msgs: list[Any] = []
        self.ids: list[bytes] = []
        self.publish_ms: list[int] = []
        self.producers: list[str] = []

    @property
    def rows(self) -> int:
        return len(self.msgs)

    def truncate(self, rows: int) -> None:
        """Drop the rows from `rows` on (messages the range does not own)."""
        for column in (self.msgs, self.ids, self.publish_ms, self.producers):
            del column[rows:]

    def appenders(self) -> tuple[list[Any], Callable[[Any], None], Callable[[bytes], None], Callable[[int], None],
                                 Callable[[str], None]]:
        """The message list and its bound appends, for a read loop that inlines them: message, serialized id,
        and the entry's publish time and producer (read once per entry)."""
        return self.msgs, self.msgs.append, self.ids.append, self.publish_ms.append, self.producers.append

    def keys(self) -> pa.Array:
        return _empty_as_null(self._field("partition_key"))  # the client reports "no key" as ""

    def values(self) -> list[bytes | None]:
        """The payloads as Python bytes (a null value: None), for decoding."""
        data = self._field("data")
        if b"" in data:  # a null value (a tombstone) arrives as b"": only empty payloads need the native check
            has_null_value = type(self.msgs[0]).has_null_value
            data = [d if d or not has_null_value(m) else None for d, m in zip(data, self.msgs, strict=True)]
        return data

    def _field(self, name: str) -> list[Any]:
        if not self.msgs:
            return []
        return list(map(getattr(type(self.msgs[0]), name), self.msgs))

    def value_array(self) -> pa.Array:
        """The payloads as Arrow binary, copied in one at a time (the messages hold them until then:
        a list of them all beside the messages and the array would be a third copy)."""
        import pyarrow.compute as pc

        if not self.msgs:
            return pa.array([], pa.binary())
        values = pa.array(map(type(self.msgs[0]).data, self.msgs), pa.binary(), size=len(self.msgs))
        empty = pc.equal(pc.binary_length(values), 0)
        if not pc.any(empty).as_py():
            return values
        # A null value (a tombstone) arrives as b"": only empty payloads need the native check.
        has_null_value = type(self.msgs[0]).has_null_value
        null = [False] * len(self.msgs)
        for i in pc.indices_nonzero(empty).to_pylist():
            null[i] = bool(has_null_value(self.msgs[i]))
        return pc.if_else(pa.array(null, pa.bool_()), pa.scalar(None, pa.binary()), values)

    def to_batch(self, partition: str, partition_index: int) -> pa.RecordBatch | pa.Table:
        """The rows in the raw layout: a batch, or a table where the payloads passed what one binary array holds
        (Arrow's 32-bit offsets, 2 GiB: pyarrow then chunks them; the native library exports before that)."""
        values = self.value_array()
        metadata = metadata_arrays(self, partition, partition_index)
        if isinstance(values, pa.ChunkedArray):
            by_name = {"value": values, **dict(zip(METADATA_COLUMNS, metadata, strict=True))}
            return pa.Table.from_arrays([by_name[name] for name in RAW_ARROW_SCHEMA.names], schema=RAW_ARROW_SCHEMA)
        return raw_batch(values, metadata)


def metadata_arrays(columns: Columns, partition: str, partition_index: int) -> list[pa.Array]:
    """The metadata columns (schemas/columns.METADATA_COLUMNS, in its order) of the rows of `columns`, by name."""
    import pyarrow.compute as pc

    event = pa.array(columns._field("event_timestamp"), pa.int64())
    event = pc.if_else(pc.equal(event, 0), pa.scalar(None, pa.int64()), event)  # 0 = unset, as the client reports it
    arrays = {
        "key": columns.keys(),
        **partition_columns(partition, partition_index, columns.rows),
        "messageId": pa.array(columns.ids, pa.binary()),
        "publishTime": _ms_to_timestamp(pa.array(columns.publish_ms, pa.int64())),
        "eventTime": _ms_to_timestamp(event),
        "properties": _properties(columns._field("properties")),
        "orderingKey": _empty_as_null(columns._field("ordering_key")),
        "producerName": pa.array(columns.producers, pa.string()),
    }
    return [arrays[name] for name in METADATA_COLUMNS]


def partition_columns(partition: str, partition_index: int, rows: int) -> dict[str, pa.Array]:
    """The columns every row of a read task shares (schemas/columns.PARTITION_COLUMNS): its partition's name and index."""
    return {"topic": pa.repeat(pa.scalar(partition, pa.string()), rows),
            "partition": pa.repeat(pa.scalar(partition_index, pa.int32()), rows)}


def raw_batch(values: pa.Array, metadata: list[pa.Array]) -> pa.RecordBatch:
    """The raw layout (RAW_ARROW_SCHEMA) from the payloads and the metadata columns (in METADATA_COLUMNS' order)."""
    by_name = {"value": values, **dict(zip(METADATA_COLUMNS, metadata, strict=True))}
    return pa.RecordBatch.from_arrays([by_name[name] for name in RAW_ARROW_SCHEMA.names], schema=RAW_ARROW_SCHEMA)


_PROPERTIES = RAW_ARROW_SCHEMA.field("properties").type


def _properties(props: list[dict[str, str]]) -> pa.Array:
    if not any(props):  # most topics: no message has properties
        return pa.MapArray.from_arrays(pa.array([0] * (len(props) + 1), pa.int32()), pa.array([], pa.string()),
                                       pa.array([], pa.string()))
    return pa.array([list(p.items()) if p else _NO_PROPERTIES for p in props], _PROPERTIES)


def _empty_as_null(strings: list[str]) -> pa.Array:
    import pyarrow.compute as pc

    array = pa.array(strings, pa.string())
    return pc.if_else(pc.equal(pc.binary_length(array), 0), pa.scalar(None, pa.string()), array)


def _ms_to_timestamp(millis: pa.Array) -> pa.Array:
    return millis.cast(_TIMESTAMP_MS).cast(_TIMESTAMP_US)
