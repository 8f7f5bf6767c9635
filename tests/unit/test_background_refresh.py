"""BackgroundRefresh: a planning call gets the newest value without waiting on a slow fetch, the
value stays within one interval plus one fetch of fresh while calls keep coming, the thread stops
when they stop, and a failed background fetch surfaces from the next call. The refresh thread is
real; time is not: the test moves it (FakeClock), and synchronises on what the thread does (a fetch
started, the thread waiting for a time, the thread ended), never on sleeps."""

from __future__ import annotations

import queue
import threading

import pytest
from fakes import SAFETY_S, FakeClock
from helpers import wait_until

from pulsar_throttled_source.metadata.background_refresh import BackgroundRefresh


def running(name: str) -> bool:
    """Whether the refresh thread of that name runs."""
    return any(thread.name == name for thread in threading.enumerate())


def settle(clock: FakeClock, name: str) -> None:
    """Until the refresh thread waits on the clock again, or has ended."""
    wait_until(lambda: clock.sleeping or not running(name), SAFETY_S, interval_s=0.001, what="the refresh thread to wait or end")


class SlowSource:
    """Counts its fetches, each taking `seconds` of the test's time: a call made by the test itself
    waits it out (the clock moves on), one in the refresh thread runs until the test lets it finish
    (finish). Fails while `failing` is set."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds
        self.fetches = 0
        self.failing = False
        self.caller = threading.current_thread()
        self.started: queue.Queue[float] = queue.Queue()  # when each slow background fetch started
        self.finish = threading.Semaphore(0)
        self.background: queue.Queue[threading.Thread] = queue.Queue()  # the thread of each background fetch
        self.lock = threading.Lock()

    def __call__(self, started: float) -> tuple[int, float]:
        if threading.current_thread() is self.caller:
            self.clock.advance(self.seconds)
        else:
            self.background.put(threading.current_thread())
            if self.seconds:
                self.started.put(started)
                assert self.finish.acquire(timeout=SAFETY_S), "the test never let the fetch finish"
        with self.lock:
            if self.failing:
                raise ConnectionError("broker down")
            self.fetches += 1
            return self.fetches, started


def test_calls_get_the_newest_value_at_once_while_a_slow_fetch_runs_behind_them():
    clock = FakeClock(0.0)
    source = SlowSource(clock, 0.3)
    refresh = BackgroundRefresh(source, 0.2, "refresh-behind-calls", clock=clock, wait_until=clock.wait_until)
    try:
        first = refresh.get()  # nothing yet: the first call waits
        assert first[0] == 1
        waits, values = [], []
        fetching: float | None = None  # when the background fetch under way started
        end = clock.now + 2.0
        while clock.now < end:  # a planner polling every 50 ms
            t0 = clock.now
            values.append(refresh.get())
            waits.append(clock.now - t0)
            if fetching is None and running("refresh-behind-calls"):
                fetching = source.started.get(timeout=SAFETY_S)
            clock.advance(0.05)
            if fetching is not None and clock.now >= fetching + source.seconds - 1e-9:  # the broker answers
                source.finish.release()
                fetching = source.started.get(timeout=SAFETY_S)  # the next one at once: each outlasts the interval
        assert max(waits) < 0.05, waits  # never waited for a 300 ms fetch
        assert values[-1][0] >= 4  # refreshed meanwhile (back to back: each fetch outlasts the interval)
        ages = [clock.now - v[1] for v in [refresh.get()]]
        assert ages[0] < 0.2 + 2 * 0.3 + 0.1  # within an interval and a fetch (and the one under way)
    finally:
        refresh.stop()
        source.finish.release()


def test_the_thread_stops_when_calls_stop_and_a_late_call_waits_for_fresh_data():
    clock = FakeClock(0.0)
    source = SlowSource(clock, 0.0)
    refresh = BackgroundRefresh(source, 0.1, "refresh-that-stops", clock=clock, wait_until=clock.wait_until)
    try:
        refresh.get()
        clock.advance(0.15)
        refresh.get()  # stale: starts the thread, answers the value it has
        clock.wait_for_sleeper()  # the thread fetched, and waits for the next interval
        for _ in range(15):  # nobody asks for 1.5 s: time passes, an interval at a time
            clock.advance(0.1)
            settle(clock, "refresh-that-stops")  # the thread fetched again and waits, or it ended
        stopped_at = source.fetches
        clock.advance(0.5)
        # Nobody asked: it stopped, after fetching about interval + slack's worth (0.6 s of 0.1 s intervals).
        assert not running("refresh-that-stops") and source.fetches == stopped_at <= 10
        value, started = refresh.get()  # far older than the thread would have let it be: fetched now
        assert value == stopped_at + 1 and clock.now - started < 0.1
    finally:
        refresh.stop()


def test_a_failed_background_fetch_surfaces_from_the_next_call_and_a_recovery_clears_it():
    clock = FakeClock(0.0)
    source = SlowSource(clock, 0.0)
    refresh = BackgroundRefresh(source, 0.1, "test-refresh", clock=clock, wait_until=clock.wait_until)
    try:
        refresh.get()
        source.failing = True
        clock.advance(0.12)
        refresh.get()  # stale: the background fetch fails
        thread = source.background.get(timeout=SAFETY_S)
        thread.join(timeout=SAFETY_S)  # the thread records the failure and ends
        assert not thread.is_alive()
        with pytest.raises(ConnectionError, match="broker down"):
            refresh.get()
        source.failing = False
        assert refresh.get()[0] == 2
    finally:
        refresh.stop()


def test_force_and_a_zero_interval_fetch_on_the_call():
    source = SlowSource(FakeClock(0.0), 0.0)
    refresh = BackgroundRefresh(source, 0.0, "test-refresh")
    assert [refresh.get()[0] for _ in range(3)] == [1, 2, 3]
    timed = BackgroundRefresh(source, 60.0, "test-refresh")
    assert timed.get()[0] == 4 and timed.get()[0] == 4 and timed.get(force=True)[0] == 5
