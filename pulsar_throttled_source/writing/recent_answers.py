"""What this process last learnt from the broker about a topic, trusted for a while: Spark asks for a stream's writer
twice per micro-batch (to plan it and to commit it), and every task of a topic column checks its topics, so the
driver's and each worker's checks would otherwise ask the admin API again and again for an answer that rarely
changes (a topic's deduplication, its schema)."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class RecentAnswers(Generic[K, V]):
    """Answers per key with the time they were learnt (any clock, the caller's). Thread-safe."""

    def __init__(self) -> None:
        self._answers: dict[K, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K, now: float, max_age_s: float) -> V | None:
        """The answer learnt less than `max_age_s` before `now`, else None."""
        with self._lock:
            learnt = self._answers.get(key)
        return learnt[1] if learnt is not None and now - learnt[0] < max_age_s else None

    def put(self, key: K, now: float, answer: V) -> None:
        with self._lock:
            self._answers[key] = (now, answer)
