"""From a micro-batch's start and end offsets to Spark tasks (Kafka's KafkaOffsetRangeCalculator).

One task per partition, or several of at most maxEntriesPerTask entries. Each task carries the
ledger-by-ledger list of the entries it was planned with, so the executor can tell an entry that
is gone (data loss) from one it must wait for.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from ..metadata.catalog import CatalogSnapshot
from ..metadata.layout import PartitionLayout
from ..offsets import SourceOffset
from ..positions import BEFORE_EARLIEST, EntryPosition
from ..read_task import ClientConfig, PartitionRange
from ..throttling.publish_rates import msgs_per_entry
from ..topics import TopicName

# (partition, layout, start, end) -> raises on data loss; see DataLossPolicy.check_range
LossCheck = Callable[[str, PartitionLayout, EntryPosition, EntryPosition], None]


def task_ranges(start: SourceOffset, end: SourceOffset, snap: CatalogSnapshot,
                max_entries_per_task: int, config: ClientConfig, check_loss: LossCheck,
                on_gone: Callable[[list[str]], None]) -> list[PartitionRange]:
    """The read tasks of the entries after `start` up to and including `end` (a partition `start`
    does not name is read from its beginning). `on_gone(partitions)`: planned partitions the snapshot
    no longer holds (their topic was deleted since the plan); it raises (failOnDataLoss) or they get
    no task."""
    out: list[PartitionRange] = []
    starts, ends = start.positions, end.positions
    gone = [p for p, e in ends.items() if e > starts.get(p, BEFORE_EARLIEST) and p not in snap.layouts]
    if gone:
        # A task without the layout would be planned "without an entry list": no deletion check,
        # and a reader on a deleted partition waits out pollTimeoutMs (or re-creates it, topic auto-creation).
        on_gone(gone)
    for partition, e in ends.items():
        s = starts.get(partition, BEFORE_EARLIEST)
        if e <= s or partition in gone:
            continue
        layout = snap.layouts[partition]
        index = TopicName.parse(partition).partition_index
        # A batch re-run after a restart was planned on an older layout, or the topic was deleted (and
        # maybe re-created empty by a reader's reconnect) since the plan: entries of it deleted since
        # are not in this one, so they are reported here, as planning would.
        check_loss(partition, layout, s, e)
        if layout.first is None or e < layout.first:
            continue  # none of the range is stored (the loss was reported): nothing would ever arrive
        if layout.latest < e:
            # Planned on a newer layout than this snapshot shows: read without an entry list.
            out.append(PartitionRange(partition, index, s, e, -1, config))
            continue
        # Sizes the readers' receiver queues, which the broker counts in messages (reading/receiver_queue.py).
        per_entry = msgs_per_entry(snap.stats.get(partition), layout) or 1.0
        backlog = layout.backlog_after(s, e)
        step = max_entries_per_task
        bounds = [s]
        last = backlog.position_after(s, backlog.entries)
        # Split only a range this layout holds exactly (its end may be "before the next ledger").
        if step > 0 and backlog.entries > step and e in (last, layout.past_ledger_end(last)):
            bounds += [backlog.position_after(s, k) for k in range(step, backlog.entries, step)]
        bounds.append(e)
        for lo, hi in pairwise(bounds):
            piece = backlog if len(bounds) == 2 else layout.backlog_after(lo, hi)  # unsplit: measured above
            out.append(PartitionRange(partition, index, lo, hi, piece.entries, config,
                                      tuple((ledger, first, count) for ledger, first, count, _ in piece.runs),
                                      msgs_per_entry=per_entry,
                                      entry_bytes=piece.bytes / piece.entries if piece.entries else 0.0))
    return out
