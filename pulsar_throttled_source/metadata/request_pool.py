"""Admin requests about several topics or partitions, a few in flight at once: at 100 topics, one after the other
is 100 round trips. The catalog's refreshes ask layouts and max read positions through one pool."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .admin_http import TopicNotFound

CONCURRENT_REQUESTS = 4  # admin requests in flight at once while refreshing (topics, max read positions)
T = TypeVar("T")
R = TypeVar("R")


class RequestPool:
    """fetch(item) for each item, CONCURRENT_REQUESTS at a time; its threads start at the first call of more than
    one item (a query of one topic never starts them)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def each(self, fetch: Callable[[T], R], items: Sequence[T]) -> list[R | TopicNotFound]:
        """fetch(item) for each item, in order; a TopicNotFound is returned in its item's place, any other error
        raised."""
        def one(item: T) -> R | TopicNotFound:
            try:
                return fetch(item)
            except TopicNotFound as e:
                return e
        if len(items) <= 1:
            return [one(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(CONCURRENT_REQUESTS, thread_name_prefix="pulsar-metadata")
        return list(self._pool.map(one, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
