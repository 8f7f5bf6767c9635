"""Executor side: a reader of the native read path and the Arrow batches it fills.

A `NativeReader` wraps one reader of the native library: each `read_group` appends the messages
of one entry (or as many as fit the batch) to the batch being built, in C, and says which entry
they belong to; `truncate` drops what the range does not own; `export` hands the batch to Arrow
without copying, through the Arrow C Data Interface (the buffers stay owned by the library until
pyarrow releases the last array made from them).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pyarrow as pa

from ..read_task import ClientConfig
from ..schemas.columns import METADATA_COLUMNS
from .arrow_rows import partition_columns, raw_batch
from .native_library import STATUS_ERROR, NativeLibrary, pulsar_error

_BOOL_SETTINGS = {"tls_allow_insecure_connection", "tls_validate_hostname", "is_read_compacted"}
CRYPTO_FAILURE_ACTIONS = {"fail": 0, "discard": 1, "consume": 2}


Settings = tuple[tuple[str, Any], ...]  # pulsar.Client / create_reader keyword arguments


def unsupported_settings(loaded: NativeLibrary, client_kwargs: Settings, reader_kwargs: Settings) -> list[str]:
    """The pass-through settings the native path cannot apply (the library's own settings tables say which it can)."""
    out = [f"pulsar.client.{name}" for name, value in client_kwargs if name not in loaded.client_settings
           and not (name == "use_tls" and not value)]
    out += [f"pulsar.reader.{name}" for name, _ in reader_kwargs if name not in loaded.reader_settings]
    return out


def _c_strings(pairs: list[tuple[str, Any]]) -> tuple[Any, Any, int]:
    def text(name: str, value: Any) -> bytes:
        if name in _BOOL_SETTINGS or isinstance(value, bool):
            return b"1" if value else b"0"
        return str(value).encode()

    names = (ctypes.c_char_p * max(len(pairs), 1))(*[n.encode() for n, _ in pairs])
    values = (ctypes.c_char_p * max(len(pairs), 1))(*[text(n, v) for n, v in pairs])
    return names, values, len(pairs)


def create_client(lib: ctypes.CDLL, cfg: ClientConfig) -> int:
    """A native client for `cfg` (raises with the library's reason, which names no secret)."""
    settings = cfg.client_settings()  # the Python path's too (client_factories.python_client)
    pairs = list(settings.settings)
    if settings.auth:  # through the client's own plugin, by the names native/src/clients.c reads
        pairs += [("auth_plugin", settings.auth[0]), ("auth_params", settings.auth[1])]
    names, values, n = _c_strings(pairs)
    err = ctypes.create_string_buffer(512)
    client = lib.par_client_create(settings.service_url.encode(), names, values, n, err, len(err))
    if not client:
        raise RuntimeError(f"Cannot create a native Pulsar client for {settings.service_url}: {err.value.decode(errors='replace')}")
    return int(client)


class NativeReader:
    """One open reader of the native library and the batch it is filling."""

    def __init__(self, loaded: NativeLibrary, handle: int, topic: str) -> None:
        assert loaded.lib is not None
        self._lib = loaded.lib
        self.loaded_from = loaded
        self._handle: int | None = handle
        # Set by the read loop when it stopped right after its range's last message: the reader can
        # carry on for the next range (client_cache.park_native_reader).
        self.ended_exactly = False
        self._topic = topic
        self.group = loaded.group_type()
        self._group_ref = ctypes.byref(self.group)

    @classmethod
    def open(cls, loaded: NativeLibrary, client: int, cfg: ClientConfig, topic: str, start_id: bytes | None,
             receiver_queue: int, inclusive: bool = False) -> NativeReader:
        import pulsar

        pairs: list[tuple[str, Any]] = [("receiver_queue_size", receiver_queue), *cfg.reader_kwargs]  # a user's setting wins
        if inclusive:  # only asked where loaded.inclusive_start
            pairs.append(("start_message_id_inclusive", 1))
        if cfg.private_key_path:
            pairs += [("public_key_path", cfg.public_key_path or ""), ("private_key_path", cfg.private_key_path)]
        if cfg.private_key_path or cfg.crypto_failure_action != "fail":  # discard/consume apply without a key too
            pairs.append(("crypto_failure_action", CRYPTO_FAILURE_ACTIONS[cfg.crypto_failure_action]))
        names, values, n = _c_strings(pairs)
        result = ctypes.c_int(0)
        err = ctypes.create_string_buffer(512)
        lib = loaded.lib
        assert lib is not None
        handle = lib.par_reader_open(client, topic.encode(), start_id, len(start_id or b""), names, values, n,
                                     ctypes.byref(result), err, len(err))
        if not handle:
            if result.value in (0, 1, 2):  # the library's own failure, not the broker's
                raise pulsar.PulsarException(f"Cannot open a native reader on {topic}: {err.value.decode(errors='replace')}")
            raise pulsar_error(result.value, f"Cannot open a reader on {topic}")
        return cls(loaded, handle, topic)

    def read_group(self, timeout_ms: int, max_rows: int) -> Any:
        """Append the next entry's messages (see par_read_group); raises what the client raised."""
        self._lib.par_read_group(self._handle, timeout_ms, max_rows, self._group_ref)
        if self.group.status == STATUS_ERROR:
            raise pulsar_error(self.group.result, f"Reading {self._topic}")
        return self.group

    @property
    def rows(self) -> int:
        return int(self._lib.par_rows(self._handle))

    def truncate(self, rows: int) -> None:
        self._lib.par_truncate(self._handle, rows)

    def has_message_available(self) -> bool:
        result = ctypes.c_int(0)
        answer = self._lib.par_has_message_available(self._handle, ctypes.byref(result))
        if answer < 0:
            raise pulsar_error(result.value, f"Reading {self._topic}")
        return bool(answer)

    def export(self) -> ExportedBatch:
        pointer = self._lib.par_export_arrow(self._handle)
        if not pointer:
            raise MemoryError(f"Reading {self._topic}: the native reader could not allocate a new batch")
        try:  # pyarrow moves the array out of the structure; freeing it then frees the shell only
            columns = pa.RecordBatch._import_from_c(pointer, self.loaded_from.arrow_schema)
        finally:
            self._lib.par_arrow_array_free(pointer)
        return ExportedBatch(columns)

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._lib.par_reader_close(handle)


class ExportedBatch:
    """The columns of one exported batch (native_library.native_columns), by name."""

    def __init__(self, columns: pa.RecordBatch) -> None:
        self.columns = columns

    @property
    def rows(self) -> int:
        return self.columns.num_rows

    def keys(self) -> pa.Array:
        return self.columns.column("key")

    def values(self) -> pa.Array:
        return self.columns.column("value")

    def message_ids(self) -> pa.Array:
        return self.columns.column("messageId")

    def schema_versions(self) -> pa.Array:
        return self.columns.column("schemaVersion")

    def metadata_arrays(self, partition: str, partition_index: int) -> list[pa.Array]:
        """The metadata columns (schemas/columns.METADATA_COLUMNS, in its order), as arrow_rows.metadata_arrays
        builds them on the Python path: the library's by name, the partition's own repeated."""
        own = partition_columns(partition, partition_index, self.rows)
        return [own[name] if name in own else self.columns.column(name) for name in METADATA_COLUMNS]

    def to_batch(self, partition: str, partition_index: int) -> pa.RecordBatch:
        """The raw layout (schemas/columns.RAW_ARROW_SCHEMA)."""
        return raw_batch(self.values(), self.metadata_arrays(partition, partition_index))
