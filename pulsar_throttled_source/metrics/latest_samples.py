"""The latest samples of every query, shared by Spark's listener thread (which writes them) and the
exporters (a Prometheus scrape, an OpenTelemetry collection cycle: other threads, which read them)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .samples import LEVEL, ROWS_TOTAL, SOURCE, Sample

_LEVEL_METRICS = frozenset(LEVEL.values())
_HELD_BACK = LEVEL["heldBack"]
_ROWS = SOURCE["numInputRows"]


class MetricsState:
    """Per query the samples of its newest progress event, and the rows each source delivered in all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, dict[tuple[str, tuple[str, ...]], Sample]] = {}
        self._rows: dict[tuple[str, ...], float] = {}
        self._ended: set[str] = set()

    def update(self, samples: Iterable[Sample]) -> None:
        by_query: dict[str, list[Sample]] = {}
        for sample in samples:
            by_query.setdefault(sample.labels[0], []).append(sample)
        with self._lock:
            for query, new in by_query.items():
                self._ended.discard(query)  # restarted under the same id before a collection
                # A level that took no part in this trigger's plan (nothing planned: no backlog) held nothing
                # back; its window share and debt keep their last known values rather than vanishing.
                kept = {key: (s._replace(value=0.0) if s.metric is _HELD_BACK else s)
                        for key, s in self._queries.get(query, {}).items() if s.metric in _LEVEL_METRICS}
                kept.update({(s.metric.name, s.labels): s for s in new})
                self._queries[query] = kept
                for s in new:
                    if s.metric is _ROWS:
                        self._rows[s.labels] = self._rows.get(s.labels, 0.0) + s.value

    def drop(self, query: str) -> None:
        """A query ended: its series go (Prometheus's convention for what no longer exists), after one more
        collection, so a push exporter (OpenTelemetry's periodic reader, a flush) still sends its last values."""
        with self._lock:
            if query in self._queries:
                self._ended.add(query)

    def clear(self) -> None:
        with self._lock:
            self._queries.clear()
            self._rows.clear()
            self._ended.clear()

    def samples(self) -> list[Sample]:
        """Every query's samples, for one collection (a collection is what ends an ended query's series)."""
        with self._lock:
            current = [s for query in self._queries.values() for s in query.values()]
            current += [Sample(ROWS_TOTAL, labels, total) for labels, total in self._rows.items()]
            for query in self._ended:
                del self._queries[query]
                for labels in [k for k in self._rows if k[0] == query]:
                    del self._rows[labels]
            self._ended.clear()
            return current
