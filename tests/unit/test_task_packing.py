"""planning/task_packing.py: a small micro-batch's ranges packed into about one task per core (smallBatchTasks),
any batch into at most maxTasksPerTrigger, each range in exactly one task; otherwise (large batches, unknown sizes,
smallBatchTasks=0 and no maxTasksPerTrigger) one task per range."""

from __future__ import annotations

import itertools

import pytest
from builders import P0, P1, TOPIC, layout, reader, unlimited
from fakes import FakeCatalog

from pulsar_throttled_source.planning.task_packing import SMALL_TASK_BYTES, pack_tasks, task_count
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.read_task import ClientConfig, PackedRanges, PartitionRange, ranges_of
from pulsar_throttled_source.reading import read as read_module

CONFIG = ClientConfig("pulsar://localhost:6650", (), (), None, 1000, 100)
P2, P3 = f"{TOPIC}-partition-2", f"{TOPIC}-partition-3"
KB = 1024


def ranges(n: int) -> list[PartitionRange]:
    return [PartitionRange(f"{TOPIC}-partition-{i}", i, EntryPosition(5, -1), EntryPosition(5, 9), 10, CONFIG) for i in range(n)]


def read_order(tasks) -> list[PartitionRange]:
    return [r for t in tasks for r in ranges_of(t)]


def test_a_small_batch_of_four_ranges_runs_as_two_tasks_each_range_once():
    planned = ranges(4)
    tasks = pack_tasks(planned, [10 * KB] * 4, 2)
    assert len(tasks) == 2 and all(isinstance(t, PackedRanges) for t in tasks)
    assert sorted(read_order(tasks), key=lambda r: r.partition_index) == planned  # each range exactly once
    assert [[r.partition_index for r in ranges_of(t)] for t in tasks] == [[0, 2], [1, 3]]  # planned order inside a task


def test_ranges_are_balanced_by_bytes_and_a_task_of_one_range_stays_a_plain_range():
    planned = ranges(4)
    tasks = pack_tasks(planned, [3 * 1024 * KB, KB, KB, KB], 2)
    assert tasks[0] == planned[0]  # the large range alone, not wrapped
    assert isinstance(tasks[1], PackedRanges) and tasks[1].ranges == tuple(planned[1:])


def test_tiny_ranges_are_spread_over_the_tasks_not_piled_on_the_first():
    tasks = pack_tasks(ranges(6), [0.0] * 6, 3)
    assert [len(ranges_of(t)) for t in tasks] == [2, 2, 2]


MIB = 1024 * KB


@pytest.mark.parametrize("sizes,small,most,expected", [
    ([10 * KB] * 4, 2, 0, 2),  # small: smallBatchTasks
    ([SMALL_TASK_BYTES / 2] * 4, 2, 0, 2),  # exactly at the limit is still small
    ([SMALL_TASK_BYTES] * 4 + [1.0], 2, 0, 0),  # more than SMALL_TASK_BYTES per task: a large batch, one task per range
    ([10 * KB, None, 10 * KB, 10 * KB], 2, 0, 0),  # a range planned without a layout: its size is unknown
    ([10 * KB] * 4, 0, 0, 0),  # smallBatchTasks=0
    ([100 * MIB] * 8, 2, 4, 4),  # maxTasksPerTrigger: a large batch in at most that many
    ([10 * KB, None] * 4, 2, 3, 3),  # ... sizes known or not
    ([10 * KB] * 8, 4, 2, 2),  # a small batch never in more tasks than maxTasksPerTrigger
    ([10 * KB] * 8, 0, 3, 3),  # smallBatchTasks=0 with maxTasksPerTrigger: the latter still holds
])
def test_how_many_tasks_a_batch_runs_as(sizes, small, most, expected):
    assert task_count(sizes, small, most) == expected


@pytest.mark.parametrize("sizes,tasks", [([10 * KB] * 4, 0), ([10 * KB] * 4, 4), ([10 * KB] * 3, 5)])
def test_one_task_per_range_without_a_limit_or_with_no_more_ranges_than_tasks(sizes, tasks):
    planned = ranges(len(sizes))
    assert pack_tasks(planned, sizes, tasks) == planned


def test_a_large_batch_under_max_tasks_is_balanced_by_bytes_each_range_once():
    planned = ranges(6)
    sizes = [90 * MIB, 10 * MIB, 40 * MIB, 50 * MIB, 30 * MIB, 60 * MIB]
    tasks = pack_tasks(planned, sizes, 2)
    assert sorted(read_order(tasks), key=lambda r: r.partition_index) == planned
    loads = [sum(sizes[r.partition_index] for r in ranges_of(t)) for t in tasks]
    assert sorted(loads) == [140 * MIB, 140 * MIB]  # 90+40+10 / 60+50+30, dealt largest first


def test_ranges_of_unknown_size_count_as_the_mean_of_the_known():
    planned = ranges(4)
    tasks = pack_tasks(planned, [100 * MIB, None, None, 10 * MIB], 2)  # the unknown two count as 55 MiB each
    assert [[r.partition_index for r in ranges_of(t)] for t in tasks] == [[0, 3], [1, 2]]
    assert [len(ranges_of(t)) for t in pack_tasks(planned, [None] * 4, 2)] == [2, 2]


def small_catalog() -> FakeCatalog:
    return FakeCatalog(*(layout(p, [(5 + i, 10)]) for i, p in enumerate((P0, P1, P2, P3))))


def test_the_planner_packs_a_small_micro_batch_and_keeps_every_planned_range(tmp_path):
    catalog = small_catalog()
    packed, plain = reader(tmp_path, catalog), reader(tmp_path, catalog, smallBatchTasks=0)  # the default: 2
    start = packed.initialOffset()
    end = packed.latestOffset(start, unlimited())
    tasks, one_each = packed.partitions(start, end), plain.partitions(start, end)
    assert len(tasks) == 2 and len(one_each) == 4
    assert sorted(read_order(tasks), key=lambda r: r.partition) == sorted(one_each, key=lambda r: r.partition)
    wide = reader(tmp_path, catalog, smallBatchTasks=8)
    assert len(wide.partitions(start, end)) == 4
    capped = reader(tmp_path, catalog, smallBatchTasks=0, maxTasksPerTrigger=3)
    assert len(capped.partitions(start, end)) == 3


def test_a_split_partition_is_read_in_turn_inside_one_task(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 7), (7, 6)]), layout(P1, [(6, 2)])), maxEntriesPerTask=5,
               smallBatchTasks=1)
    start = r.initialOffset()
    (task,) = r.partitions(start, r.latestOffset(start, unlimited()))
    chain = [p for p in ranges_of(task) if p.partition == P0]
    assert [p.entries for p in chain] == [5, 5, 3]
    assert all(a.end == b.start for a, b in itertools.pairwise(chain))


def test_a_packed_task_reads_its_ranges_in_turn_into_one_stream(monkeypatch):
    planned = ranges(3)
    monkeypatch.setattr(read_module, "read_range", lambda part: iter([f"{part.partition_index}a", f"{part.partition_index}b"]))
    assert list(read_module.read_ranges(PackedRanges(tuple(planned)))) == ["0a", "0b", "1a", "1b", "2a", "2b"]
    assert list(read_module.read_ranges(planned[1])) == ["1a", "1b"]


def test_batches_alike_pair_the_same_partitions_batch_after_batch():
    planned = ranges(4)

    def pairs(sizes: list[float]) -> list[list[int]]:
        return [[r.partition_index for r in ranges_of(t)] for t in pack_tasks(planned, sizes, 2)]
    # A few hundred bytes more or less per partition (entries of other sizes) do not move a partition to the other task.
    assert pairs([60 * KB, 58 * KB, 61 * KB, 59 * KB]) == pairs([59 * KB, 61 * KB, 58 * KB, 60 * KB]) == [[0, 2], [1, 3]]
