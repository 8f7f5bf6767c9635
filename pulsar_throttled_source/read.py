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

from .arrow_rows import Columns, EntryIds
from .positions import BEFORE_EARLIEST, EntryPosition
from .range_entries import EncryptedEntryError, EntryMetadata, EntryRuns, OpenTransactionError, Position, RangeAccount, first_chunk_position

log = logging.getLogger(__name__)
@dataclass(frozen=True)
class ClientConfig:
    """How executors connect: travels to every task, never printed with its token."""

    service_url: str
    client_kwargs: tuple[tuple[str, Any], ...]
    reader_kwargs: tuple[tuple[str, Any], ...]
    auth_token: str | None = field(repr=False)
    poll_timeout_ms: int
    max_rows_per_batch: int
    # Read tasks look up the metadata of entries the reader never saw (chunks, markers) here.
    admin_url: str = ""
    admin_token: str | None = field(default=None, repr=False)
    admin_tls_verify: bool | str = True
    admin_timeout_ms: int = 30_000
    fail_on_data_loss: bool = True
    incomplete_chunk_wait_ms: int = 60_000
    private_key_path: str | None = None
    public_key_path: str | None = None
    crypto_failure_action: str = "fail"

    def cache_key(self) -> tuple[Any, ...]:
        return (self.service_url, self.client_kwargs, self.auth_token)


@dataclass(frozen=True)
class PartitionRange(InputPartition):
    """Entries after `start` up to and including `end` of one partition (one Spark task).
    `runs` lists the planned entries ledger by ledger; None when planning could not see them."""

    partition: str
    partition_index: int
    start: EntryPosition
    end: EntryPosition
    entries: int
    config: ClientConfig
    runs: EntryRuns | None

    def __init__(self, partition: str, partition_index: int, start: EntryPosition, end: EntryPosition,
                 entries: int, config: ClientConfig, runs: EntryRuns | None = None) -> None:
        # InputPartition wants a `value`; a frozen dataclass needs object.__setattr__.
        for name, value in (("partition", partition), ("partition_index", partition_index), ("start", start),
                            ("end", end), ("entries", entries), ("config", config), ("runs", runs), ("value", None)):
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


class DataLossError(RuntimeError):
    pass


IDLE_CHECK_MS = 200  # how long a read waits before asking whether the broker has anything left to dispatch


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
    lookups = _EntryLookup(part)
    if part.runs and lookups.partition_gone():
        # Never open a reader here: the broker's topic auto-creation would bring the partition back.
        _report_missing(part, [(ledger, entry) for ledger, first, count in part.runs for entry in range(first, first + count)],
                        "the partition was deleted after planning")
        return
    reader = _open_reader(part, start_id)
    failed = False
    try:
        yield from _read_messages(reader, part, lookups)
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
    if cfg.private_key_path:
        kwargs["crypto_key_reader"] = pulsar.CryptoKeyReader(cfg.public_key_path or "", cfg.private_key_path)
    if cfg.private_key_path or cfg.crypto_failure_action != "fail":  # discard/consume apply without a key too
        kwargs["crypto_failure_action"] = getattr(pulsar.ConsumerCryptoFailureAction, cfg.crypto_failure_action.upper())
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


def _read_messages(reader: Any, part: PartitionRange, lookups: "_EntryLookup") -> Iterator[pa.RecordBatch]:
    """The messages the range owns: those whose entry (for a chunked message, whose FIRST chunk)
    lies in (start, end]. A chunked message that starts in the range and ends after it is read to
    its end; one that started before the range belongs to the previous range (the client drops
    its orphan chunks). Entries never dispatched as messages of their own (markers, aborted,
    chunks) are looked up when the reader passes or waits on them, so no read waits for them."""
    import pulsar

    cfg = part.config
    start = (part.start.ledger_id, part.start.entry_id)
    end = (part.end.ledger_id, part.end.entry_id)
    # The public Reader wraps every message in a Python object; the pybind11 reader it wraps
    # returns the native message directly, which halves the per-message cost on this hot path.
    raw_read = getattr(reader, "_reader", reader).read_next
    poll_ms = min(cfg.poll_timeout_ms, IDLE_CHECK_MS)
    limit = cfg.max_rows_per_batch
    columns = Columns()
    # What an encrypted entry that has not arrived means: discarded by the client, an error (no key),
    # or still coming (a key is set, or consume delivers it encrypted).
    undecryptable = {"discard": "skip", "consume": "wait"}.get(cfg.crypto_failure_action, "wait" if cfg.private_key_path else "fail")
    account = RangeAccount(part.runs, lookups, undecryptable) if part.runs is not None else None
    owed_since: float | None = None  # when the range's end was reached with chunked messages still owed
    last_pos = start
    # Where the current entry stands: decided at an entry's first message and reused for the
    # rest of its batch (a batch's messages arrive consecutively, index after index), which
    # saves two native calls per message on batched topics.
    prev_index = -2
    skip = False
    in_end_entry = False
    publish_ms = 0
    serialized = b""
    ids = EntryIds()
    idle_ms = 0

    def done(settled: bool) -> bool:
        """Whether to stop: the range owes nothing more, or its owed chunked messages timed out."""
        nonlocal owed_since
        assert account is not None
        if settled:
            return True
        if not account.cursor.exhausted:
            return False
        owed_since = owed_since if owed_since is not None else time.monotonic()
        return _gave_up_waiting(part, account.owed, owed_since)

    try:
        while True:
            try:
                msg = raw_read(poll_ms)
            except pulsar.Timeout:
                idle_ms += poll_ms
                if account is not None and done(account.walk()):
                    break
                if idle_ms >= cfg.poll_timeout_ms and (account is None or not account.cursor.exhausted):
                    raise ReadTimeout(_timeout_message(part, last_pos)) from None
                continue
            idle_ms = 0
            mid = msg.message_id()
            index = mid.batch_index()
            if index < 1 or index != prev_index + 1:
                position = (mid.ledger_id(), mid.entry_id())
                key = position
                first = None
                if index < 0:
                    serialized = mid.serialize()
                    first = first_chunk_position(serialized) if 0x3A in serialized else None
                    if first is not None:
                        key = first  # a chunked message belongs to the range of its first chunk
                if account is not None:
                    owed = first is not None and account.owes(first)
                    account.saw(position, first)
                    if owed:
                        skip = False  # a message the range waited for, completed past its end
                    elif key > end:
                        if done(account.settled()):
                            break
                        skip = True  # the next range's message, read while waiting for owed ones
                    else:
                        skip = key <= start
                elif key > end:
                    break  # first message past the range: it belongs to the next micro-batch
                else:
                    # The exclusive start entry (or earlier) is delivered by the broker; skip it.
                    skip = key <= start
                in_end_entry = position == end
                last_pos = position
                publish_ms = msg.publish_timestamp()  # one per entry: a batch shares its metadata
                ids.new_entry(mid, index)
            prev_index = index
            if skip:
                continue
            columns.add(msg, serialized if index < 0 else ids.serialized(mid, index), publish_ms)
            if columns.rows >= limit:
                yield columns.to_batch(part.partition, part.partition_index)
                columns = Columns()
            if account is not None and account.cursor.exhausted:
                # The end entry's batch may hold more messages: has_message_available() says so
                # (its False is reliable; a stale True after dropped orphan chunks ends in a walk).
                more_of_end_batch = in_end_entry and index >= 0 and reader.has_message_available()
                if not more_of_end_batch and done(account.settled()):
                    break  # the end entry was read (or the last owed message arrived past it)
            # Last entry of the range: done unless more messages of the same batch follow.
            if account is None and in_end_entry and (index < 0 or not reader.has_message_available()):
                break
    except EncryptedEntryError as e:
        raise RuntimeError(f"Topic {part.partition} is end-to-end encrypted: {e} and no key was given. Set option "
                           "'encryption.privateKeyPath' to the PEM private key (readable on every executor), or "
                           "cryptoFailureAction=discard to skip what cannot be decrypted.") from None
    except OpenTransactionError as e:
        raise RuntimeError(f"Reading {part.partition}: {e}, but the planned range ({part.start}, {part.end}] includes it. "
                           "Planning holds ranges back at the transaction buffer's max read position, so the topic's "
                           "transaction state changed under it; Spark retries the batch.") from None
    if columns.rows:
        yield columns.to_batch(part.partition, part.partition_index)
    if account is not None:
        _report_missing(part, account.missing)
    lookups.close()


class _EntryLookup:
    """Entry metadata from the admin API, for the few entries a reader does not see as messages
    (on a plain topic: none). One admin session per read task, opened on first use."""

    def __init__(self, part: PartitionRange) -> None:
        self._part = part
        self._admin: Any = None
        self._cache: dict[Position, EntryMetadata | None] = {}

    def __call__(self, position: Position) -> EntryMetadata | None:
        if position not in self._cache:
            headers = self._api().entry_headers(self._topic(), *position)
            self._cache[position] = None if headers is None else EntryMetadata.from_headers(headers)
        return self._cache[position]

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()

    def partition_gone(self) -> bool:
        """Whether the partition was deleted after planning: its first planned entry is not stored
        (one HEAD, which also warms the broker's cache for the read), and neither is the topic."""
        assert self._part.runs
        ledger, first, _ = self._part.runs[0]
        return self((ledger, first)) is None and not self._api().topic_is_stored(self._topic())

    def _topic(self) -> Any:
        from .topics import TopicName

        return TopicName.parse(self._part.partition)

    def _api(self) -> Any:
        if self._admin is None:
            from .admin import PulsarAdmin

            cfg = self._part.config
            # Lookups ride through a broker restart for as long as a read would wait (pollTimeoutMs).
            self._admin = PulsarAdmin(cfg.admin_url, cfg.admin_timeout_ms / 1000.0, cfg.admin_token, cfg.admin_tls_verify,
                                      retry_timeout_s=cfg.poll_timeout_ms / 1000.0, known_good=True)
        return self._admin


def _report_missing(part: PartitionRange, missing: list[Position],
                    why: str = "deleted after planning: retention, truncation or a deleted topic") -> None:
    """Planned entries deleted between planning and reading follow failOnDataLoss, as in planning."""
    if not missing:
        return
    lost = f"{len(missing)} planned entries of {part.partition} ({_span(missing)}) are no longer stored"
    if part.config.fail_on_data_loss:
        raise DataLossError(f"Data loss: {lost} ({why}). Set failOnDataLoss=false to continue without them.")
    log.warning("Data loss: %s; continuing without them because failOnDataLoss=false.", lost)


def _span(positions: list[Position]) -> str:
    first, last = positions[0], positions[-1]
    return f"{first[0]}:{first[1]}" if first == last else f"{first[0]}:{first[1]} .. {last[0]}:{last[1]}"


def _gave_up_waiting(part: PartitionRange, owed: dict[Position, str], since: float) -> bool:
    """After incompleteChunkWaitMs, skip chunked messages whose last chunks never came."""
    if time.monotonic() - since < part.config.incomplete_chunk_wait_ms / 1000.0:
        return False
    for (ledger, entry), uuid in owed.items():
        log.warning("Skipping an incomplete chunked message of %s: it starts at entry %d:%d (producer uuid %s) but its "
                    "remaining chunks did not arrive within incompleteChunkWaitMs=%d ms; its producer most likely died "
                    "while sending it.", part.partition, ledger, entry, uuid, part.config.incomplete_chunk_wait_ms)
    return True


def _timeout_message(part: PartitionRange, last: Position) -> str:
    return (f"Reading {part.partition}: the broker reports messages to dispatch, but none arrived within "
            f"pollTimeoutMs={part.config.poll_timeout_ms} ms after entry {last[0]}:{last[1]} (the planned range ends at "
            f"{part.end}). Likely causes: a broker-side dispatch-rate limit far below this range's size, an overloaded "
            "broker or bookie, or an encrypted topic read without its key. Raise 'pollTimeoutMs', check the topic's "
            "dispatch rate and the broker's health.")
