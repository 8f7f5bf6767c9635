"""Executor side: the rows of one read task as Arrow record batches, in the source's schema.

Built message by message on the read path's hot loop, so every per-message step is kept to
what Arrow cannot do in bulk (see bench/throughput.py for what each costs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.string()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("messageId", pa.binary()),
    pa.field("publishTime", pa.timestamp("us", tz="UTC")),
    pa.field("eventTime", pa.timestamp("us", tz="UTC")),
    pa.field("properties", pa.map_(pa.string(), pa.string())),
    pa.field("orderingKey", pa.string()),
    pa.field("producerName", pa.string()),
])
SPARK_SCHEMA_DDL = ("key string, value binary, topic string, partition int, messageId binary, "
                    "publishTime timestamp, eventTime timestamp, properties map<string,string>, "
                    "orderingKey string, producerName string")


class EntryIds:
    """`MessageId.serialize()` for the messages of one batched entry, built from the entry's
    first id: the protobuf bytes differ only in the batch index field (tag 0x20), and
    splicing bytes costs a third of the native call. Any entry whose bytes do not have the
    expected shape falls back to the native call, so the output is always serialize()'s."""

    __slots__ = ("head", "tail")

    def __init__(self) -> None:
        self.head: bytes | None = None
        self.tail = b""

    def new_entry(self, mid: Any, index: int) -> None:
        self.head = None
        if index < 0:
            return  # not batched: one message, nothing to share
        whole = mid.serialize()
        split = _batch_index_field(whole)
        if split is None:
            return
        head, tail = whole[:split], whole[split + 1 + len(_varint(index)):]
        if head + b"\x20" + _varint(index) + tail == whole:
            self.head, self.tail = head + b"\x20", tail

    def serialized(self, mid: Any, index: int) -> bytes:
        if self.head is None:
            return mid.serialize()
        return self.head + _varint(index) + self.tail


def _batch_index_field(data: bytes) -> int | None:
    """Offset of the batch_index tag (field 4, varint) in a serialized MessageIdData whose
    earlier fields (ledgerId, entryId, partition) are all varints; None otherwise."""
    i = 0
    while i < len(data):
        tag = data[i]
        if tag == 0x20:
            return i
        if tag not in (0x08, 0x10, 0x18):
            return None
        i += 1
        while i < len(data) and data[i] & 0x80:
            i += 1
        i += 1
    return None


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS = [_encode_varint(i) for i in range(4096)]  # batch indexes: producers batch up to 1000 by default


def _varint(value: int) -> bytes:
    return _VARINTS[value] if value < 4096 else _encode_varint(value)


_NO_PROPERTIES: tuple[tuple[str, str], ...] = ()  # shared: Arrow only reads it
_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_TIMESTAMP_US = ARROW_SCHEMA.field("publishTime").type


class Columns:
    """Column lists for one Arrow batch, filled message by message."""

    __slots__ = ("keys", "values", "ids", "publish_ms", "event_ms", "props", "ordering", "producers", "rows")

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.values: list[bytes | None] = []
        self.ordering: list[str | None] = []
        self.producers: list[str] = []
        self.ids: list[bytes] = []
        self.publish_ms: list[int] = []
        self.event_ms: list[int] = []  # 0 = unset, as the client reports it
        self.props: list[Sequence[tuple[str, str]]] = []
        self.rows = 0

    def add(self, msg: Any, serialized_id: bytes, publish_ms: int, producer: str) -> None:
        """`publish_ms` and `producer` are the entry's (a batch shares them), read once per entry."""
        self.keys.append(msg.partition_key() or None)
        data = msg.data()
        # A null value (a tombstone) arrives as b"": only an empty payload needs the native check.
        self.values.append(data if data or not msg.has_null_value() else None)
        self.ordering.append(msg.ordering_key() or None)
        self.producers.append(producer)
        self.ids.append(serialized_id)
        self.publish_ms.append(publish_ms)
        self.event_ms.append(msg.event_timestamp())
        p = msg.properties()
        self.props.append(list(p.items()) if p else _NO_PROPERTIES)
        self.rows += 1

    def to_batch(self, partition: str, partition_index: int) -> pa.RecordBatch:
        key, topic, index, ids, publish, event, props, ordering, producer = metadata_arrays(self, partition, partition_index)
        return pa.RecordBatch.from_arrays([key, pa.array(self.values, pa.binary()), topic, index, ids, publish, event, props,
                                           ordering, producer], schema=ARROW_SCHEMA)


def metadata_arrays(columns: Columns, partition: str, partition_index: int) -> list[pa.Array]:
    """key, topic, partition, messageId, publishTime, eventTime, properties, orderingKey and
    producerName of the rows of `columns` (a Columns)."""
    import pyarrow.compute as pc

    n = columns.rows
    event = pa.array(columns.event_ms, pa.int64())
    event = pc.if_else(pc.equal(event, 0), pa.scalar(None, pa.int64()), event)
    return [
        # Via large_string: pyarrow converts an all-None list to string ~100x slower.
        pa.array(columns.keys, pa.large_string()).cast(pa.string()),
        pa.repeat(pa.scalar(partition, pa.string()), n),
        pa.repeat(pa.scalar(partition_index, pa.int32()), n),
        pa.array(columns.ids, pa.binary()),
        _ms_to_timestamp(pa.array(columns.publish_ms, pa.int64())),
        _ms_to_timestamp(event),
        pa.array(columns.props, ARROW_SCHEMA.field("properties").type),
        pa.array(columns.ordering, pa.large_string()).cast(pa.string()),
        pa.array(columns.producers, pa.string()),
    ]


def _ms_to_timestamp(millis: pa.Array) -> pa.Array:
    return millis.cast(_TIMESTAMP_MS).cast(_TIMESTAMP_US)
