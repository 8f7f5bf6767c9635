"""Executor side: the native sender's library calls (native/src/send_internal.h, in the native read path's library),
loaded and checked once per process, and one Arrow batch's columns handed to it as buffers.

The library is the reader's (reading.native_library): the sender's symbols of libpulsar are resolved on top of it
(pns_init), so a libpulsar without them leaves reads native and writes on the Python sender. Whatever fails is
one reason string, as for reads: sendPath=auto sends with Python and says why once, sendPath=native fails with it.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..reading.native_library import NativeLibrary, native_library
from .message_columns import WriteColumns

# pns_route's answers
ROUTE_OK, ROUTE_BAD_PARTITION, ROUTE_NEEDS_PYTHON, ROUTE_BAD_BUFFER = 0, 1, 2, 3


class Strings(ctypes.Structure):
    """pns_strings_t: a string or binary column's buffers (offsets None: no such column)."""

    _fields_ = [("valid", ctypes.c_void_p), ("offsets", ctypes.c_void_p), ("data", ctypes.c_void_p),
                ("valid_size", ctypes.c_int64), ("offsets_size", ctypes.c_int64), ("data_size", ctypes.c_int64),
                ("offset", ctypes.c_int64), ("wide", ctypes.c_int32), ("padding", ctypes.c_int32)]


class Ints(ctypes.Structure):
    """pns_ints_t: an int32 (partition) or int64 (event time) column's buffers (values None: no such column)."""

    _fields_ = [("values", ctypes.c_void_p), ("valid", ctypes.c_void_p), ("values_size", ctypes.c_int64),
                ("valid_size", ctypes.c_int64), ("offset", ctypes.c_int64)]


class Pairs(ctypes.Structure):
    """pns_map_t: a map<string,string> column's offsets and validity, and its entries' keys and values."""

    _fields_ = [("offsets", ctypes.c_void_p), ("valid", ctypes.c_void_p), ("offsets_size", ctypes.c_int64),
                ("valid_size", ctypes.c_int64), ("offset", ctypes.c_int64), ("keys", Strings), ("values", Strings)]


class BatchColumns(ctypes.Structure):
    """pns_batch_t: one batch's rows and the columns the sender reads."""

    _fields_ = [("rows", ctypes.c_int64), ("value", Strings), ("key", Strings), ("ordering_key", Strings),
                ("partition", Ints), ("event_ms", Ints), ("properties", Pairs)]


class TaskState(ctypes.Structure):
    """pns_state_t: a task's sends and answers so far, and its first failure."""

    _fields_ = [("sent", ctypes.c_int64), ("answered", ctypes.c_int64), ("error", ctypes.c_int32),
                ("error_lane", ctypes.c_int32)]


# pns_layout(i): the library's sizes and offsets of the structures above, checked at load.
_LAYOUT = (ctypes.sizeof(BatchColumns), ctypes.sizeof(Strings), ctypes.sizeof(Ints), BatchColumns.key.offset,
           BatchColumns.partition.offset, BatchColumns.event_ms.offset, ctypes.sizeof(TaskState),
           BatchColumns.properties.offset, ctypes.sizeof(Pairs))


class NativeSender:
    """The loaded library with the sender's calls declared, or why there is none (`reason`)."""

    def __init__(self, loaded: NativeLibrary, reason: str, producer_settings: frozenset[str] = frozenset(),
                 null_values: bool = False) -> None:
        self.loaded = loaded
        self.lib = loaded.lib if not reason else None
        self.reason = reason
        self.producer_settings = producer_settings  # the create_producer keyword names the library applies
        self.null_values = null_values  # whether a message without payload can be sent

    @property
    def available(self) -> bool:
        return self.lib is not None


def _declare(lib: ctypes.CDLL) -> None:
    p, i32, i64, c_int, c_char_p, c_size_t = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
    str_array = ctypes.POINTER(ctypes.c_char_p)
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "pns_init": (c_int, [c_char_p, c_size_t]),
        "pns_null_values_supported": (c_int, []),
        "pns_setting_name": (c_char_p, [c_int]),
        "pns_layout": (i64, [c_int]),
        "pns_producer_create": (p, [p, c_char_p, str_array, str_array, c_int, ctypes.POINTER(c_int), c_char_p, c_size_t]),
        "pns_producer_last_sequence_id": (i64, [p]),
        "pns_producer_flush": (c_int, [p]),
        "pns_producer_close": (None, [p]),
        "pns_task_create": (p, [i32, i32, i64, i32]),
        "pns_task_free": (None, [p]),
        "pns_task_set_producer": (c_int, [p, i32, p, i64]),
        "pns_task_next_partition": (i64, [p]),
        "pns_task_pace": (c_int, [p, i64, i64]),
        "pns_task_cuts": (c_int, [p, i64, i64]),
        "pns_route": (c_int, [p, ctypes.POINTER(BatchColumns), p, i64, p, i64, ctypes.POINTER(i64), ctypes.POINTER(c_char_p)]),
        "pns_send": (i64, [p, ctypes.POINTER(BatchColumns), p, i64, i64, i64, i64, ctypes.POINTER(i64)]),
        "pns_wait": (None, [p, i64, ctypes.POINTER(TaskState)]),
        "pns_confirmed": (i64, [p, i32]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)  # AttributeError: a library without the sender (an older build)
        fn.restype, fn.argtypes = restype, argtypes


def _load(loaded: NativeLibrary) -> NativeSender:
    if loaded.lib is None:
        return NativeSender(loaded, loaded.reason)
    lib = loaded.lib
    try:
        _declare(lib)
    except AttributeError as e:
        return NativeSender(loaded, f"the native library has no sender ({e})")
    err = ctypes.create_string_buffer(256)
    if lib.pns_init(err, len(err)) != 0:
        return NativeSender(loaded, err.value.decode(errors="replace"))
    theirs = tuple(lib.pns_layout(i) for i in range(len(_LAYOUT)))
    if theirs != _LAYOUT:
        return NativeSender(loaded, f"the sender's structures are {theirs} in the library, {_LAYOUT} here")
    names: list[str] = []
    while (name := lib.pns_setting_name(len(names))) is not None:
        names.append(name.decode())
    return NativeSender(loaded, "", frozenset(names), bool(lib.pns_null_values_supported()))


class SenderLoader:
    """One NativeSender per loaded library (tests load several builds). Pickles as a new loader (a package shipped
    by value carries module globals to every task; a lock cannot be pickled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: dict[int, NativeSender] = {}

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return SenderLoader, ()

    def get(self) -> NativeSender:
        loaded = native_library()
        with self._lock:
            found = self._loaded.get(id(loaded))
            if found is None or found.loaded is not loaded:
                found = self._loaded[id(loaded)] = _load(loaded)
            return found


LOADER = SenderLoader()


def native_sender() -> NativeSender:
    return LOADER.get()


def setting_text(value: Any) -> bytes:
    """A create_producer argument as the library's setting value: booleans 1/0, enums their number."""
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, int | str):
        return str(value).encode()
    return str(int(value)).encode()  # an enum (pulsar-client's, pybind11's: int() is its number)


# -- one batch's columns -------------------------------------------------------------------------------------
class Unencodable(Exception):
    """A batch the native sender does not encode as the Python sender would (it goes to the Python sender)."""


def batch_columns(batch: pa.RecordBatch, columns: WriteColumns) -> tuple[BatchColumns, list[Any]]:
    """The ctypes view of the batch's columns, and the arrays whose buffers it points into (keep them alive)."""
    keep: list[Any] = []
    view = BatchColumns(rows=batch.num_rows)
    view.value = _strings(batch.column(columns.value), keep, "value")
    if columns.key >= 0:
        view.key = _strings(batch.column(columns.key), keep, "key")
    if columns.ordering_key >= 0:
        view.ordering_key = _strings(batch.column(columns.ordering_key), keep, "ordering key")
    if columns.partition >= 0:
        view.partition = _ints(_partitions(batch.column(columns.partition)), 4, keep)
    if columns.event_time >= 0:
        view.event_ms = _ints(_event_ms(batch.column(columns.event_time)), 8, keep)
    if columns.properties >= 0:
        view.properties = _pairs(batch.column(columns.properties), keep)
    return view, keep


def _pairs(array: pa.Array, keep: list[Any]) -> Pairs:
    """A map column: its offsets index its entries, whose keys and values are the entries' struct fields (field(i)
    follows the struct's own offset; MapArray.keys would not)."""
    if not pa.types.is_map(array.type):
        raise Unencodable(f"a properties column of Arrow type {array.type}")
    valid, offsets = array.buffers()[:2]
    keep.append(array)
    entries = array.values
    has_nulls = valid is not None and array.null_count > 0
    return Pairs(offsets=offsets.address, valid=valid.address if has_nulls else None, offsets_size=offsets.size,
                 valid_size=valid.size if has_nulls else 0, offset=array.offset,
                 keys=_strings(entries.field(0), keep, "property key"), values=_strings(entries.field(1), keep, "property value"))


def _strings(array: pa.Array, keep: list[Any], role: str) -> Strings:
    kind = array.type
    wide = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
    if not (wide or pa.types.is_string(kind) or pa.types.is_binary(kind)):
        raise Unencodable(f"a {role} column of Arrow type {kind}")
    valid, offsets, data = array.buffers()[:3]
    keep.append(array)
    if data is None:  # every value empty or null: a one-byte stand-in, so the library gets a readable address
        data = pa.py_buffer(b"\0")
        keep.append(data)
    has_nulls = valid is not None and array.null_count > 0
    return Strings(valid=valid.address if has_nulls else None, offsets=offsets.address, data=data.address,
                   valid_size=valid.size if has_nulls else 0, offsets_size=offsets.size, data_size=data.size,
                   offset=array.offset, wide=int(wide))


def _ints(array: pa.Array, width: int, keep: list[Any]) -> Ints:
    valid, values = array.buffers()[:2]
    keep.append(array)
    has_nulls = valid is not None and array.null_count > 0
    return Ints(values=values.address, valid=valid.address if has_nulls else None, values_size=values.size,
                valid_size=valid.size if has_nulls else 0, offset=array.offset)


def _partitions(array: pa.Array) -> pa.Array:
    try:
        return array.cast(pa.int32())  # safe: a value past int32 raises, and the Python sender names it
    except pa.ArrowInvalid:
        raise Unencodable("a partition past int32") from None


def _event_ms(array: pa.Array) -> pa.Array:
    """Epoch milliseconds (int64) of a timestamp or bigint column; an event time before 1970 goes to Python (floored
    there, and refused by the client as the Python sender's is)."""
    if not pa.types.is_timestamp(array.type):
        return array.cast(pa.int64())
    ticks = array.cast(pa.int64())
    low = pc.min(ticks).as_py()
    if low is not None and low < 0:
        raise Unencodable("an event time before 1970")
    per_ms = {"s": 0, "ms": 1, "us": 1_000, "ns": 1_000_000}[array.type.unit]
    if per_ms == 1:
        return ticks
    return pc.multiply(ticks, 1000) if per_ms == 0 else pc.divide(ticks, per_ms)
