"""A micro-batch's ranges (planning/task_ranges.py) carry the planner's messages per entry to the read tasks,
which size their readers' receiver queues in messages (issue 44)."""

from __future__ import annotations

from builders import P0, P1, layout

from pulsar_throttled_source.metadata.catalog import CatalogSnapshot, PublishStats
from pulsar_throttled_source.offsets import SourceOffset
from pulsar_throttled_source.planning.task_ranges import task_ranges
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.read_task import ClientConfig

CONFIG = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100)


def ranges(snap: CatalogSnapshot, end: dict, per_task: int = 0):
    def no_loss(*_: object) -> None:
        return None
    return task_ranges(SourceOffset({}), SourceOffset(end), snap, per_task, CONFIG, no_loss, no_loss)


def test_each_range_carries_its_partitions_messages_per_entry_from_the_publish_counters():
    # P0: 30 entries published as 90 messages (3 per entry); P1: no counters yet (1.0, the entries themselves).
    snap = CatalogSnapshot(0.0, {P0: layout(P0, [(5, 20), (7, 10)]), P1: layout(P1, [(6, 10)])},
                           {P0: PublishStats(90, 9000, 0.0, 0.0)})
    planned = ranges(snap, {P0: EntryPosition(7, 9), P1: EntryPosition(6, 9)})
    assert [(r.partition, r.entries, r.msgs_per_entry, r.entry_bytes) for r in planned] == \
        [(P0, 30, 3.0, 100.0), (P1, 10, 1.0, 100.0)]  # the builder's entries hold 100 B each
    # Split by maxEntriesPerTask, every piece carries it.
    assert {(r.entries, r.msgs_per_entry) for r in ranges(snap, {P0: EntryPosition(7, 9)}, per_task=10)} == {(10, 3.0)}
