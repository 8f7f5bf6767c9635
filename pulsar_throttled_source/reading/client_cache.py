"""Executor side: one `pulsar.Client` per worker process, shared by its read tasks (Spark reuses
workers, and a client costs a connection handshake and threads), opening readers on it, and the
reader calls that ask the broker (retried while a topic's ownership moves).

A client that failed (the broker restarted, a connection broke) is dropped, so the next attempt
or Spark's retry of the task starts from a fresh one.

The cache pickles as a new, empty cache: a package shipped by
value (`cloudpickle.register_pickle_by_value`) carries this module's globals to every task, and a
lock or a client cannot be pickled. A copy shipped that way lives as long as its task and closes
its clients when it is collected.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..credentials import Credentials, scrub
from ..read_task import ClientConfig, PartitionRange
from ..retry import GaveUp, Outage, call_with_retries, client_error_transient
from .parked_readers import ParkedReaders
from .watch import unless_gone

if TYPE_CHECKING:
    from .native_reader import NativeReader

log = logging.getLogger(__name__)

MAX_RECEIVER_QUEUE = 10_000  # a deep queue keeps the broker streaming while a large range is converted
# The client drops the entry a reader starts after (an exclusive start) without giving its permit
# back (pulsar-client-cpp ConsumerImpl::messageReceived, "Ignoring message from before the
# startMessageId"): a queue of 1 would never be refilled. A reader started inclusively at its
# range's first entry drops nothing, and a queue of 1 serves it.
MIN_RECEIVER_QUEUE = 2
MIN_INCLUSIVE_QUEUE = 1
# An encrypted batch a reader cannot decrypt (cryptoFailureAction consume or discard) is handed over,
# or dropped, as one message, and gives one permit back for the batch's many: the broker must read
# the range while its first permits last, so such a reader keeps the range-deep queue it had
# before the read-ahead bound (ranges of at most 100 entries are read in one broker read).
UNDECRYPTED_MIN_QUEUE = 64
# The entries a broker reads for a reader at a time at most (dispatcherMaxReadBatchSize's default).
BROKER_READ_ENTRIES = 100
# What a long range's queue in messages may hold in flight (stored bytes): 10,000 messages of 100 B are 1 MB,
# of 10 kB 100 MB; it never goes below a queue of the range's entries (the bound before issue 44).
QUEUE_BYTES = 8 * 1024 * 1024


def receiver_queue_for(part: PartitionRange, inclusive: bool = False) -> int:
    """The permits a task's reader gives the broker, within [2 (1 for a reader started inclusively at its first
    entry), 10,000]: under quotas a sixteenth of its range's entries (read_ahead_share); unthrottled, its range's
    entries when one broker read brings them all, else its range's messages (its entries times the planner's
    messages per entry) as far as they fit in QUEUE_BYTES (never fewer than its entries).

    The broker counts permits in messages but reads min(permits, 100) entries at a time whatever they hold
    (PersistentDispatcherSingleActiveConsumer.getRestrictedMaxEntriesForConsumer, without the broker's
    preciseDispatcherFlowControl), sends them all, and reads again only once the reader's permits are positive:
    its messages in flight below the queue's size. What it read past the range's end is read again from the
    bookies by the next range's task unless that task finds this reader parked (the same worker process: about
    half the time under Spark). Under quotas a sixteenth of the range's entries bounds each read, so what it
    reads past the range to about 6 % of the entries a throttled query delivers (bench/README.md,
    "bookie_reads.py"). Unthrottled, a range of at most 100 entries arrives in one read of exactly its entries
    (a queue of its messages would have the broker read 100 entries past a small range: 5-6 dispatched per
    delivered message in batch_timeline.py's small batches); a longer one takes several reads, and a queue of
    its entries, on a batched topic far fewer messages than one read brings, let the broker read again only once
    the task had all but emptied it: the task waited on every read (issue 44: 628 messages per entry, ranges of
    200 entries, a queue in messages read the backlog 10-16 % faster). A chunked message needs no deeper queue:
    the client gives a permit back for each chunk it buffers (pulsar-client-cpp since 3.4; test_chunked reads
    messages of more chunks than the queue)."""
    cfg = part.config
    if cfg.crypto_failure_action != "fail":
        return max(UNDECRYPTED_MIN_QUEUE, min(MAX_RECEIVER_QUEUE, part.entries))
    floor = MIN_INCLUSIVE_QUEUE if inclusive else MIN_RECEIVER_QUEUE
    if cfg.read_ahead_share > 1:
        permits = math.ceil(part.entries / cfg.read_ahead_share)
    elif part.entries <= BROKER_READ_ENTRIES:
        permits = part.entries
    else:
        per_entry = max(1.0, part.msgs_per_entry)
        permits = math.ceil(part.entries * per_entry)
        if part.entry_bytes > 0:  # large messages: what the queue holds in flight stays within QUEUE_BYTES
            permits = max(part.entries, min(permits, math.ceil(QUEUE_BYTES / part.entry_bytes * per_entry)))
    return max(floor, min(MAX_RECEIVER_QUEUE, permits))


def python_client(config: ClientConfig) -> Any:
    """A pulsar.Client (the Python read path's)."""
    import pulsar

    kwargs = dict(config.client_kwargs)
    if config.credentials:  # the client's own plugin: its OAuth2 flow, a token file read at every authentication
        kwargs["authentication"] = client_authentication(config.credentials)
    kwargs.setdefault("logger", _quiet_logger())
    return pulsar.Client(config.service_url, **kwargs)


def client_authentication(credentials: Credentials) -> Any:
    """pulsar-client's own plugin for `credentials`. Its factory answers a name it does not know with no
    plugin at all (and a WARN), which would connect without credentials: refused here instead."""
    import pulsar

    authentication = pulsar.Authentication(credentials.plugin, credentials.client_params())
    if authentication.auth is None:
        raise RuntimeError(f"pulsar-client has no '{credentials.plugin}' authentication plugin (pulsar-client {pulsar.__version__}).")
    return authentication


class NativeClient:
    """A client of the native read path's library (closed like a pulsar.Client)."""

    def __init__(self, config: ClientConfig) -> None:
        from .native_library import native_library
        from .native_reader import create_client

        self.loaded = native_library()
        assert self.loaded.lib is not None, "the native read path was chosen without its library"
        self.handle: int | None = create_client(self.loaded.lib, config)

    def close(self) -> None:
        if self.handle is not None and self.loaded.lib is not None:
            handle, self.handle = self.handle, None
            self.loaded.lib.par_client_free(handle)


class ClientCache:
    """Clients by configuration, for one process (or one task, when shipped by value), made by
    `make` (a module-level function, so the cache pickles)."""

    def __init__(self, make: Callable[[ClientConfig], Any] = python_client) -> None:
        self._make = make
        self._clients: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()
        # Closed when a by-value copy is collected; at exit nothing is closed, as a process cache never was.
        weakref.finalize(self, _close_all, self._clients).atexit = False

    def __reduce__(self) -> tuple[type, tuple[Callable[[ClientConfig], Any]]]:
        return ClientCache, (self._make,)  # never a lock or a live client in a pickle

    def client(self, config: ClientConfig) -> Any:
        key = config.cache_key()
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._make(config)
                self._clients[key] = client
            return client

    def drop(self, config: ClientConfig) -> None:
        with self._lock:
            client = self._clients.pop(config.cache_key(), None)
        if client is not None:
            _close_all({"dropped": client})


def _close_all(clients: dict[Any, Any]) -> None:
    for client in list(clients.values()):
        try:
            client.close()
        except Exception:  # closing a broken client may fail; nothing else to do
            pass
    clients.clear()


_CACHE = ClientCache()
_NATIVE_CACHE = ClientCache(NativeClient)
_PARKED_NATIVE = ParkedReaders()


def reader_key(part: PartitionRange) -> tuple[Any, ...]:
    """What a parked reader must share with a task to carry on its read: the partition, the client,
    and the reader's own settings."""
    cfg = part.config
    return (part.partition, cfg.cache_key(), cfg.reader_kwargs, cfg.private_key_path, cfg.public_key_path,
            cfg.crypto_failure_action)


def park_native_reader(part: PartitionRange, reader: NativeReader) -> None:
    """Leave a reader that read exactly to its range's end open for the next range (parked_readers)."""
    _PARKED_NATIVE.park(reader_key(part), reader, part.end)


def client_for(config: ClientConfig) -> Any:
    """The worker process's shared pulsar.Client for this configuration."""
    return _CACHE.client(config)


def _quiet_logger() -> logging.Logger:
    """The C++ client logs every reader creation at INFO to stdout; keep task logs readable."""
    logger = logging.getLogger("pulsar_throttled_source.pulsar_client")
    logger.setLevel(logging.WARNING)
    return logger


def drop_client(config: ClientConfig) -> None:
    """Forget a client that failed (e.g. broker restarted) so the next task makes a new one."""
    _CACHE.drop(config)


def drop_native_client(config: ClientConfig) -> None:
    """drop_client for the native read path's clients (and the readers parked on them)."""
    client_key = config.cache_key()
    _PARKED_NATIVE.drop(lambda key: isinstance(key, tuple) and key[1] == client_key)
    _NATIVE_CACHE.drop(config)


def open_reader(part: PartitionRange, start_id: Any, gone: Callable[[], bool] | None = None, inclusive: bool = False) -> Any:
    """Open a reader on the task's partition at `start_id` (`inclusive`: delivering that entry, else
    from the one after it). While the broker is unreachable (e.g.
    restarting) retry on a fresh client for up to pollTimeoutMs (the policy in `retry`), so a task
    planned just before a broker restart waits for it instead of failing."""
    import pulsar

    cfg = part.config
    kwargs = {"receiver_queue_size": receiver_queue_for(part, inclusive), **dict(cfg.reader_kwargs)}
    if inclusive:
        kwargs["start_message_id_inclusive"] = True
    if cfg.private_key_path:
        kwargs["crypto_key_reader"] = pulsar.CryptoKeyReader(cfg.public_key_path or "", cfg.private_key_path)
    if cfg.private_key_path or cfg.crypto_failure_action != "fail":  # discard/consume apply without a key too
        kwargs["crypto_failure_action"] = getattr(pulsar.ConsumerCryptoFailureAction, cfg.crypto_failure_action.upper())

    return _open_with_retries(part, lambda: client_for(cfg).create_reader(part.partition, start_id, **kwargs), drop_client, gone)


def open_native_reader(part: PartitionRange, start_id: bytes | None, gone: Callable[[], bool] | None = None,
                       inclusive: bool = False) -> NativeReader:
    """open_reader for the native read path: `start_id` serialized (None: the earliest)."""
    from .native_library import native_library
    from .native_reader import NativeReader

    cfg = part.config
    parked = _PARKED_NATIVE.take(reader_key(part), part.start)
    if parked is not None:
        if parked.loaded_from is native_library():
            parked.ended_exactly = False
            return parked  # positioned right after this range's exclusive start, its queue read ahead
        parked.close()  # made by another build of the library (tests load several)

    def attempt() -> NativeReader:
        client = _NATIVE_CACHE.client(cfg)
        if client.loaded is not native_library():  # made by another build of the library (tests load several)
            drop_native_client(cfg)
            client = _NATIVE_CACHE.client(cfg)
        return NativeReader.open(client.loaded, client.handle, cfg, part.partition, start_id,
                                 receiver_queue_for(part, inclusive), inclusive)

    return _open_with_retries(part, attempt, drop_native_client, gone)


def _open_with_retries(part: PartitionRange, open_once: Callable[[], Any], drop: Callable[[ClientConfig], None],
                       gone: Callable[[], bool] | None) -> Any:
    from .errors import PartitionDeleted

    cfg = part.config

    def attempt() -> Any:
        try:
            return open_once()
        except Exception:
            drop(cfg)  # the next attempt, or Spark's retry of this task, starts from a fresh client
            raise

    def log_retry(error: BaseException, attempt: int, delay: float) -> None:
        log.warning("Cannot open a reader on %s at %s (%s); retry %d in %.1f s (waiting up to pollTimeoutMs=%d ms)",
                    part.partition, cfg.service_url, type(error).__name__, attempt, delay, cfg.poll_timeout_ms)

    gave_up = ""
    try:
        return call_with_retries(unless_gone(attempt, gone), Outage(cfg.poll_timeout_ms / 1000.0, from_now=True),
                                 client_error_transient, log_retry)
    except PartitionDeleted:
        raise
    except GaveUp as e:
        error: BaseException = e.last
        gave_up = f" Gave up after retrying for {cfg.poll_timeout_ms} ms (option 'pollTimeoutMs')."
    except Exception as e:
        error = e
    import pulsar

    if isinstance(error, pulsar.AuthorizationError):
        raise RuntimeError(f"Cannot open a reader on {part.partition} at {cfg.service_url}: the role of the query's credentials "
                           "may not read it. A reader needs 'consume' on the topic or its namespace (pulsar-admin namespaces "
                           "grant-permission --role <role> --actions consume <tenant>/<namespace>).") from None
    raise RuntimeError(f"Cannot open a reader on {part.partition} at {cfg.service_url}: {scrub(str(error), cfg.credentials)}. "
                       f"Check option 'service.url' (the broker's pulsar://host:port or pulsar+ssl://host:port){_tls_hint(cfg)} and, "
                       "if the broker requires authentication, 'pulsar.client.authPluginClassName' and "
                       f"'pulsar.client.authParams'.{gave_up}") from None


def _tls_hint(cfg: ClientConfig) -> str:
    """For a TLS service URL: the options that decide whether its certificate is trusted."""
    if not cfg.service_url.startswith("pulsar+ssl://"):
        return ""
    return (", 'pulsar.client.tlsTrustCertsFilePath' (the CA that signed the broker's certificate; "
            "'pulsar.client.tlsValidateHostname=false' if the certificate does not name the host)")


def has_message_available(reader: Any, part: PartitionRange, gone: Callable[[], bool] | None = None) -> bool:
    """`reader.has_message_available()`, which asks the broker for the partition's last message id.
    While the topic's ownership moves (an unload, load shedding, a restart) the broker answers it
    with errors such as BrokerMetadataError ("Consumer not found") until the reader has reconnected
    by itself, so those are retried within pollTimeoutMs, as opening a reader is."""
    cfg = part.config

    def log_retry(error: BaseException, attempt: int, delay: float) -> None:
        log.warning("Reading %s: the broker did not say whether messages are left (%s; its ownership may be moving); "
                    "retry %d in %.1f s (waiting up to pollTimeoutMs=%d ms)", part.partition, type(error).__name__,
                    attempt, delay, cfg.poll_timeout_ms)

    try:
        return bool(call_with_retries(unless_gone(reader.has_message_available, gone, watch=False),
                                      Outage(cfg.poll_timeout_ms / 1000.0, from_now=True), client_error_transient, log_retry))
    except GaveUp as e:
        raise RuntimeError(f"Reading {part.partition}: the broker at {cfg.service_url} did not say whether messages are left "
                           f"({type(e.last).__name__}: {e.last}) for pollTimeoutMs={cfg.poll_timeout_ms} ms of retries. "
                           "Check the broker's health, or raise 'pollTimeoutMs'.") from None
