"""Executor side: the native read path's library (native/src/, whose par_internal.h lists its files), found, loaded
and checked once per process, with the ctypes types of its calls.

The library calls libpulsar's C API in the copy the pulsar-client wheel ships
(`pulsar_client.libs/libpulsar-<hash>.so`: the hash is a packaging detail, so it is found by
pattern), resolving every symbol at load. Whatever fails (no native package, no libpulsar, a
missing symbol, a failed self-check) is one reason string: `readPath=auto` reads with the Python
path and says why once, `readPath=native` fails with it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..schemas.columns import MESSAGE_COLUMNS, PARTITION_COLUMNS

log = logging.getLogger(__name__)

# Where a test (or an operator) points at another build of the library, e.g. one under AddressSanitizer.
LIBRARY_ENV = "PULSAR_THROTTLED_NATIVE_LIBRARY"

# What a read_group call did (par_group_t.status): appended messages; nothing arrived in time; failed; nothing
# appended because the batch cannot take the next message (its values would pass Arrow's 32-bit offsets): export it.
STATUS_OK, STATUS_TIMEOUT, STATUS_ERROR, STATUS_FULL = 0, 1, -1, 2


# par_group_t (readers.c), what one read_group call appended, field by field: the ctypes mirror of the native
# path, checked against the library's own layout at load (par_group_field), and range_reader.EntryGroup's slots.
GROUP_FIELDS: tuple[tuple[str, Any], ...] = (
    ("status", ctypes.c_int32), ("result", ctypes.c_int32),
    ("rows_before", ctypes.c_int64), ("rows", ctypes.c_int64),
    ("ledger", ctypes.c_int64), ("entry", ctypes.c_int64),
    ("batch_index", ctypes.c_int32), ("new_entry", ctypes.c_int32),
    ("entry_complete", ctypes.c_int32), ("padding", ctypes.c_int32),
    ("first_chunk_ledger", ctypes.c_int64), ("first_chunk_entry", ctypes.c_int64),
)


def _group_type() -> Any:
    """par_group_t, the one structure a call fills (the batches cross as Arrow C Data Interface structures, whose
    layout is Arrow's standard). Made at load, not at import: a package shipped by value pickles its module's
    classes, and a ctypes structure class cannot be pickled."""

    class Group(ctypes.Structure):
        """par_group_t: what one par_read_group call appended."""

        _fields_ = list(GROUP_FIELDS)

    return Group


def group_layout_problem(lib: ctypes.CDLL, group: Any) -> str:
    """'' when the library's par_group_t has the mirror's fields, in order, at the same offsets and sizes."""
    offset, size = ctypes.c_size_t(), ctypes.c_size_t()
    theirs: list[tuple[str, int, int]] = []
    while (name := lib.par_group_field(len(theirs), ctypes.byref(offset), ctypes.byref(size))) is not None:
        theirs.append((name.decode(), offset.value, size.value))
    ours = [(name, getattr(group, name).offset, getattr(group, name).size) for name, _ in group._fields_]
    return "" if theirs == ours else f"par_group_t is {theirs} in the library, {ours} here"


def _declare(lib: ctypes.CDLL, group: Any) -> None:
    str_array = ctypes.POINTER(ctypes.c_char_p)
    c_void_p, c_int, c_char_p, c_size_t, c_int64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64
    signatures = {
        "par_load": (c_int, [c_char_p, c_char_p, c_size_t]),
        "par_result_str": (c_char_p, [c_int]),
        "par_inclusive_start_supported": (c_int, []),
        "par_client_create": (c_void_p, [c_char_p, str_array, str_array, c_int, c_char_p, c_size_t]),
        "par_client_free": (None, [c_void_p]),
        "par_reader_open": (c_void_p, [c_void_p, c_char_p, c_char_p, c_int, str_array, str_array, c_int,
                                       ctypes.POINTER(c_int), c_char_p, c_size_t]),
        "par_reader_close": (None, [c_void_p]),
        "par_has_message_available": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
        "par_read_group": (c_int, [c_void_p, c_int, c_int64, ctypes.POINTER(group)]),
        "par_rows": (c_int64, [c_void_p]),
        "par_truncate": (None, [c_void_p, c_int64]),
        "par_export_arrow": (c_void_p, [c_void_p]),  # struct ArrowArray *
        "par_arrow_array_free": (None, [c_void_p]),
        "par_arrow_schema": (c_void_p, []),  # struct ArrowSchema *
        "par_arrow_schema_free": (None, [c_void_p]),
        "par_group_field": (c_char_p, [c_int, ctypes.POINTER(c_size_t), ctypes.POINTER(c_size_t)]),
        "par_setting_name": (c_char_p, [c_int, c_int]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)  # AttributeError: a library of another version
        fn.restype, fn.argtypes = restype, argtypes


def libpulsar_path() -> Path | None:
    """The libpulsar the pulsar-client wheel ships beside its `_pulsar` module, None if not found."""
    import _pulsar

    site = Path(_pulsar.__file__).resolve().parent
    for folder in (site / "pulsar_client.libs", site):
        found = sorted(folder.glob("libpulsar*.so*"))
        if found:
            return found[0]
    return None


def _native_library_path() -> Path | None:
    override = os.environ.get(LIBRARY_ENV)
    if override:
        return Path(override)
    try:
        import pulsar_throttled_native
    except ImportError:
        return None
    return pulsar_throttled_native.library_path()


class NativeLibrary:
    """The loaded library and the ctypes structures of its calls, or why there is none (`reason`)."""

    def __init__(self, lib: ctypes.CDLL | None, reason: str, group_type: Any = None,
                 arrow_schema: pa.Schema | None = None, client_settings: frozenset[str] = frozenset(),
                 reader_settings: frozenset[str] = frozenset()) -> None:
        self.lib = lib
        self.reason = reason
        self.group_type = group_type  # par_group_t
        self.arrow_schema = arrow_schema  # the columns of every exported batch, checked at load
        # The pulsar.Client / create_reader keyword names the library applies (its settings tables)
        self.client_settings, self.reader_settings = client_settings, reader_settings

    @property
    def available(self) -> bool:
        return self.lib is not None

    @property
    def inclusive_start(self) -> bool:
        """Whether readers can start at their range's first entry (see par_inclusive_start_supported;
        asked once per read task. Not a cached_property: its lock would not pickle by value)."""
        return self.lib is not None and bool(self.lib.par_inclusive_start_supported())


class Loader:
    """Loads the library once per process. Pickles as a new loader: a package shipped by value
    (`cloudpickle.register_pickle_by_value`) carries module globals to every task, and neither a
    lock nor a loaded library can be pickled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: NativeLibrary | None = None

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return Loader, ()

    def get(self) -> NativeLibrary:
        with self._lock:
            if self._loaded is None:
                self._loaded = _load()
            return self._loaded


LOADER = Loader()


def native_library() -> NativeLibrary:
    """The process's native library, loaded and checked at the first call."""
    return LOADER.get()


def _load() -> NativeLibrary:
    import pulsar  # noqa: F401  # the Python client first: the library must resolve to the copy it loaded

    path = _native_library_path()
    if path is None:
        return NativeLibrary(None, "the package pulsar-throttled-source-native is not installed")
    libpulsar = libpulsar_path()
    if libpulsar is None:
        return NativeLibrary(None, "no libpulsar found in the pulsar-client installation")
    return load_native_library(path, libpulsar)


def load_native_library(path: Path, libpulsar: Path) -> NativeLibrary:
    """The library at `path` bound to the libpulsar at `libpulsar` (every symbol of its C API resolved
    there) and checked. The process's library is the installed one over the pulsar-client wheel's
    libpulsar (native_library); the conformance test binds a build of its own to a scripted stand-in."""
    group = _group_type()
    try:
        lib = ctypes.CDLL(str(path))
        _declare(lib, group)
    except (OSError, AttributeError) as e:
        return NativeLibrary(None, f"cannot load {path.name}: {e}")
    err = ctypes.create_string_buffer(512)
    if lib.par_load(str(libpulsar).encode(), err, len(err)) != 0:
        return NativeLibrary(None, f"{err.value.decode(errors='replace')} ({libpulsar.name})")
    problem = self_check(lib)
    if problem:
        return NativeLibrary(None, f"self-check failed: {problem}")
    problem = group_layout_problem(lib, group)
    if problem:
        return NativeLibrary(None, problem)
    try:
        schema = batch_schema(lib)
    except (MemoryError, ValueError) as e:
        return NativeLibrary(None, f"self-check failed: {e}")
    return NativeLibrary(lib, "", group, schema, settings_table(lib, reader=False), settings_table(lib, reader=True))


def settings_table(lib: ctypes.CDLL, reader: bool) -> frozenset[str]:
    """The client's (or reader's) setting names the library can apply, read from its table."""
    names: set[str] = set()
    while (name := lib.par_setting_name(int(reader), len(names))) is not None:
        names.add(name.decode())
    return frozenset(names)


def batch_schema(lib: ctypes.CDLL) -> pa.Schema:
    """The library's batch columns (its Arrow schema), checked against what the read path expects of each by name
    (schemas/columns.py): a column that drifted is a library refused at load, not a buffer misread."""
    pointer = lib.par_arrow_schema()
    if not pointer:
        raise MemoryError("the library could not allocate its schema")
    try:
        schema = pa.Schema._import_from_c(pointer)
    finally:
        lib.par_arrow_schema_free(pointer)
    expected = native_columns()
    if schema != expected:
        raise ValueError(f"the library's columns {schema} are not {expected}")
    return schema


def native_columns() -> pa.Schema:
    """What the library fills: the message's columns (schemas/columns.MESSAGE_COLUMNS) but the partition's own
    (topic, partition: the same for every row, added in Python), and each message's schema version."""
    fields = [pa.field(name, arrow) for name, _, arrow in MESSAGE_COLUMNS if name not in PARTITION_COLUMNS]
    return pa.schema([*fields, pa.field("schemaVersion", pa.int64())])


def self_check(lib: ctypes.CDLL) -> str:
    """Exercise the library without a broker: a client is created and freed. '' when it holds."""
    names = (ctypes.c_char_p * 1)(b"receiver_queue_size")
    values = (ctypes.c_char_p * 1)(b"1")
    err = ctypes.create_string_buffer(256)
    # A client is lazy: creating one connects to nothing. A reader on it is not opened here.
    client = lib.par_client_create(b"pulsar://localhost:6650", names, values, 0, err, len(err))
    if not client:
        return err.value.decode(errors="replace") or "a client could not be created"
    lib.par_client_free(client)
    return ""


def pulsar_error(result: int, context: str) -> Exception:
    """The pulsar-client exception of a C API result code (the same classes the Python path raises,
    so the retry policy treats both alike)."""
    import pulsar

    try:
        name = pulsar.Result(result).name
    except ValueError:
        name = "UnknownError"
    cls = getattr(pulsar, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = pulsar.PulsarException
    text = lib_result_str(result)
    return cls(f"{context}: {text}")


def lib_result_str(result: int) -> str:
    loaded = native_library()
    if loaded.lib is None:
        return f"result {result}"
    return str(loaded.lib.par_result_str(result).decode(errors="replace"))
