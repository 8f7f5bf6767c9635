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
from collections.abc import Iterator
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
    keys: list[str | None] = []
    values: list[bytes] = []
    ids: list[bytes] = []
    publish: list[int] = []
    event: list[int | None] = []
    props: list[list[tuple[str, str]]] = []
    limit = cfg.max_rows_per_batch
    last_pos = (start_l, start_e)

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
        ledger, entry = mid.ledger_id(), mid.entry_id()
        if ledger < start_l or (ledger == start_l and entry <= start_e):
            continue  # the exclusive start entry (or earlier) is delivered by the broker; skip it
        if ledger > end_l or (ledger == end_l and entry > end_e):
            break  # first message past the range: it belongs to the next micro-batch
        last_pos = (ledger, entry)
        keys.append(msg.partition_key() or None)
        values.append(msg.data())
        ids.append(mid.serialize())
        publish.append(msg.publish_timestamp() * 1000)
        ev = msg.event_timestamp()
        event.append(ev * 1000 if ev else None)
        p = msg.properties()
        props.append(list(p.items()) if p else [])
        if len(values) >= limit:
            yield _batch(part, keys, values, ids, publish, event, props)
            keys, values, ids, publish, event, props = [], [], [], [], [], []
        if ledger == end_l and entry == end_e:
            # Last entry of the range: done unless more messages of the same batch follow.
            if mid.batch_index() < 0 or not reader.has_message_available():
                break
    if values:
        yield _batch(part, keys, values, ids, publish, event, props)


def _batch(part: PartitionRange, keys: list, values: list, ids: list, publish: list, event: list, props: list) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays([
        pa.array(keys, pa.string()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(part.partition, pa.string()), n),
        pa.repeat(pa.scalar(part.partition_index, pa.int32()), n),
        pa.array(ids, pa.binary()),
        pa.array(publish, pa.timestamp("us", tz="UTC")),
        pa.array(event, pa.timestamp("us", tz="UTC")),
        pa.array(props, ARROW_SCHEMA.field("properties").type),
    ], schema=ARROW_SCHEMA)
