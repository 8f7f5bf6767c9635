"""Executor-side column building: message ids spliced per entry, Arrow conversion of the columns."""

from __future__ import annotations

from datetime import datetime, timezone

import pulsar
import pytest

from pulsar_throttled_source.reading.arrow_rows import ARROW_SCHEMA, Columns, EntryIds, _batch_index_field, varint


@pytest.mark.parametrize("partition", [-1, 0, 3, 127, 128, 70000])
@pytest.mark.parametrize("ledger,entry", [(0, 0), (20, 5), (123456, 789), (2**40, 2**20)])
@pytest.mark.parametrize("first", [0, 1, 200])
def test_spliced_ids_equal_the_native_serialization(partition, ledger, entry, first):
    ids = EntryIds()
    ids.new_entry(pulsar.MessageId(partition, ledger, entry, first), first)
    assert ids.head is not None  # the fast path is taken for these shapes
    for index in (first, first + 1, 127, 128, 999, 4095, 4096, 70000):
        if index >= first:
            native = pulsar.MessageId(partition, ledger, entry, index).serialize()
            assert ids.serialized(pulsar.MessageId(partition, ledger, entry, index), index) == native


def test_batch_size_field_after_the_index_is_kept():
    # Shape of a real batched message id: ledger 20, entry 0, partition 0, index 0, batch size 1000.
    data = bytes.fromhex("081410001800200030e807")
    assert _batch_index_field(data) == 6

    class FakeId:  # serialize() as the client returns it for index 0
        def serialize(self) -> bytes:
            return data

    ids = EntryIds()
    ids.new_entry(FakeId(), 0)
    assert ids.serialized(None, 5) == bytes.fromhex("081410001800200530e807")
    assert ids.serialized(None, 300) == bytes.fromhex("08141000180020ac0230e807")


def test_unexpected_shapes_fall_back_to_the_native_call():
    assert _batch_index_field(bytes.fromhex("08011002")) is None  # not batched: no index field
    assert _batch_index_field(bytes.fromhex("0a0100")) is None  # a length-delimited field first
    ids = EntryIds()
    non_batched = pulsar.MessageId(-1, 1, 2, -1)
    ids.new_entry(non_batched, -1)
    assert ids.head is None
    assert ids.serialized(non_batched, -1) == non_batched.serialize()


def test_varint_matches_protobuf_encoding():
    assert varint(0) == b"\x00"
    assert varint(127) == b"\x7f"
    assert varint(128) == b"\x80\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(70000) == b"\xf0\xa2\x04"


class FakeMessage:
    def __init__(self, key: str, value: bytes | None, event_ms: int, props: dict[str, str]) -> None:
        self._key, self._value, self._event, self._props = key, value, event_ms, props

    def partition_key(self) -> str:
        return self._key

    def data(self) -> bytes:
        return self._value or b""  # a null value reads as b"", as from the client

    def event_timestamp(self) -> int:
        return self._event

    def properties(self) -> dict[str, str]:
        return self._props

    def has_null_value(self) -> bool:
        return self._value is None

    def ordering_key(self) -> str:
        return "ok" if self._key else ""


@pytest.mark.parametrize("keys", [["", ""], ["a", ""], ["a", "b"]])
def test_columns_become_one_arrow_batch_of_the_source_schema(keys):
    cols = Columns()
    cols.add(FakeMessage(keys[0], b"v0", 0, {}), b"id0", 1_700_000_000_123, "p-0")
    cols.add(FakeMessage(keys[1], b"v1", 1_600_000_000_456, {"k": "v"}), b"id1", 1_700_000_000_124, "p-1")
    cols.add(FakeMessage("", None, 0, {}), b"id2", 1_700_000_000_124, "p-1")  # a tombstone
    cols.add(FakeMessage("", b"", 0, {}), b"id3", 1_700_000_000_124, "p-1")  # an empty payload
    batch = cols.to_batch("persistent://public/default/t-partition-2", 2)
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == [k or None for k in keys] + [None, None]  # the client reports "no key" as ""
    assert [r["value"] for r in rows] == [b"v0", b"v1", None, b""]  # a null value is null, not b""
    assert [r["orderingKey"] for r in rows] == [("ok" if k else None) for k in keys] + [None, None]
    assert [r["producerName"] for r in rows] == ["p-0", "p-1", "p-1", "p-1"]
    rows = rows[:2]
    assert [r["messageId"] for r in rows] == [b"id0", b"id1"]
    assert {r["topic"] for r in rows} == {"persistent://public/default/t-partition-2"}
    assert {r["partition"] for r in rows} == {2}
    assert rows[0]["publishTime"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc)
    assert rows[0]["eventTime"] is None  # 0 means unset
    assert rows[1]["eventTime"] == datetime.fromtimestamp(1_600_000_000.456, timezone.utc)
    assert rows[0]["properties"] == [] and rows[1]["properties"] == [("k", "v")]
