"""Readers parked at the end of their range for the next range's task (reading/parked_readers.py),
on fake readers and a fake clock."""

from __future__ import annotations

import pickle
import time

from fakes import FakeClock, FakeReader

import pulsar_throttled_source.reading.parked_readers as module
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.reading.parked_readers import MAX_PARKED, PARK_S, ParkedReaders


def test_a_reader_is_taken_by_the_range_that_starts_where_it_ended_and_closed_for_any_other():
    clock = FakeClock(0.0)
    parked = ParkedReaders(clock, timers=False)
    first, second = FakeReader(), FakeReader()
    parked.park("p0", first, EntryPosition(5, 9))
    assert parked.take("p0", EntryPosition(5, 9)) is first and not first.closed
    assert parked.take("p0", EntryPosition(5, 9)) is None  # taken once
    parked.park("p0", second, EntryPosition(5, 19))
    assert parked.take("p0", EntryPosition(5, 9)) is None and second.closed  # a restart elsewhere: closed
    assert parked.take("p1", EntryPosition(5, 9)) is None


def test_a_newer_reader_of_the_same_partition_replaces_the_parked_one():
    parked = ParkedReaders(FakeClock(0.0), timers=False)
    old, new = FakeReader(), FakeReader()
    parked.park("p0", old, EntryPosition(5, 9))
    parked.park("p0", new, EntryPosition(5, 19))
    assert old.closed and len(parked) == 1
    assert parked.take("p0", EntryPosition(5, 19)) is new


def test_readers_parked_too_long_or_too_many_are_closed():
    clock = FakeClock(0.0)
    parked = ParkedReaders(clock, timers=False)
    stale = FakeReader()
    parked.park("stale", stale, EntryPosition(1, 1))
    clock.now = PARK_S
    parked.sweep()
    assert stale.closed and len(parked) == 0
    readers = [FakeReader() for _ in range(MAX_PARKED + 1)]
    for i, reader in enumerate(readers):
        parked.park(f"p{i}", reader, EntryPosition(1, i))
    assert readers[0].closed and not any(r.closed for r in readers[1:]) and len(parked) == MAX_PARKED
    clock.now += PARK_S - 1
    assert parked.take("p1", EntryPosition(1, 1)) is readers[1]  # in time
    clock.now += 1
    assert parked.take("p2", EntryPosition(1, 2)) is None and readers[2].closed  # too late


def test_dropping_a_client_closes_its_parked_readers_and_a_pickle_carries_none():
    parked = ParkedReaders(FakeClock(0.0), timers=False)
    mine, other = FakeReader(), FakeReader()
    parked.park(("p0", "client-a"), mine, EntryPosition(1, 1))
    parked.park(("p0", "client-b"), other, EntryPosition(1, 1))
    parked.drop(lambda key: key[1] == "client-a")
    assert mine.closed and not other.closed
    assert len(pickle.loads(pickle.dumps(parked))) == 0


def test_the_timer_closes_a_reader_nobody_takes():
    parked = ParkedReaders()
    reader = FakeReader()
    module_park_s = module.PARK_S
    module.PARK_S = 0.05
    try:
        parked.park("p0", reader, EntryPosition(1, 1))
        deadline = time.monotonic() + 5
        while not reader.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reader.closed
    finally:
        module.PARK_S = module_park_s
