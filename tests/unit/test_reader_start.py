"""Where a read task's reader starts (reading.reader_start): at the range's first planned entry,
inclusively, so the broker does not read the entry before the range for the client to drop."""

from __future__ import annotations

import pulsar

from pulsar_throttled_source.positions import BEFORE_EARLIEST, EntryPosition
from pulsar_throttled_source.read_task import ClientConfig, PartitionRange
from pulsar_throttled_source.reading.reader_start import reader_start

CFG = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100)


def part(start: EntryPosition, runs: tuple[tuple[int, int, int], ...] | None) -> PartitionRange:
    return PartitionRange("persistent://public/default/t-partition-3", 3, start, EntryPosition(9, 4), 6, CFG, runs)


def test_a_planned_range_starts_inclusively_at_its_first_entry_even_in_the_next_ledger():
    start_id, inclusive = reader_start(part(EntryPosition(7, 49), ((9, 0, 5),)), exclusive_only=False)
    assert inclusive and (start_id.ledger_id(), start_id.entry_id(), start_id.batch_index(), start_id.partition()) == (9, 0, -1, 3)


def test_without_the_entry_list_or_an_inclusive_reader_it_starts_after_the_start():
    for runs, exclusive_only in ((None, False), ((), False), (((9, 0, 5),), True)):
        start_id, inclusive = reader_start(part(EntryPosition(7, 49), runs), exclusive_only)
        assert not inclusive and (start_id.ledger_id(), start_id.entry_id()) == (7, 49)


def test_a_range_from_the_beginning_starts_at_the_earliest():
    start_id, inclusive = reader_start(part(BEFORE_EARLIEST, ((9, 0, 5),)), exclusive_only=False)
    assert start_id == pulsar.MessageId.earliest and not inclusive
