"""Executor side: the broker's answers to one write task's sends, counted as they come (on the client's threads), and
the pace at which the task sends: no more in flight than the broker confirmed lately (writing.write_task sends)."""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

MIN_IN_FLIGHT = 10  # sends a task may always have in flight (a slow broker's pace is learnt from their answers)


class Confirmations:
    """The broker's answers to a task's sends (they arrive on the client's threads), and how many sends may be in
    flight. pulsar-client counts a send's timeout from when it enters the producer's queue, so a queue that drains
    slowly (the broker throttling publishes: its publish-rate policy) would time sends out, a thousand messages
    (maxPendingMessages' default) at 10 a second timing out 30 s sends. So a task keeps in flight no more than the
    broker confirmed in the last quarter of the send timeout (at least MIN_IN_FLIGHT): a send waits its turn in the
    task, not in the producer's queue, about a quarter of the timeout at most.

    Cheap per send: the task's thread counts its sends without the lock, and checks the pace without it too while
    fewer are in flight than a bound it took with the lock (the confirmations that stay within the window for the
    next eighth of it); a callback takes the lock to count, and notifies only while the task waits."""

    def __init__(self, send_timeout_s: float = 0.0, clock: Callable[[], float] = time.monotonic, held: Any = None) -> None:
        self._done = threading.Condition()
        self._held = held  # effectivelyOnce's batch_cuts.TaskCuts: rows in batches not cut yet wait for the task, not the broker
        self.sent = 0  # the task's thread's only
        self.answered = 0
        self.confirmed: Counter[str] = Counter()
        self.error: tuple[str, Any] | None = None  # (destination, pulsar.Result) of the first failed send
        self._waiting = False
        self._clock = clock
        self._window_s = send_timeout_s / 4
        self._recent: deque[float] = deque()  # when each confirmation within the last window came
        self._allowed, self._allowed_until = MIN_IN_FLIGHT, float("-inf")  # the bound, and until when it holds

    @property
    def pending(self) -> int:
        return self.sent - self.answered

    def sending(self) -> None:
        """Count a send (the task's thread), once fewer are in flight than the pace allows (or a send failed)."""
        if self._window_s and (self._in_flight() >= self._allowed or self._clock() >= self._allowed_until):
            self._pace()
        self.sent += 1

    def _pace(self) -> None:
        with self._done:
            self._waiting = True
            self._done.wait_for(lambda: self._in_flight() < self.in_flight_allowed() or self.error is not None)
            self._waiting = False
            now, margin = self._clock(), self._window_s / 8
            staying = len(self._recent) - bisect_right(self._recent, now - self._window_s + margin)
            self._allowed, self._allowed_until = max(MIN_IN_FLIGHT, staying), now + margin

    def _in_flight(self) -> int:
        """Sends the broker has not answered, less those in batches not cut yet (they wait for the task's next rows)."""
        return self.sent - self.answered - (self._held.held if self._held is not None else 0)

    def in_flight_allowed(self) -> int:
        """Confirmations within the last window (at least MIN_IN_FLIGHT); the caller holds the lock or is alone."""
        since = self._clock() - self._window_s
        while self._recent and self._recent[0] < since:
            self._recent.popleft()
        return max(MIN_IN_FLIGHT, len(self._recent))

    def callback(self, destination: str) -> Any:
        """The send callback for `destination` (made once per destination and task)."""
        done, confirmed, ok = self._done, self.confirmed, _OK
        recent, clock = self._recent if self._window_s else None, self._clock

        def answered(result: Any, _message_id: Any) -> None:
            with done:
                self.answered += 1
                if result == ok:
                    confirmed[destination] += 1
                    if recent is not None:
                        recent.append(clock())
                elif self.error is None:
                    self.error = (destination, result)
                if self._waiting:
                    done.notify_all()

        return answered

    def wait(self, timeout_s: float | None) -> bool:
        """Until every send is answered; after a failed send, every send but those in effectivelyOnce batches not cut
        yet: a failed task never flushes them (a cut elsewhere than the rule's would break the retry's skip)."""
        with self._done:
            self._waiting = True
            return self._done.wait_for(lambda: (self.pending if self.error is None else self._in_flight()) <= 0, timeout_s)


def _ok_result() -> Any:
    import pulsar

    return pulsar.Result.Ok


_OK = _ok_result()
