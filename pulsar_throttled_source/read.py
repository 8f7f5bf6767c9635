"""Executor side: read one planned entry range of one partition into Arrow record batches.

Runs in Spark's Python workers on a fresh unpickled `PartitionRange`, so everything
a read needs travels inside it. One `pulsar.Client` per worker process is reused
across tasks (workers are reused), because creating a client costs a connection
handshake and threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from .positions import BEFORE_EARLIEST, EntryPosition

log = logging.getLogger(__name__)
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.string()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("messageId", pa.binary()),
    pa.field("publishTime", pa.timestamp("us", tz="UTC")),
    pa.field("eventTime", pa.timestamp("us", tz="UTC")),
    pa.field("properties", pa.map_(pa.string(), pa.string())),
])
SPARK_SCHEMA_DDL = ("key string, value binary, topic string, partition int, messageId binary, "
                    "publishTime timestamp, eventTime timestamp, properties map<string,string>")


@dataclass(frozen=True)
class ClientConfig:
    """How executors connect: travels to every task, never printed with its token."""

    service_url: str
    client_kwargs: tuple[tuple[str, Any], ...]
    reader_kwargs: tuple[tuple[str, Any], ...]
    auth_token: str | None = field(repr=False)
    poll_timeout_ms: int
    max_rows_per_batch: int

    def cache_key(self) -> tuple[Any, ...]:
        return (self.service_url, self.client_kwargs, self.auth_token)


@dataclass(frozen=True)
class PartitionRange(InputPartition):
    """Entries after `start` up to and including `end` of one partition (one Spark task)."""

    partition: str
    partition_index: int
    start: EntryPosition
    end: EntryPosition
    entries: int
    config: ClientConfig

    def __init__(self, partition: str, partition_index: int, start: EntryPosition, end: EntryPosition,
                 entries: int, config: ClientConfig) -> None:
        # InputPartition wants a `value`; a frozen dataclass needs object.__setattr__.
        for name, value in (("partition", partition), ("partition_index", partition_index), ("start", start),
                            ("end", end), ("entries", entries), ("config", config), ("value", None)):
            object.__setattr__(self, name, value)


DEFAULT_RECEIVER_QUEUE = 10_000
_clients: dict[tuple[Any, ...], Any] = {}
_clients_lock = threading.Lock()


def client_for(config: ClientConfig) -> Any:
    """The worker process's shared pulsar.Client for this configuration."""
    import pulsar

    key = config.cache_key()
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            kwargs = dict(config.client_kwargs)
            if config.auth_token:
                kwargs["authentication"] = pulsar.AuthenticationToken(config.auth_token)
            kwargs.setdefault("logger", _quiet_logger())
            client = pulsar.Client(config.service_url, **kwargs)
            _clients[key] = client
        return client


def _quiet_logger() -> Any:
    """The C++ client logs every reader creation at INFO to stdout; keep task logs readable."""
    import logging

    logger = logging.getLogger("pulsar_throttled_source.pulsar_client")
    logger.setLevel(logging.WARNING)
    return logger


def drop_client(config: ClientConfig) -> None:
    """Forget a client that failed (e.g. broker restarted) so the next task makes a new one."""
    with _clients_lock:
        client = _clients.pop(config.cache_key(), None)
    if client is not None:
        try:
            client.close()
        except Exception:  # closing a broken client may fail; nothing else to do
            pass


class ReadTimeout(RuntimeError):
    pass


def read_range(part: PartitionRange) -> Iterator[pa.RecordBatch]:
    """Yield the messages of (start, end] as Arrow batches of at most max_rows_per_batch rows."""
    import pulsar

    cfg = part.config
    if part.start == BEFORE_EARLIEST:
        start_id = pulsar.MessageId.earliest
    else:
        # The broker delivers the start entry itself for batch index -1, so entries at or
        # before `start` are skipped below: the start is exclusive by our own check.
        start_id = pulsar.MessageId(max(part.partition_index, -1), part.start.ledger_id, part.start.entry_id, -1)
    reader = _open_reader(part, start_id)
    failed = False
    try:
        yield from _read_messages(reader, part)
    except Exception:
        failed = True
        raise
    finally:
        if failed:
            # A failed read (broker gone longer than pollTimeoutMs, connection broken): Spark
            # retries the task, possibly in this worker; the retry must get a fresh client.
            try:
                reader.close()
            except Exception:  # closing on a broken connection may fail too
                pass
            drop_client(cfg)
        else:
            reader.close()


def _open_reader(part: PartitionRange, start_id: Any) -> Any:
    """Open a reader; while the broker is unreachable (e.g. restarting), retry with a fresh client
    and exponential backoff for up to pollTimeoutMs, so a task planned just before a broker
    restart waits for it instead of failing."""
    import pulsar

    cfg = part.config
    # A deeper receiver queue keeps the broker streaming while Python converts rows.
    kwargs = {"receiver_queue_size": DEFAULT_RECEIVER_QUEUE, **dict(cfg.reader_kwargs)}
    retryable = (pulsar.ConnectError, pulsar.Timeout, pulsar.ServiceUnitNotReady, pulsar.LookupError, pulsar.NotConnected,
                 pulsar.TooManyLookupRequestException, pulsar.BrokerMetadataError, pulsar.BrokerPersistenceError)
    deadline = time.monotonic() + cfg.poll_timeout_ms / 1000.0
    attempt = 0
    while True:
        try:
            return client_for(cfg).create_reader(part.partition, start_id, **kwargs)
        except Exception as e:
            drop_client(cfg)  # the next attempt, or Spark's retry of this task, starts from a fresh client
            left = deadline - time.monotonic()
            if not isinstance(e, retryable) or left <= 0:
                detail = str(e).replace(cfg.auth_token, "***") if cfg.auth_token else str(e)  # never echo a token
                raise RuntimeError(f"Cannot open a reader on {part.partition} at {cfg.service_url}: {detail}. Check option 'service.url' "
                                   "(the broker's pulsar://host:port) and, if the broker requires authentication, "
                                   "'pulsar.client.authParams'.") from None
            attempt += 1
            delay = min(0.5 * 2 ** (attempt - 1), 5.0, left)
            log.warning("Cannot open a reader on %s at %s (%s); retry %d in %.1f s (waiting up to pollTimeoutMs=%d ms)",
                        part.partition, cfg.service_url, type(e).__name__, attempt, delay, cfg.poll_timeout_ms)
            time.sleep(delay)


def _read_messages(reader: Any, part: PartitionRange) -> Iterator[pa.RecordBatch]:
    import pulsar

    cfg = part.config
    start_l, start_e = part.start.ledger_id, part.start.entry_id
    end_l, end_e = part.end.ledger_id, part.end.entry_id
    # The public Reader wraps every message in a Python object; the pybind11 reader it wraps
    # returns the native message directly, which halves the per-message cost on this hot path.
    raw_read = getattr(reader, "_reader", reader).read_next
    timeout = cfg.poll_timeout_ms
    limit = cfg.max_rows_per_batch
    columns = _Columns()
    last_pos = (start_l, start_e)
    # Where the current entry stands: decided at an entry's first message and reused for the
    # rest of its batch (a batch's messages arrive consecutively, index after index), which
    # saves two native calls per message on batched topics.
    prev_index = -2
    skip = False
    in_end_entry = False
    publish_ms = 0
    ids = _EntryIds()

    while True:
        try:
            msg = raw_read(timeout)
        except pulsar.Timeout:
            raise ReadTimeout(
                f"Reading {part.partition}: no message arrived within pollTimeoutMs={cfg.poll_timeout_ms} ms "
                f"after entry {last_pos[0]}:{last_pos[1]}, but the planned range ends at {part.end}. "
                "The broker may be overloaded or the data was deleted; raise 'pollTimeoutMs' or check the topic."
            ) from None
        mid = msg.message_id()
        index = mid.batch_index()
        if index < 1 or index != prev_index + 1:
            ledger, entry = mid.ledger_id(), mid.entry_id()
            if ledger > end_l or (ledger == end_l and entry > end_e):
                break  # first message past the range: it belongs to the next micro-batch
            # The exclusive start entry (or earlier) is delivered by the broker; skip it.
            skip = ledger < start_l or (ledger == start_l and entry <= start_e)
            in_end_entry = ledger == end_l and entry == end_e
            last_pos = (ledger, entry)
            publish_ms = msg.publish_timestamp()  # one per entry: a batch shares its metadata
            ids.new_entry(mid, index)
        prev_index = index
        if skip:
            continue
        columns.add(msg, ids.serialized(mid, index), publish_ms)
        if columns.rows >= limit:
            yield columns.to_batch(part)
            columns = _Columns()
        # Last entry of the range: done unless more messages of the same batch follow.
        if in_end_entry and (index < 0 or not reader.has_message_available()):
            break
    if columns.rows:
        yield columns.to_batch(part)


class _EntryIds:
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


class _Columns:
    """Column lists for one Arrow batch, filled message by message."""

    __slots__ = ("keys", "values", "ids", "publish_ms", "event_ms", "props", "rows")

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.values: list[bytes] = []
        self.ids: list[bytes] = []
        self.publish_ms: list[int] = []
        self.event_ms: list[int] = []  # 0 = unset, as the client reports it
        self.props: list[Sequence[tuple[str, str]]] = []
        self.rows = 0

    def add(self, msg: Any, serialized_id: bytes, publish_ms: int) -> None:
        self.keys.append(msg.partition_key() or None)
        self.values.append(msg.data())
        self.ids.append(serialized_id)
        self.publish_ms.append(publish_ms)
        self.event_ms.append(msg.event_timestamp())
        p = msg.properties()
        self.props.append(list(p.items()) if p else _NO_PROPERTIES)
        self.rows += 1

    def to_batch(self, part: PartitionRange) -> pa.RecordBatch:
        import pyarrow.compute as pc

        n = self.rows
        event = pa.array(self.event_ms, pa.int64())
        event = pc.if_else(pc.equal(event, 0), pa.scalar(None, pa.int64()), event)
        return pa.RecordBatch.from_arrays([
            # Via large_string: pyarrow converts an all-None list to string ~100x slower.
            pa.array(self.keys, pa.large_string()).cast(pa.string()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(part.partition, pa.string()), n),
            pa.repeat(pa.scalar(part.partition_index, pa.int32()), n),
            pa.array(self.ids, pa.binary()),
            _ms_to_timestamp(pa.array(self.publish_ms, pa.int64())),
            _ms_to_timestamp(event),
            pa.array(self.props, ARROW_SCHEMA.field("properties").type),
        ], schema=ARROW_SCHEMA)


def _ms_to_timestamp(millis: pa.Array) -> pa.Array:
    return millis.cast(_TIMESTAMP_MS).cast(_TIMESTAMP_US)
