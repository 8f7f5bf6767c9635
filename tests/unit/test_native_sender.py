"""The native sender's Python side and its routing in C, without a broker: option sendPath, which sender a write
takes and why, an Arrow batch's columns as buffers (sliced, large, null), and the library's routing of every row
against routing.Router's (the C routing runs in the installed library; no producer is needed to route)."""

from __future__ import annotations

import ctypes
import logging
import random

import pyarrow as pa
import pytest
from native_path import needs_native_path
from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType, TimestampType

from pulsar_throttled_source.reading.native_library import NativeLibrary
from pulsar_throttled_source.topics import TopicName
from pulsar_throttled_source.writing import native_write
from pulsar_throttled_source.writing.message_columns import write_columns
from pulsar_throttled_source.writing.native_sender import (
    ROUTE_BAD_PARTITION,
    ROUTE_NEEDS_PYTHON,
    ROUTE_OK,
    NativeSender,
    Unencodable,
    batch_columns,
    native_sender,
)
from pulsar_throttled_source.writing.routing import Router
from pulsar_throttled_source.writing.write_options import parse_write_options

BASE = {"service.url": "pulsar://127.0.0.1:6650", "admin.url": "http://127.0.0.1:8080", "topic": "orders"}
COLUMNS = write_columns(StructType([StructField("value", BinaryType()), StructField("key", StringType())]), True)
PROPERTIES = write_columns(StructType([StructField("value", BinaryType()),
                                       StructField("properties", MapType(StringType(), StringType()))]), True)


def test_send_path_is_auto_native_or_python_and_a_bad_one_names_the_option():
    assert parse_write_options(BASE).send_path == "auto"
    assert parse_write_options(BASE | {"sendPath": "Native"}).send_path == "native"
    with pytest.raises(ValueError, match="Option 'sendPath': 'c' is not allowed; expected auto, native, python"):
        parse_write_options(BASE | {"sendPath": "c"})


def _sender(reason: str = "", settings: frozenset[str] = frozenset({"batching_enabled", "block_if_queue_full"})) -> NativeSender:
    loaded = NativeLibrary(None if reason else object(), reason,  # type: ignore[arg-type]
                           client_settings=frozenset({"tls_validate_hostname", "operation_timeout_seconds"}))
    return NativeSender(loaded, reason, settings, True)


@pytest.mark.parametrize("extra,columns,expected", [
    ({}, COLUMNS, ""),
    ({"pulsar.producer.batchingType": "KeyBased"}, COLUMNS, "cannot apply pulsar.producer.batching_type"),
    ({"pulsar.client.connectionTimeoutMs": "5000"}, COLUMNS, "cannot apply pulsar.client.connection_timeout_ms"),
    ({"publishThrottlingRateInMsg": "10"}, COLUMNS, ""),  # admitted per row in Python, sent by the library
])
def test_what_keeps_a_write_on_the_python_sender_is_said(extra, columns, expected):
    problem = native_write.send_path_problem(_sender(), parse_write_options(BASE | extra), columns)
    assert (expected in problem) if expected else problem == ""


def test_send_path_native_fails_naming_the_option_and_auto_warns_once(monkeypatch, caplog):
    monkeypatch.setattr(native_write, "native_sender", lambda: _sender("the package pulsar-throttled-source-native is not installed"))
    monkeypatch.setattr(native_write, "_WARNED", set())
    with pytest.raises(native_write.NativeSendPathUnavailable, match="Option 'sendPath' is 'native' but the native sender cannot "
                                                                       "send this write: the package pulsar-throttled-source-native"):
        native_write.uses_native_sender(parse_write_options(BASE | {"sendPath": "native"}), COLUMNS)
    caplog.set_level(logging.WARNING, logger=native_write.__name__)
    for _ in range(3):
        assert not native_write.uses_native_sender(parse_write_options(BASE), COLUMNS)
    assert [r.getMessage() for r in caplog.records] == [
        "Writing with the Python sender (sendPath=auto): the package pulsar-throttled-source-native is not installed."]
    assert not native_write.uses_native_sender(parse_write_options(BASE | {"sendPath": "python"}), COLUMNS)


def test_auto_sends_natively_wherever_the_library_can_send_the_write(monkeypatch, caplog):
    # The native sender paces its sends to the broker's confirmations as the Python sender does (send_tasks.c's
    # pns_task_pace): a send timeout keeps no write on the Python sender, quietly or not.
    settings = frozenset({"batching_enabled", "block_if_queue_full", "send_timeout_millis"})
    monkeypatch.setattr(native_write, "native_sender", lambda: _sender(settings=settings))
    caplog.set_level(logging.WARNING, logger=native_write.__name__)
    for extra in ({}, {"pulsar.producer.sendTimeoutMillis": "5000"}, {"pulsar.producer.sendTimeoutMillis": "0"},
                  {"sendPath": "native"}):
        assert native_write.uses_native_sender(parse_write_options(BASE | extra), COLUMNS), extra
    assert not native_write.uses_native_sender(parse_write_options(BASE | {"sendPath": "python"}), COLUMNS)
    assert caplog.records == []


def test_a_batchs_columns_point_into_its_arrow_buffers_sliced_or_large():
    values = pa.array([b"a", None, b"ccc", b""], pa.large_binary()).slice(1)
    keys = pa.array(["k0", "k1", None, "k3"]).slice(1)
    view, keep = batch_columns(pa.RecordBatch.from_arrays([values, keys], ["value", "key"]), COLUMNS)
    assert view.rows == 3 and view.value.wide == 1 and view.key.wide == 0
    assert view.value.offset == 1 and view.key.offset == 1 and view.value.valid and view.key.valid
    assert view.partition.values is None and view.event_ms.values is None  # absent columns
    assert values in keep and keys in keep


def test_event_times_become_epoch_ms_and_one_before_1970_goes_to_python():
    columns = write_columns(StructType([StructField("value", BinaryType()), StructField("eventTime", TimestampType())]), True)
    times = pa.array([1_700_000_000_123_999, None], pa.timestamp("us", tz="UTC"))
    view, keep = batch_columns(pa.RecordBatch.from_arrays([pa.array([b"a", b"b"]), times], ["value", "eventTime"]), columns)
    ms = ctypes.cast(view.event_ms.values, ctypes.POINTER(ctypes.c_int64))
    assert ms[0] == 1_700_000_000_123  # floored, as the Python sender's
    before = pa.array([-1], pa.timestamp("us", tz="UTC"))
    with pytest.raises(Unencodable, match="before 1970"):
        batch_columns(pa.RecordBatch.from_arrays([pa.array([b"a"]), before], ["value", "eventTime"]), columns)


# -- the library's routing, row by row against the Python router -------------------------------------------------
@pytest.fixture(scope="module")
def lib():
    sender = native_sender()
    if not sender.available:
        pytest.fail(f"the native sender did not load: {sender.reason}")
    return sender.lib


def _route(lib, batch, columns, partitions, first=0, single=False, topic_partition=-1):
    task = lib.pns_task_create(partitions, topic_partition, first, int(single))
    try:
        view, keep = batch_columns(batch, columns)
        dest = (ctypes.c_int32 * max(batch.num_rows, 1))()
        used = (ctypes.c_uint8 * max(partitions, 1))()
        row, why = ctypes.c_int64(), ctypes.c_char_p()
        status = lib.pns_route(task, ctypes.byref(view), dest, ctypes.sizeof(dest), used, len(used), ctypes.byref(row),
                               ctypes.byref(why))
        return status, list(dest)[:batch.num_rows], row.value, (why.value or b"").decode(), lib.pns_task_next_partition(task)
    finally:
        lib.pns_task_free(task)


WORDS = ["", "a", "orders", "日本語", "ключ", "emoji 😀 key", "𝄞𝄞", "x" * 300, "café", "\u00e9t\u00e9"]


@needs_native_path
@pytest.mark.parametrize("partitions,single", [(4, False), (7, False), (3, True), (1, False)])
def test_the_library_routes_every_row_as_the_python_router(lib, partitions, single):
    rng = random.Random(partitions)
    n = 500
    keys = [None if rng.random() < 0.3 else rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n)]
    given = [None if rng.random() < 0.5 else rng.choice([-1, *range(partitions)]) for _ in range(n)]
    columns = write_columns(StructType([StructField("value", BinaryType()), StructField("key", StringType()),
                                        StructField("partition", IntegerType())]), True)
    batch = pa.RecordBatch.from_arrays([pa.array([b"v"] * n), pa.array(keys), pa.array(given, pa.int32())],
                                       ["value", "key", "partition"])
    status, dest, _, _, next_partition = _route(lib, batch, columns, partitions, first=5, single=single)
    router = Router(TopicName.parse("orders", "topic"), partitions, 5, single)
    expected = [router.destination(k, p, "partition") for k, p in zip(keys, given, strict=True)]
    assert status == ROUTE_OK
    assert [router._names[d] for d in dest] == expected
    assert next_partition == router._next  # the round robin carries on where the Python sender would


@needs_native_path
def test_the_library_finds_a_partition_the_topic_lacks_and_rows_it_leaves_to_python(lib):
    columns = write_columns(StructType([StructField("value", BinaryType()), StructField("key", StringType()),
                                        StructField("partition", IntegerType())]), True)

    def batch(keys, parts, values=None):
        return pa.RecordBatch.from_arrays([pa.array(values or [b"v"] * len(keys), pa.binary()), pa.array(keys, pa.string()),
                                           pa.array(parts, pa.int32())], ["value", "key", "partition"])

    assert _route(lib, batch(["a", "b"], [1, 4]), columns, 4)[:3:2] == (ROUTE_BAD_PARTITION, 1)
    assert _route(lib, batch(["a"], [2]), columns, 0, topic_partition=-1)[0] == ROUTE_BAD_PARTITION  # not partitioned
    assert _route(lib, batch(["a"], [2]), columns, 0, topic_partition=2)[0] == ROUTE_OK  # a partition named itself
    status, _, row, why, _ = _route(lib, batch(["a", "b\0c"], [None, None]), columns, 4)
    assert (status, row, why) == (ROUTE_NEEDS_PYTHON, 1, "a key with a NUL character")
    ordering = write_columns(StructType([StructField("value", BinaryType()), StructField("orderingKey", StringType())]), True)
    nul = pa.RecordBatch.from_arrays([pa.array([b"v"]), pa.array(["o\0"])], ["value", "orderingKey"])
    assert _route(lib, nul, ordering, 2)[0] == ROUTE_NEEDS_PYTHON


@needs_native_path
def test_the_library_refuses_buffers_smaller_than_their_rows(lib):
    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"]), pa.array(["k", "l"])], ["value", "key"])
    task = lib.pns_task_create(4, -1, 0, 0)
    try:
        view, keep = batch_columns(batch, COLUMNS)
        view.key.offsets_size = 4  # one offset: row 0's end is past the buffer
        dest, used = (ctypes.c_int32 * 2)(), (ctypes.c_uint8 * 4)()
        row, why = ctypes.c_int64(), ctypes.c_char_p()
        args = (ctypes.byref(row), ctypes.byref(why))
        assert lib.pns_route(task, ctypes.byref(view), dest, ctypes.sizeof(dest), used, len(used), *args) == 3
        view, keep = batch_columns(batch, COLUMNS)
        assert lib.pns_route(task, ctypes.byref(view), dest, 4, used, len(used), *args) == 3  # dest too small for 2 rows
        assert lib.pns_route(task, ctypes.byref(view), dest, ctypes.sizeof(dest), used, len(used), *args) == ROUTE_OK
        skipped = ctypes.c_int64()
        send = lib.pns_send
        assert send(task, ctypes.byref(view), dest, ctypes.sizeof(dest), 0, 2, -1, ctypes.byref(skipped)) == -1  # no producers
        assert send(task, ctypes.byref(view), dest, ctypes.sizeof(dest), 1, 3, -1, ctypes.byref(skipped)) == -1  # past the rows
        assert send(task, ctypes.byref(view), dest, ctypes.sizeof(dest), 1, 1, -1, ctypes.byref(skipped)) == 0  # no row
    finally:
        lib.pns_task_free(task)


@needs_native_path
def test_properties_the_python_sender_would_refuse_or_merge_are_left_to_it(lib):
    def route(maps):
        kind = pa.map_(pa.string(), pa.string())
        batch = pa.RecordBatch.from_arrays([pa.array([b"v"] * len(maps)), pa.array(maps, kind).slice(0)], ["value", "properties"])
        return _route(lib, batch, PROPERTIES, 2)

    assert route([[("a", "1")], None, [], [("a", "1"), ("b", "2")]])[0] == ROUTE_OK
    assert route([[("a", "1")], [("a", None)]])[2:4] == (1, "a null property")  # the Python sender's error names the column
    assert route([[("a", "1"), ("a", "2")]])[3] == "a property key given twice in one row"  # a dict keeps the last
    assert route([[("a\0", "1")]])[3] == "a property with a NUL character"
    sliced = pa.array([[("x", "0")], [("a", None)], [("b", "2")]], pa.map_(pa.string(), pa.string())).slice(2)
    batch = pa.RecordBatch.from_arrays([pa.array([b"v"]), sliced], ["value", "properties"])
    assert _route(lib, batch, PROPERTIES, 2)[0] == ROUTE_OK  # the slice starts past the null one
