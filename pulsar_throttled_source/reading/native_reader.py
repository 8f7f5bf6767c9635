"""Executor side: a reader of the native read path and the Arrow batches it fills.

A `NativeReader` wraps one reader of the native library: each `read_group` appends the messages
of one entry (or as many as fit the batch) to the batch being built, in C, and says which entry
they belong to; `truncate` drops what the range does not own; `export` hands the batch to Arrow
without copying (the buffers stay owned by the library until the last array is collected).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pyarrow as pa

from ..read_task import ClientConfig
from ..schemas.columns import RAW_ARROW_SCHEMA
from .native_library import (
    KEY,
    MESSAGE_ID,
    ORDERING_KEY,
    PRODUCER,
    PROP_KEY,
    PROP_VALUE,
    STATUS_ERROR,
    VALUE,
    NativeLibrary,
    pulsar_error,
)

_BOOL_SETTINGS = {"tls_allow_insecure_connection", "tls_validate_hostname", "is_read_compacted"}
# pulsar.Client / create_reader settings the C API can set (the rest keep a query on the Python path).
CLIENT_SETTINGS = {"operation_timeout_seconds", "io_threads", "message_listener_threads", "concurrent_lookup_requests",
                   "stats_interval_in_seconds", "tls_trust_certs_file_path", "tls_allow_insecure_connection",
                   "tls_validate_hostname", "listener_name", "tls_private_key_file_path", "tls_certificate_file_path"}
READER_SETTINGS = {"receiver_queue_size", "reader_name", "subscription_role_prefix", "is_read_compacted"}
CRYPTO_FAILURE_ACTIONS = {"fail": 0, "discard": 1, "consume": 2}


Settings = tuple[tuple[str, Any], ...]  # pulsar.Client / create_reader keyword arguments


def unsupported_settings(client_kwargs: Settings, reader_kwargs: Settings) -> list[str]:
    """The pass-through settings the native path cannot apply."""
    out = [f"pulsar.client.{name}" for name, value in client_kwargs if name not in CLIENT_SETTINGS
           and not (name == "use_tls" and not value)]
    out += [f"pulsar.reader.{name}" for name, _ in reader_kwargs if name not in READER_SETTINGS]
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
    pairs = list(cfg.client_kwargs)
    if cfg.credentials:  # through the client's own plugin, as the Python path (client_cache.python_client)
        pairs += [("auth_plugin", cfg.credentials.plugin), ("auth_params", cfg.credentials.client_params())]
    names, values, n = _c_strings(pairs)
    err = ctypes.create_string_buffer(512)
    client = lib.par_client_create(cfg.service_url.encode(), names, values, n, err, len(err))
    if not client:
        raise RuntimeError(f"Cannot create a native Pulsar client for {cfg.service_url}: {err.value.decode(errors='replace')}")
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
        batch = self._lib.par_export(self._handle)
        if not batch:
            raise MemoryError(f"Reading {self._topic}: the native reader could not allocate a new batch")
        return ExportedBatch(self._lib, batch)

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._lib.par_reader_close(handle)


class ExportedBatch:
    """The buffers of one exported batch; freed by the library when this object is collected (every
    Arrow buffer made from them holds it as its base)."""

    def __init__(self, lib: ctypes.CDLL, batch: Any) -> None:
        self._lib = lib
        self._batch = batch
        self.b = batch.contents  # par_batch_t

    def __del__(self) -> None:
        self._lib.par_batch_free(self._batch)

    def _buffer(self, address: int | None, length: int) -> pa.Buffer | None:
        if not length or not address:
            return None
        return pa.foreign_buffer(address, length, base=self)

    def _varlen(self, col: int, arrow_type: pa.DataType, items: int) -> pa.Array:
        ptrs, lens = self.b.var_ptr[col], self.b.var_len[col]
        validity = self._buffer(ptrs[0], lens[0])
        data = self._buffer(ptrs[2], lens[2]) or pa.py_buffer(b"")
        return pa.Array.from_buffers(arrow_type, items, [validity, self._buffer(ptrs[1], lens[1]), data], null_count=-1)

    def _int64(self, arrow_type: pa.DataType, address: int | None, length: int, validity: pa.Buffer | None = None) -> pa.Array:
        return pa.Array.from_buffers(arrow_type, self.b.rows, [validity, self._buffer(address, length)], null_count=-1)

    def keys(self) -> pa.Array:
        return self._varlen(KEY, pa.string(), self.b.rows)

    def values(self) -> pa.Array:
        return self._varlen(VALUE, pa.binary(), self.b.rows)

    def message_ids(self) -> pa.Array:
        return self._varlen(MESSAGE_ID, pa.binary(), self.b.rows)

    def schema_versions(self) -> pa.Array:
        return self._int64(pa.int64(), self.b.schema_version_ptr, self.b.schema_version_len)

    def metadata_arrays(self, partition: str, partition_index: int) -> list[pa.Array]:
        """key, topic, partition, messageId, publishTime, eventTime, properties, orderingKey and
        producerName, as arrow_rows.metadata_arrays builds them on the Python path."""
        rows, b = self.b.rows, self.b
        timestamp = RAW_ARROW_SCHEMA.field("publishTime").type
        prop_keys = self._varlen(PROP_KEY, pa.string(), b.props)
        prop_values = self._varlen(PROP_VALUE, pa.string(), b.props)
        entry_struct = pa.StructArray.from_arrays([prop_keys, prop_values], fields=list(_ENTRY_FIELDS))
        properties = pa.Array.from_buffers(_PROPERTIES, rows, [None, self._buffer(b.prop_offsets_ptr, b.prop_offsets_len)],
                                           null_count=0, children=[entry_struct])
        return [
            self.keys(),
            pa.repeat(pa.scalar(partition, pa.string()), rows),
            pa.repeat(pa.scalar(partition_index, pa.int32()), rows),
            self.message_ids(),
            self._int64(timestamp, b.publish_ptr, b.publish_len),
            self._int64(timestamp, b.event_ptr, b.event_len, self._buffer(b.event_valid_ptr, b.event_valid_len)),
            properties,
            self._varlen(ORDERING_KEY, pa.string(), rows),
            self._varlen(PRODUCER, pa.string(), rows),
        ]

    def to_batch(self, partition: str, partition_index: int) -> pa.RecordBatch:
        """The raw layout (schemas/columns.RAW_ARROW_SCHEMA)."""
        key, topic, index, ids, publish, event, props, ordering, producer = self.metadata_arrays(partition, partition_index)
        return pa.RecordBatch.from_arrays([key, self.values(), topic, index, ids, publish, event, props, ordering, producer],
                                          schema=RAW_ARROW_SCHEMA)


_PROPERTIES = RAW_ARROW_SCHEMA.field("properties").type
_ENTRY_FIELDS = (_PROPERTIES.key_field, _PROPERTIES.item_field)
