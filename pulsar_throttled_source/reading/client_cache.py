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
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..credentials import Credentials, scrub
from ..read_task import ClientConfig, PartitionRange
from ..retry import GaveUp, Outage, call_with_retries, client_error_transient
from .parked_readers import ParkedReaders
from .receiver_queue import receiver_queue_for
from .watch import unless_gone

if TYPE_CHECKING:
    from .native_reader import NativeReader

log = logging.getLogger(__name__)

def python_client(config: ClientConfig) -> Any:
    """A pulsar.Client (the Python read path's)."""
    import pulsar

    client = config.client_settings()
    kwargs = dict(client.settings)
    if client.auth:  # the client's own plugin: its OAuth2 flow, a token file read at every authentication
        kwargs["authentication"] = _plugin(*client.auth)
    kwargs.setdefault("logger", _quiet_logger())
    return pulsar.Client(client.service_url, **kwargs)


def client_authentication(credentials: Credentials) -> Any:
    """pulsar-client's own plugin for `credentials`."""
    return _plugin(credentials.plugin, credentials.client_params())


def _plugin(name: str, params: str) -> Any:
    # pulsar-client's factory answers a name it does not know with no plugin at all (and a WARN), which
    # would connect without credentials: refused here instead.
    import pulsar

    authentication = pulsar.Authentication(name, params)
    if authentication.auth is None:
        raise RuntimeError(f"pulsar-client has no '{name}' authentication plugin (pulsar-client {pulsar.__version__}).")
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


def _quiet_logger() -> Any:
    """The client's own console logger at WARN: the C++ client logs every reader creation at INFO, and with a Python
    logger every line of every level (two DEBUG lines per message sent) is formatted and handed to Python, where a
    logger's level drops it only then (a third of a write task's CPU); this one drops them where they are made."""
    import pulsar

    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


def native_client_for(config: ClientConfig) -> NativeClient:
    """The worker process's shared native client (the native read path's; the sink's native sender's too)."""
    return _NATIVE_CACHE.client(config)


def drop_client(config: ClientConfig) -> None:
    """Forget a client that failed (e.g. broker restarted) so the next task makes a new one."""
    _CACHE.drop(config)


def drop_native_client(config: ClientConfig) -> None:
    """drop_client for the native read path's clients (and the readers parked on them)."""
    client_key = config.cache_key()
    _PARKED_NATIVE.drop(lambda key: isinstance(key, tuple) and key[1] == client_key)
    _NATIVE_CACHE.drop(config)


def close_reader(reader: Any, failed: bool) -> None:
    """Close a reader of either path; after a failed read (broker gone longer than pollTimeoutMs, a broken
    connection) closing may fail too, and the caller drops the client anyway."""
    try:
        reader.close()
    except Exception:
        if not failed:
            raise


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
    from .read_errors import PartitionDeleted

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
