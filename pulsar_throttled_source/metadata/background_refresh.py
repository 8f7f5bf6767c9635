"""A value fetched again every interval in a daemon thread while it is asked for, so the asker
(a planning call) gets the newest complete value at once instead of waiting on the broker.

At 1,000 partitions one refresh of the catalog takes the broker seconds to answer: waited for on
every trigger, it was the plan's whole cost. Freshness stays bounded: while planning calls keep
coming, the value is at most one interval plus one fetch old. When they stop (a long trigger
interval, a paused query) the thread stops after one more fetch, and the next call that finds the
value older than the thread would have let it grow waits for a fresh one, as a first call does.
A failed background fetch is not reported from the thread: the next call fetches itself, so the
error (after the admin layer's retries) surfaces from a planning call, with its own message.
The clock and the thread's way of waiting for a time are injectable, so tests move time themselves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
# Called holding the condition, as Condition.wait is: returns by the deadline (a time of the clock),
# or earlier when the condition is notified (a fetch done, stop()).
WaitUntil = Callable[[threading.Condition, float], object]
STALE_SLACK_S = 0.5  # what a value may be older than the thread keeps it before a call waits for a fresh one


class BackgroundRefresh(Generic[T]):
    def __init__(self, fetch: Callable[[float], T], interval_s: float, name: str,
                 clock: Callable[[], float] = time.monotonic, in_background: bool = True,
                 wait_until: WaitUntil | None = None) -> None:
        self._fetch = fetch  # called with the time it starts (a snapshot records it)
        self._interval = interval_s
        self._in_background = in_background  # False: a stale value is fetched again by the call (fake clocks)
        self._name = name
        self._clock = clock
        self._wait_until = wait_until or self._wait_real
        self._state = threading.Condition()  # guards the fields below
        self._fetching = threading.Lock()  # one fetch at a time, from the thread or a waiting call
        self._value: T | None = None
        self._fetched_at = 0.0  # when the fetch that made `_value` started
        self._fetch_s = 0.0  # how long the last fetch took
        self._asked_at = 0.0
        self._thread: threading.Thread | None = None
        self._failed = False  # the last background fetch failed: the next call fetches itself
        self._stopped = False

    def get(self, force: bool = False) -> T:
        """The newest value; fetched now when forced, when there is none, or when it is older than a
        running refresh would let it be."""
        now = self._clock()
        with self._state:
            self._asked_at = now
            value, fetched_at, failed = self._value, self._fetched_at, self._failed
            waited_for = now - fetched_at > self._interval + 2 * self._fetch_s + STALE_SLACK_S
        if force or value is None or failed or self._interval <= 0:
            return self._fetch_now(None)
        if now - fetched_at < self._interval:
            return value
        if not self._in_background:
            return self._fetch_now(None)
        self._start_thread()
        if waited_for:
            return self._fetch_now(fetched_at)
        return value

    def _fetch_now(self, unless_newer_than: float | None) -> T:
        with self._fetching:
            with self._state:
                if unless_newer_than is not None and self._value is not None and self._fetched_at > unless_newer_than:
                    return self._value  # the thread fetched while this call waited for it
            started = self._clock()
            value = self._fetch(started)
            with self._state:
                self._value, self._fetched_at, self._fetch_s = value, started, self._clock() - started
                self._failed = False
                self._state.notify_all()
            return value

    def _start_thread(self) -> None:
        with self._state:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._state:
                while not self._stopped and self._clock() < (due := self._fetched_at + self._interval):
                    self._wait_until(self._state, due)
                # Nobody asked since about the last fetch: the query paused; stop until it asks again.
                idle = self._clock() - self._asked_at > self._interval + self._fetch_s + STALE_SLACK_S
                if self._stopped or idle:
                    self._thread = None
                    self._state.notify_all()  # whoever waits for the thread to end (tests)
                    return
            try:
                self._fetch_now(None)
            except Exception:
                with self._state:
                    self._failed, self._thread = True, None
                    self._state.notify_all()
                return

    def _wait_real(self, condition: threading.Condition, deadline: float) -> None:
        condition.wait(deadline - self._clock())

    def stop(self) -> None:
        with self._state:
            self._stopped = True
            self._state.notify_all()
