"""Executor-side column building, through the read loop that runs (reading/read.py): message ids
spliced per entry, and the Arrow batch the loop's inlined appends build."""

from __future__ import annotations

from datetime import datetime, timezone

import pulsar
import pyarrow as pa
import pytest
from fakes import FakeMessage, FakeReader, StandInId

from pulsar_throttled_source.metadata.entry_headers import EntryHeaders
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.protobuf_wire import batch_index_field
from pulsar_throttled_source.read_task import ClientConfig, PartitionRange
from pulsar_throttled_source.reading.python_read import read_python_messages as _read_messages
from pulsar_throttled_source.schemas.columns import RAW_ARROW_SCHEMA, RAW_SPARK_SCHEMA_DDL

P = "persistent://public/default/t-partition-2"


def read(messages: list[FakeMessage], start: tuple[int, int], end: tuple[int, int]) -> list[pa.RecordBatch]:
    """The batches the read loop builds from `messages` for the range (start, end] (no entry list:
    the loop stops at the first message past `end`)."""
    cfg = ClientConfig("pulsar://x:6650", (), (), None, 3_000, 10_000)
    part = PartitionRange(P, 2, EntryPosition(*start), EntryPosition(*end), -1, cfg, None)
    return list(_read_messages(FakeReader(messages), part, lambda position: EntryHeaders()))


def message_ids(batches: list[pa.RecordBatch]) -> list[bytes]:
    return [i for b in batches for i in b.column("messageId").to_pylist()]


@pytest.mark.parametrize("partition", [-1, 0, 3, 127, 128, 70000])
@pytest.mark.parametrize("ledger,entry", [(0, 0), (20, 5), (123456, 789), (2**40, 2**20)])
@pytest.mark.parametrize("first", [0, 1, 120, 4090, 69995])
def test_spliced_ids_equal_the_native_serialization(partition, ledger, entry, first):
    # Consecutive indexes across the varint boundaries (127/128) and the cached-varint limit (4096).
    indexes = range(first, first + 12)
    msgs = [FakeMessage(pulsar.MessageId(partition, ledger, entry, i)) for i in indexes]
    msgs.append(FakeMessage(pulsar.MessageId(partition, ledger, entry + 1, 0)))  # the next batch's: not read
    got = message_ids(read(msgs, (ledger, entry - 1), (ledger, entry)))
    assert got == [pulsar.MessageId(partition, ledger, entry, i).serialize() for i in indexes]


def test_batch_size_field_after_the_index_is_kept():
    # Shape of a real batched message id: ledger 20, entry 0, partition 0, index 0, batch size 301
    # (the entry's message count: the read loop ends the range's last entry after its 301st message).
    data = bytes.fromhex("081410001800200030ad02")
    assert batch_index_field(data) == 6
    # Only the entry's first id is serialized by the client; the others must be spliced from it.
    msgs = [FakeMessage(StandInId(20, 0, i, data if i == 0 else None)) for i in range(301)]
    got = message_ids(read(msgs, (20, -1), (20, 0)))
    assert len(got) == 301 and got[0] == data
    assert got[5] == bytes.fromhex("081410001800200530ad02")
    assert got[300] == bytes.fromhex("08141000180020ac0230ad02")


def test_unexpected_shapes_fall_back_to_the_native_call():
    assert batch_index_field(bytes.fromhex("08011002")) is None  # not batched: no index field
    assert batch_index_field(bytes.fromhex("0a0100")) is None  # a length-delimited field first
    # Entry 1:2 is not batched; entry 1:3 is batched but its bytes have a length-delimited field first:
    # every id of it is the client's own serialize().
    odd = [bytes.fromhex("0a0100") + bytes([i]) for i in range(3)]
    msgs = [FakeMessage(pulsar.MessageId(-1, 1, 2, -1))] + [FakeMessage(StandInId(1, 3, i, odd[i])) for i in range(3)]
    got = message_ids(read(msgs, (1, 1), (1, 3)))
    assert got == [pulsar.MessageId(-1, 1, 2, -1).serialize(), *odd]


@pytest.mark.parametrize("keys", [["", ""], ["a", ""], ["a", "b"]])
def test_columns_become_one_arrow_batch_of_the_source_schema(keys):
    # Entry 5:0 alone; entry 5:1 a batch of three (publish time and producer are the entry's), then a
    # tombstone and an empty payload; 5:2 belongs to the next batch.
    msgs = [
        FakeMessage(pulsar.MessageId(2, 5, 0, -1), keys[0], b"v0", 0, {}, 1_700_000_000_123, "p-0",
                    ordering_key="ok" if keys[0] else ""),
        FakeMessage(pulsar.MessageId(2, 5, 1, 0), keys[1], b"v1", 1_600_000_000_456, {"k": "v"}, 1_700_000_000_124, "p-1",
                    ordering_key="ok" if keys[1] else ""),
        FakeMessage(pulsar.MessageId(2, 5, 1, 1), "", None, 0, {}, 1_700_000_000_124, "p-1"),  # a tombstone
        FakeMessage(pulsar.MessageId(2, 5, 1, 2), "", b"", 0, {}, 1_700_000_000_124, "p-1"),  # an empty payload
        FakeMessage(pulsar.MessageId(2, 5, 2, -1)),
    ]
    (batch,) = read(msgs, (5, -1), (5, 1))
    assert batch.schema == RAW_ARROW_SCHEMA
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == [k or None for k in keys] + [None, None]  # the client reports "no key" as ""
    assert [r["value"] for r in rows] == [b"v0", b"v1", None, b""]  # a null value is null, not b""
    assert [r["orderingKey"] for r in rows] == [("ok" if k else None) for k in keys] + [None, None]
    assert [r["producerName"] for r in rows] == ["p-0", "p-1", "p-1", "p-1"]
    assert [r["messageId"] for r in rows] == [m.message_id().serialize() for m in msgs[:4]]
    assert {r["topic"] for r in rows} == {P}
    assert {r["partition"] for r in rows} == {2}
    assert rows[0]["publishTime"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc)
    assert rows[1]["publishTime"] == datetime(2023, 11, 14, 22, 13, 20, 124000, tzinfo=timezone.utc)
    assert rows[0]["eventTime"] is None  # 0 means unset
    assert rows[1]["eventTime"] == datetime.fromtimestamp(1_600_000_000.456, timezone.utc)
    assert rows[0]["properties"] == [] and rows[1]["properties"] == [("k", "v")]


def test_the_raw_layout_is_the_one_spark_is_told():
    # DataSource.schema() hands Spark this DDL; the read tasks' batches must have exactly its columns.
    assert RAW_SPARK_SCHEMA_DDL == ("key string, value binary, topic string, partition int, messageId binary, "
                                    "publishTime timestamp, eventTime timestamp, properties map<string,string>, "
                                    "orderingKey string, producerName string")


def test_the_last_entry_ends_at_its_id_batch_size_without_asking_the_broker():
    """The id of a batched message says how many its entry holds: the range's last entry ends at its
    last message, with no has_message_available() (which has the broker read the topic's last entry)."""
    data = bytes.fromhex("080110051800200030" + "03")  # ledger 1, entry 5, partition 0, index 0, batch size 3
    after = FakeMessage(pulsar.MessageId(-1, 1, 6, -1))
    reader = FakeReader([FakeMessage(StandInId(1, 5, i, data if i == 0 else None)) for i in range(3)] + [after])
    reader.has_message_available = lambda: pytest.fail("asked the broker")  # type: ignore[method-assign]
    part = PartitionRange(P, 2, EntryPosition(1, 4), EntryPosition(1, 5), -1, ClientConfig("pulsar://x:6650", (), (), None, 3_000, 10_000), None)
    got = list(_read_messages(reader, part, lambda position: EntryHeaders()))
    assert sum(b.num_rows for b in got) == 3 and reader.queue == [after]
