"""Executor side: readers left open where their range ended, for the next micro-batch's task on the
same partition to carry on from.

A reader asks the broker for as many entries as its receiver queue holds, and the broker reads them
from the bookies once they are out of its cache; a task that closes its reader at the end of its
range throws away what was read past it, and the next task has the broker read it again (most of
what throttled queries cost BookKeeper beyond the entries they deliver: bench/bookie_reads.py). A
reader that ended exactly after its range's last entry is parked here instead, and a task whose
range starts there, in the same worker process, reads on from its queue.

A parked reader is closed when another reader of its partition is parked, when a task of its
partition starts anywhere else, when MAX_PARKED are parked, or when it has waited PARK_S (a timer):
it holds a consumer on the topic, and a topic with consumers cannot be deleted without force, so a
stopped query's readers must not outlive it by long.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from ..positions import EntryPosition

PARK_S = 10.0  # a throttled query's next micro-batch usually comes sooner (its next quota window)
MAX_PARKED = 64  # per process: each holds its receiver queue and a cursor on the broker


class ParkedReaders:
    """Readers by (partition, reader settings), each with the position its range ended at."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, timers: bool = True) -> None:
        self._clock = clock
        self._timers = timers  # False in tests driving the clock by hand
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None  # one per cache, while readers are parked
        self._parked: dict[Hashable, tuple[Any, EntryPosition, float]] = {}
        weakref.finalize(self, _close_all, self._parked).atexit = False

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return ParkedReaders, ()  # shipped by value: a new, empty one (never a lock or a live reader)

    def park(self, key: Hashable, reader: Any, ended_at: EntryPosition) -> None:
        now = self._clock()
        with self._lock:
            closing = [self._parked.pop(key)[0]] if key in self._parked else []
            closing += self._expired(now)
            self._parked[key] = (reader, ended_at, now)
            while len(self._parked) > MAX_PARKED:
                closing.append(self._parked.pop(next(iter(self._parked)))[0])  # the longest parked
            if self._timers and self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep_until_empty, name="pulsar-parked-readers", daemon=True)
                self._sweeper.start()
        _close(closing)

    def _sweep_until_empty(self) -> None:
        """The timer: closes each reader once it has waited PARK_S, and ends when none is parked (a
        thread per park would be several per partition and second at a throttled query's pace)."""
        while True:
            with self._lock:
                if not self._parked:
                    self._sweeper = None
                    return
                oldest = min(since for _, _, since in self._parked.values())
            time.sleep(max(0.01, oldest + PARK_S - self._clock()))
            self.sweep()

    def sweep(self) -> None:
        """Close the readers parked for PARK_S or longer."""
        with self._lock:
            closing = self._expired(self._clock())
        _close(closing)

    def take(self, key: Hashable, start: EntryPosition) -> Any | None:
        """The reader parked for `key` if its range ended at `start`; any other is closed."""
        now = self._clock()
        with self._lock:
            parked = self._parked.pop(key, None)
            closing = self._expired(now)
        if parked is not None and parked[1] == start and now - parked[2] < PARK_S:
            _close(closing)
            return parked[0]
        _close(closing + ([parked[0]] if parked is not None else []))
        return None

    def drop(self, belongs: Callable[[Hashable], bool]) -> None:
        """Close the parked readers whose key `belongs` (their client is being dropped)."""
        with self._lock:
            closing = [self._parked.pop(key)[0] for key in [k for k in self._parked if belongs(k)]]
        _close(closing)

    def __len__(self) -> int:
        return len(self._parked)

    def _expired(self, now: float) -> list[Any]:
        old = [key for key, (_, _, since) in self._parked.items() if now - since >= PARK_S]
        return [self._parked.pop(key)[0] for key in old]


def _close(readers: list[Any]) -> None:
    for reader in readers:
        try:
            reader.close()
        except Exception:  # a reader on a broken connection may fail to close; nothing else to do
            pass


def _close_all(parked: dict[Hashable, tuple[Any, EntryPosition, float]]) -> None:
    _close([reader for reader, _, _ in parked.values()])
    parked.clear()
