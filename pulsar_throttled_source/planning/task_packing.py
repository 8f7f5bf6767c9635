"""A micro-batch's ranges packed into fewer Spark tasks (smallBatchTasks, maxTasksPerTrigger; issue 44).

Every task pays fixed costs whatever it reads: Spark's Python runner (~120 ms a task on 2 quiet cores: the
worker hand-over, the command, the Arrow stream back) and the read task's own (~30 ms: the admin check and
opening a reader). One task per partition pays them once per partition, in waves when the partitions outnumber
the cores: a throttled query's batch of 650 rows on 4 partitions took 866 ms from trigger to commit on 2 cores,
~470 ms of it these costs paid in two waves (bench/README.md, batch_timeline.py). Packed into about one task per
core, each task reads several ranges in turn (read_task.PackedRanges) and pays them once.

The driver's planner runs in Spark's Python planner process, which cannot ask Spark how many cores the executors
have (docs/PROCESSES.md). So by default only small batches are packed (into smallBatchTasks): read in turn on a
cluster with more cores, they cost at most a few tens of ms, against a wave of fixed costs saved where the cores
are few. A large batch keeps one task per range, whose parallel reads matter on a large cluster, unless the user
names the cores (maxTasksPerTrigger): then every batch runs in at most that many tasks, one wave.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..read_task import PackedRanges, PartitionRange, ReadTask

# A batch is small when packed it reads at most this much per task: ~4 MiB of 100 B messages read in ~80 ms on one
# core (the native path's ~500k msg/s a task), under the ~150 ms of fixed costs a task it spares would have paid.
SMALL_TASK_BYTES = 4 * 1024 * 1024
# What a range costs beyond its bytes (its admin check and reader opening, ~30 ms), in bytes read in that time:
# it spreads ranges of a few entries over the tasks rather than piling them onto the first.
RANGE_COST_BYTES = 1024 * 1024


def range_bytes(part: PartitionRange) -> float | None:
    """The stored bytes of a planned range (compressed, as the layout counts them), as task_ranges measured them;
    None when unknown (planned on a newer layout than its snapshot)."""
    return part.entries * part.entry_bytes if part.entries >= 0 else None


def task_count(sizes: Sequence[float | None], small_tasks: int, max_tasks: int,
               task_bytes: float = SMALL_TASK_BYTES) -> int:
    """How many tasks a batch of ranges of these `sizes` runs as (0: one per range): `small_tasks` when the batch reads
    at most `task_bytes` per task so packed (every size known), else `max_tasks` (0: no limit)."""
    small = min(small_tasks, max_tasks) if max_tasks > 0 else small_tasks
    if small > 0 and all(s is not None for s in sizes) and sum(s for s in sizes if s is not None) <= small * task_bytes:
        return small
    return max_tasks


def pack_tasks(ranges: Sequence[PartitionRange], sizes: Sequence[float | None], tasks: int) -> list[ReadTask]:
    """The read tasks of a micro-batch's planned `ranges` (each of `sizes` bytes, None when unknown): at most `tasks`
    of them, or one per range as planned when tasks == 0 or the ranges are no more than that. Ranges are dealt largest
    first (to the MiB; an unknown size counts as the known ones' mean) to the least loaded task; each task reads its
    ranges in the planned order (a partition split by maxEntriesPerTask: its ranges in turn)."""
    if tasks <= 0 or len(ranges) <= tasks:
        return list(ranges)
    known = [s for s in sizes if s is not None]
    mean = sum(known) / len(known) if known else 0.0
    # Sizes in whole MiB: batches alike pair the same partitions in the same tasks batch after batch (ties go in
    # planned order), so a task more often finds its partitions' readers parked in its worker by the last batch.
    weights = [round((mean if s is None else s) / RANGE_COST_BYTES) * RANGE_COST_BYTES + RANGE_COST_BYTES for s in sizes]
    loads = [0.0] * tasks
    members: list[list[int]] = [[] for _ in range(tasks)]
    for i in sorted(range(len(ranges)), key=lambda i: -weights[i]):  # stable: equal ranges in planned order
        least = min(range(tasks), key=lambda k: (loads[k], k))
        loads[least] += weights[i]
        members[least].append(i)
    out: list[ReadTask] = []
    for indexes in members:
        packed = tuple(ranges[i] for i in sorted(indexes))
        if packed:
            out.append(packed[0] if len(packed) == 1 else PackedRanges(packed))
    return out
