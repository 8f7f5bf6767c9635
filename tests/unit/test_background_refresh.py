"""BackgroundRefresh: a planning call gets the newest value without waiting on a slow fetch, the
value stays within one interval plus one fetch of fresh while calls keep coming, the thread stops
when they stop, and a failed background fetch surfaces from the next call. Real time, short
intervals (the thread waits on a real clock)."""

from __future__ import annotations

import threading
import time

import pytest

from pulsar_throttled_source.metadata.background_refresh import BackgroundRefresh


class SlowSource:
    """Counts its fetches; each takes `seconds`; fails while `failing` is set."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fetches = 0
        self.failing = False
        self.lock = threading.Lock()

    def __call__(self, started: float) -> tuple[int, float]:
        time.sleep(self.seconds)
        with self.lock:
            if self.failing:
                raise ConnectionError("broker down")
            self.fetches += 1
            return self.fetches, started


def test_calls_get_the_newest_value_at_once_while_a_slow_fetch_runs_behind_them():
    source = SlowSource(0.3)
    refresh = BackgroundRefresh(source, 0.2, "test-refresh")
    try:
        first = refresh.get()  # nothing yet: the first call waits
        assert first[0] == 1
        waits, values = [], []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # a planner polling every 50 ms
            t0 = time.monotonic()
            values.append(refresh.get())
            waits.append(time.monotonic() - t0)
            time.sleep(0.05)
        assert max(waits) < 0.05, waits  # never waited for a 300 ms fetch
        assert values[-1][0] >= 4  # refreshed meanwhile (back to back: each fetch outlasts the interval)
        ages = [time.monotonic() - v[1] for v in [refresh.get()]]
        assert ages[0] < 0.2 + 2 * 0.3 + 0.1  # within an interval and a fetch (and the one under way)
    finally:
        refresh.stop()


def test_the_thread_stops_when_calls_stop_and_a_late_call_waits_for_fresh_data():
    source = SlowSource(0.01)
    refresh = BackgroundRefresh(source, 0.1, "test-refresh")
    try:
        refresh.get()
        time.sleep(0.15)
        refresh.get()  # stale: starts the thread, answers the value it has
        time.sleep(1.5)
        stopped_at = source.fetches
        time.sleep(0.5)
        # Nobody asked: it stopped, after fetching about interval + slack's worth (0.6 s of 0.1 s intervals).
        assert source.fetches == stopped_at <= 10
        value, started = refresh.get()  # far older than the thread would have let it be: fetched now
        assert value == stopped_at + 1 and time.monotonic() - started < 0.1
    finally:
        refresh.stop()


def test_a_failed_background_fetch_surfaces_from_the_next_call_and_a_recovery_clears_it():
    source = SlowSource(0.01)
    refresh = BackgroundRefresh(source, 0.1, "test-refresh")
    try:
        refresh.get()
        source.failing = True
        time.sleep(0.12)
        refresh.get()  # stale: the background fetch fails
        time.sleep(0.2)
        with pytest.raises(ConnectionError, match="broker down"):
            refresh.get()
        source.failing = False
        assert refresh.get()[0] == 2
    finally:
        refresh.stop()


def test_force_and_a_zero_interval_fetch_on_the_call():
    source = SlowSource(0.0)
    refresh = BackgroundRefresh(source, 0.0, "test-refresh")
    assert [refresh.get()[0] for _ in range(3)] == [1, 2, 3]
    timed = BackgroundRefresh(source, 60.0, "test-refresh")
    assert timed.get()[0] == 4 and timed.get()[0] == 4 and timed.get(force=True)[0] == 5
