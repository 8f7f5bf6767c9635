"""Executor side: what a worker process keeps between its read tasks: one client per configuration and read
path (Spark reuses workers, and a client costs a connection handshake and threads; made by client_factories),
and the native readers parked where their range ended (parked_readers), dropped with their client.

A client that failed (the broker restarted, a connection broke) is dropped, so the next attempt
or Spark's retry of the task starts from a fresh one.

The cache pickles as a new, empty cache: a package shipped by
value (`cloudpickle.register_pickle_by_value`) carries this module's globals to every task, and a
lock or a client cannot be pickled. A copy shipped that way lives as long as its task and closes
its clients when it is collected.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..read_task import ClientConfig, PartitionRange
from .client_factories import NativeClient, python_client
from .parked_readers import ParkedReaders

if TYPE_CHECKING:
    from .native_reader import NativeReader


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


def client_for(config: ClientConfig) -> Any:
    """The worker process's shared pulsar.Client for this configuration."""
    return _CACHE.client(config)


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


def reader_key(part: PartitionRange) -> tuple[Any, ...]:
    """What a parked reader must share with a task to carry on its read: the partition, the client,
    and the reader's own settings."""
    cfg = part.config
    return (part.partition, cfg.cache_key(), cfg.reader_kwargs, cfg.private_key_path, cfg.public_key_path,
            cfg.crypto_failure_action)


def park_native_reader(part: PartitionRange, reader: NativeReader) -> None:
    """Leave a reader that read exactly to its range's end open for the next range (parked_readers)."""
    _PARKED_NATIVE.park(reader_key(part), reader, part.end)


def take_parked_native_reader(part: PartitionRange) -> NativeReader | None:
    """A reader parked where this range starts, by the library loaded now; None if there is none."""
    from .native_library import native_library

    parked = _PARKED_NATIVE.take(reader_key(part), part.start)
    if parked is None:
        return None
    if parked.loaded_from is native_library():
        parked.ended_exactly = False
        return parked  # positioned right after this range's exclusive start, its queue read ahead
    parked.close()  # made by another build of the library (tests load several)
    return None
