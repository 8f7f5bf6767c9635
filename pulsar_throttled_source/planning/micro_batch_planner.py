"""The driver's planner of a stream: each micro-batch's end offset and read tasks, from the checkpointed offsets.

One per query, built once in the Python process where Spark plans (planner_wiring.py builds it, with every
collaborator as a constructor argument), and kept there between micro-batches, so caches and quota state
survive. The Spark-facing readers (stream.py and its line's subclass) only turn Spark's calls into these
methods. As in Spark's Kafka source:
  - which partitions and layouts: metadata.catalog (admin API, cached);
  - where a new query starts: start_positions;
  - how far each partition advances: admission.BatchAdmission (read limit + quota engine);
  - what counts as data loss: data_loss.DataLossPolicy;
  - how a batch becomes tasks: task_ranges, a small one packed by task_packing; what progress reports: progress.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..metadata.admin import PulsarAdmin
from ..metadata.catalog import CatalogSnapshot, PartitionCatalog
from ..metadata.durable_cursor import DurableCursor
from ..metadata.layout import PartitionLayout
from ..offsets import SourceOffset, new_query_id, positions_to_json
from ..options import SourceOptions
from ..positions import BEFORE_EARLIEST, EntryPosition
from ..read_task import ClientConfig, ReadTask
from ..throttling.publish_rates import PublishRateTracker
from .admission import AdmittedBatch, BatchAdmission
from .batch_range import bound_messages
from .data_loss import DataLossPolicy
from .message_cap import Cut, MessageCap
from .progress import ProgressReports
from .read_limit import BatchLimit
from .start_positions import resolve_start
from .task_packing import pack_tasks, range_bytes, task_count
from .task_ranges import task_ranges
from .trigger_floor import TriggerFloor, check_partition_quotas

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unchanged:
    """plan_end's answer when nothing is to be read from `start`: no new batch (Spark runs none for an
    unchanged offset, so the reader hands Spark its start back)."""

    start: SourceOffset


class PlanHooks(Protocol):
    """What the planner tells adaptiveThrottling (adaptive_throttle.AdaptiveThrottle), and asks it for the report."""

    def plan_started(self, snap: CatalogSnapshot) -> None: ...
    def batch_planned(self) -> None: ...
    def report(self) -> dict[str, Any] | None: ...


@dataclass
class PlannerParts:
    """The planner's collaborators, built once on the driver (planner_wiring.py)."""

    options: SourceOptions
    admin: PulsarAdmin  # the admin session: start positions by time; closed with the planner
    catalog: PartitionCatalog  # partitions and layouts (a FakeCatalog in unit tests)
    admission: BatchAdmission
    rates: PublishRateTracker  # the admission's publish rates, updated from each snapshot's stats
    data_loss: DataLossPolicy
    progress: ProgressReports
    client_config: ClientConfig  # what every read task carries
    clock: Callable[[], float]
    sleep: Callable[[float], None]  # Trigger.AvailableNow's wait for the next quota window
    floor: TriggerFloor | None = None  # minEntriesPerTrigger
    message_cap: MessageCap | None = None  # maxMessagesPerTrigger
    cursor: DurableCursor | None = None  # durableSubscription: follows the commits
    adaptive: PlanHooks | None = None  # adaptiveThrottling
    progress_in_offset: bool = False  # 4.0/4.1: the progress report rides in each planned end offset
    on_identity: Callable[[str], None] = lambda query_id: None  # the quota engine is keyed on the query's identity
    closers: tuple[Callable[[], None], ...] = ()  # what stop() closes, after the catalog and before the admin


class MicroBatchPlanner:
    """Answers each planning question of a stream with the parts it was built with."""

    def __init__(self, parts: PlannerParts) -> None:
        self._p = parts
        self.options, self.admin, self.catalog = parts.options, parts.admin, parts.catalog
        self.admission = parts.admission
        self._initial: SourceOffset | None = None
        self._query_id: str | None = None  # from the checkpointed offsets, or new with the first batch
        self._target: dict[str, EntryPosition] | None = None  # Trigger.AvailableNow's end
        self._report: dict = {}

    def initial_offset(self) -> SourceOffset:
        # Spark calls initialOffset twice at first start: answer the same both times.
        if self._initial is None:
            initial = resolve_start(self.options.start, self.catalog.snapshot(force=True), self.admin)
            if self._p.cursor is not None:
                self._p.cursor.ensure(initial.positions)  # retention keeps everything from here on
            self._initial = initial
        return self._initial

    def fix_available_now_target(self) -> None:
        """Trigger.AvailableNow (4.2+): read what is readable now, and nothing published later."""
        snap = self.catalog.snapshot(force=True)
        self._target = {p: snap.readable_end(p) for p in snap.layouts}
        log.info("Trigger.AvailableNow: reading up to %s", positions_to_json(self._target))

    def plan_end(self, start: SourceOffset, limit: BatchLimit) -> SourceOffset | Unchanged:
        """The end offset of the next micro-batch from `start` (Spark's latestOffset), or Unchanged."""
        p, given = self._p, start.positions
        self._identify(start)
        snap = self.catalog.snapshot()
        if snap.stats:
            p.rates.update(snap)
        if p.adaptive is not None:
            p.adaptive.plan_started(snap)
        starts = p.data_loss.drop_gone_partitions(given, snap)
        backlogs = {}
        proofs = start.ledger_ends
        for partition, layout in snap.layouts.items():
            s = starts.get(partition, BEFORE_EARLIEST)  # new partitions are read from their beginning
            p.data_loss.check_range(partition, layout, s, ledger_after=proofs.get(partition))
            # Never past an open transaction's start (the broker would not dispatch it); with
            # Trigger.AvailableNow, never beyond what was readable when the query started.
            until = snap.readable_end(partition)
            if self._target is not None:
                until = min(until, max(s, self._target.get(partition, BEFORE_EARLIEST)))
            backlogs[partition] = layout.backlog_after(s, until)
        accept = self._floor_check(limit, len(snap.layouts))
        # maxMessagesPerTrigger (not for Trigger.Once, which reads everything, as Kafka's ReadAllAvailable)
        cap = None if limit.read_all else self.options.max_messages_per_trigger
        skipped = {q: k for q, k in start.cuts.items() if q in starts}  # messages of a first entry already delivered

        def admit() -> tuple[AdmittedBatch, dict[str, Cut]]:
            cuts = p.message_cap.cut(backlogs, skipped, cap) if cap is not None and p.message_cap is not None else None
            caps = {q: c.entries for q, c in cuts.items()} if cuts is not None else None
            return p.admission.admit(backlogs, limit, accept, caps), cuts or {}

        batch, cuts = admit()
        # Spark ends a Trigger.AvailableNow query at the first trigger that plans no data, so
        # an exhausted quota window must not plan an empty batch before the target is reached:
        # wait for the next window (windows start on whole epoch seconds) and plan again.
        while self._target is not None and not any(batch.entries.values()) and any(b.entries for b in backlogs.values()):
            log.info("Trigger.AvailableNow: quota exhausted for this window; waiting for the next one")
            p.sleep(1.0 - p.clock() % 1.0 + 0.01)
            batch, cuts = admit()

        end = dict(starts)
        end_cuts = dict(skipped)
        for partition, backlog in backlogs.items():
            s = starts.get(partition, BEFORE_EARLIEST)
            n = batch.entries.get(partition, 0)
            if not n and partition not in starts:
                continue  # a new partition nothing was admitted from: left out, or Spark would run an empty batch
            if not n:
                end[partition] = s
                continue
            end_cuts.pop(partition, None)
            cut = cuts.get(partition)
            last = backlog.position_after(s, n)
            if cut is not None and cut.inside is not None and n == cut.entries:
                # Ends inside its last entry: the offset holds the entry before it and the batch index (offsets.py).
                end[partition] = EntryPosition(last.ledger_id, last.entry_id - 1)
                end_cuts[partition] = cut.inside
                continue
            # A batch that ends a closed ledger ends "before the next one" (only when it moved:
            # an unchanged offset must stay equal, or Spark would run an empty batch).
            end[partition] = snap.layouts[partition].past_ledger_end(last)
        self._report = p.progress.report(snap, end, batch.outcome, p.adaptive.report() if p.adaptive else None)
        if end == given and end_cuts == skipped:
            return Unchanged(start)  # no new batch (and its report, on 4.0/4.1, the one it was planned with)
        return self._next_batch(start, end, snap, end_cuts)

    def _next_batch(self, start: SourceOffset, end: dict[str, EntryPosition], snap: CatalogSnapshot,
                    cuts: dict[str, int]) -> SourceOffset:
        if self._p.floor is not None:
            self._p.floor.batch_planned()
        if self._p.adaptive is not None:
            self._p.adaptive.batch_planned()
        # Positions that end a closed ledger followed by an empty one carry that ledger's id: after
        # retention deletes the ledger, a restart proves from it that nothing unread went with it.
        next_ledgers = {p: following for p, e in end.items() if (following := snap.layouts[p].ledger_after_end(e)) is not None}
        # The query's first batch: its end records where it starts.
        first_batch_start = start.positions if start == self._initial else None
        return SourceOffset(end, self._query_id, next_ledgers, first_batch_start,
                            self._report if self._p.progress_in_offset else None, cuts)

    def _floor_check(self, limit: BatchLimit, partitions: int) -> Callable[[int], bool] | None:
        """What decides, inside the quota transaction, whether the admitted entries run as a batch now."""
        floor = self._p.floor
        if floor is None or limit.read_all:
            return None  # no floor; or Trigger.Once, which reads everything (Kafka's ReadAllAvailable)
        check_partition_quotas(floor.min_entries, self.options, partitions)
        if self._target is not None:
            # Trigger.AvailableNow, as Kafka's floor (compared with the backlog left, which only the last batch can
            # fall under): no batch is held back, so each is what the quotas admit and the last may be under the
            # floor. Holding a quota-cut batch would not make it larger, and could stall the run for maxTriggerDelay.
            return None
        return floor.accepts

    def _identify(self, start: SourceOffset) -> None:
        """The query's identity: the one its offsets carry, else a new one (a new query, or a checkpoint
        written before identities), carried by every end offset from now on."""
        carried = start.query_id
        if carried is not None and carried != self._query_id:
            self._query_id = carried
            self._p.on_identity(carried)  # the source-wide bucket is keyed on it
        elif self._query_id is None:
            self._query_id = new_query_id()
            self._p.on_identity(self._query_id)

    def report(self) -> dict | None:
        """The last plan's progress report (Spark's reportLatestOffset)."""
        return self._report or None

    def plan_tasks(self, start: SourceOffset, end: SourceOffset) -> list[ReadTask]:
        """The read tasks of the micro-batch (start, end]: a range per partition (or per maxEntriesPerTask), a
        small batch's packed into smallBatchTasks tasks, any batch into at most maxTasksPerTrigger."""
        # A re-run first batch gets a freshly resolved initial offset from Spark: its end knows better.
        # (start == end: 4.0/4.1's restart hook handing over the last end it saw, no batch to run.)
        if start == end:
            return []
        carried = end.query_start
        starts = SourceOffset(carried) if carried else start
        proofs, loss = starts.ledger_ends, self._p.data_loss

        def check(partition: str, layout: PartitionLayout, s: EntryPosition, e: EntryPosition | None) -> None:
            loss.check_range(partition, layout, s, e, proofs.get(partition))
        ends = entry_ends(starts, end)
        ranges = task_ranges(starts, ends, self.catalog.snapshot(), self.options.max_entries_per_task,
                             self._p.client_config, check, loss.partitions_gone)
        if starts.cuts or end.cuts:  # maxMessagesPerTrigger: a first or last entry read in part
            first = {q: m for q in starts.cuts if (m := starts.cut_message(q)) is not None}
            stop = {q: m for q in end.cuts if (m := end.cut_message(q)) is not None}
            ranges = bound_messages(ranges, starts, ends, first, stop)
        sizes = [range_bytes(r) for r in ranges]
        return pack_tasks(ranges, sizes, task_count(sizes, self.options.small_batch_tasks, self.options.max_tasks_per_trigger))

    def commit(self, end: SourceOffset) -> None:
        # Progress lives in Spark's checkpoint. Reads use non-durable readers, so nothing is held back
        # on the broker unless a durable subscription was asked for: then its cursor follows.
        if self._p.cursor is not None:
            self._p.cursor.follow(end.positions)

    def stop(self) -> None:
        self._p.progress.close()
        for close in self._p.closers:
            close()  # the entry lookups: those under way are not waited for
        self.catalog.close()
        self.admin.close()


def entry_ends(start: SourceOffset, end: SourceOffset) -> SourceOffset:
    """`end` as the last entry each range reads: an end cut inside an entry reads that entry (up to its cut),
    unless the partition did not move."""
    if not end.cuts:
        return end
    moved = {q for q, k in end.cuts.items() if (end.positions[q], k) != (start.positions.get(q), start.cuts.get(q))}
    return SourceOffset({q: EntryPosition(e.ledger_id, e.entry_id + 1) if q in moved else e for q, e in end.positions.items()})
