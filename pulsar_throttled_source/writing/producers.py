"""Executor side: producers kept by the worker process across tasks and micro-batches (a producer costs a
broker round trip to open, and its batches fill better when it lives on), closed after an idle while.

One producer per (client, partition topic, settings), on the process's shared pulsar.Client (reading's
client cache: one connection pool for the reads and writes of a worker). A producer whose send failed is
closed and forgotten, so the task's retry starts from a fresh one. The cache pickles as a new, empty one
(as reading's client cache does: a package shipped by value carries this module's globals).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..read_task import ClientConfig
from ..reading.client_cache import client_for

log = logging.getLogger(__name__)

IDLE_EXPIRY_S = 60.0  # a producer unused this long is closed at the next task's start (Spark's idle workers live ~60 s)

Key = tuple[Any, ...]


class ProducerCache:
    def __init__(self, clock: Callable[[], float] = time.monotonic, idle_s: float = IDLE_EXPIRY_S) -> None:
        self._clock = clock
        self._idle_s = idle_s
        self._producers: dict[Key, tuple[Any, float]] = {}  # key -> (producer, last used)
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return ProducerCache, ()

    def producer(self, key: Key, create: Callable[[], Any]) -> Any:
        """The cached producer for `key`, else a new one from `create()`; producers idle past the expiry are closed."""
        now = self._clock()
        with self._lock:
            expired = [k for k, (_, used) in self._producers.items() if k != key and now - used > self._idle_s]
            closing = [self._producers.pop(k)[0] for k in expired]
            found = self._producers.get(key)
        _close(closing)
        producer = found[0] if found else create()
        with self._lock:
            self._producers[key] = (producer, now)
        return producer

    def touch(self, keys: list[Key]) -> None:
        """Mark producers used now (a task's end), so their idle time counts from their last send."""
        now = self._clock()
        with self._lock:
            for k in keys:
                if k in self._producers:
                    self._producers[k] = (self._producers[k][0], now)

    def drop(self, keys: list[Key]) -> None:
        with self._lock:
            gone = [self._producers.pop(k)[0] for k in keys if k in self._producers]
        _close(gone)

    def close_all(self) -> None:
        with self._lock:
            gone = [p for p, _ in self._producers.values()]
            self._producers.clear()
        _close(gone)

    def __len__(self) -> int:
        return len(self._producers)


def _close(producers: list[Any]) -> None:
    for p in producers:
        try:
            p.close()  # flushes what it still holds
        except Exception as e:  # a broken producer may fail to close; nothing else to do
            log.debug("closing a producer failed: %s", e)


_CACHE = ProducerCache()
atexit.register(_CACHE.close_all)  # a worker that ends normally closes its producers (everything sent was already flushed)


def producer_key(config: ClientConfig, destination: str, kwargs: tuple[tuple[str, Any], ...]) -> Key:
    return (config.cache_key(), destination, kwargs)


def producer_for(config: ClientConfig, destination: str, kwargs: tuple[tuple[str, Any], ...]) -> tuple[Key, Any]:
    """The worker's producer on `destination` (a partition topic, or a topic not partitioned)."""
    key = producer_key(config, destination, kwargs)
    return key, _CACHE.producer(key, lambda: client_for(config).create_producer(destination, **dict(kwargs)))


def done_with(keys: list[Key], failed: bool) -> None:
    """A task's end: its producers stay for the next task, or, after a failure, are closed and forgotten."""
    (_CACHE.drop if failed else _CACHE.touch)(keys)


def sender(producer: Any) -> Callable[[Any, int | None, Callable[..., None]], None]:
    """How a task sends one message (writing.message_columns.Message) on `producer`: pulsar.Producer.send_async's
    message building, without its per-call argument checks (a row's fields were checked by their column's type)
    where the client has the builder it wraps (every pulsar-client 3.x) and the producer's schema passes the bytes on
    (no schema, or a topic's declared by writing.payload_encoding: payloads come encoded); else send_async itself."""
    inner = getattr(producer, "_producer", None)
    builder = _message_builder()
    schema = getattr(producer, "_schema", None)
    if inner is None or builder is None or type(schema).__name__ not in _PASSING_BYTES:
        def send_async(m: Any, sequence_id: int | None, callback: Callable[..., None]) -> None:
            producer.send_async(m.value, callback, properties=m.properties, partition_key=m.key, ordering_key=m.ordering_key,
                                sequence_id=sequence_id, event_timestamp=m.event_time_ms)

        return send_async

    def send_built(m: Any, sequence_id: int | None, callback: Callable[..., None]) -> None:
        mb = builder()
        if m.value is None:
            mb.set_null_value()
        else:
            mb.content(m.value)
        if m.properties:
            for k, v in m.properties.items():
                mb.property(k, v)
        if m.key:
            mb.partition_key(m.key)
        if m.ordering_key:
            mb.ordering_key(m.ordering_key)
        if sequence_id:
            mb.sequence_id(sequence_id)
        if m.event_time_ms:
            mb.event_timestamp(m.event_time_ms)
        inner.send_async(mb.build(), callback)

    return send_built


_PASSING_BYTES = ("BytesSchema", "DeclaredSchema")  # schemas whose encode() returns the bytes it is given


def _message_builder() -> Any:
    try:
        import _pulsar
    except ImportError:
        return None
    return getattr(_pulsar, "MessageBuilder", None)


def partition_names(config: ClientConfig, topic: str) -> list[str]:
    """The topic's partitions as the broker lists them (the topic itself when not partitioned)."""
    return list(client_for(config).get_topic_partitions(topic))
