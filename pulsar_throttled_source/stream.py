"""Driver side: the stream reader's core, shared by the Spark-facing readers of each Spark line
(stream_spark42: admission control, 4.2+; stream_spark40: latestOffset() only, 4.0 and 4.1).

All planning methods run in one long-lived Python process on the driver, on one reader object,
so caches and quota state survive between micro-batches. Spark's Kafka source is the model:
  - which partitions and layouts: catalog.PartitionCatalog (admin API, cached);
  - where a new query starts: start_positions;
  - how far each partition advances: admission.BatchAdmission (read limit + quota engine);
  - what counts as data loss: data_loss.DataLossPolicy;
  - how a batch becomes tasks: task_ranges; what progress reports: progress.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from .adaptive_throttle import AdaptiveThrottle
from .console_log import enable_console_log
from .metadata.admin import PulsarAdmin
from .metadata.catalog import PartitionCatalog
from .metadata.durable_cursor import DurableCursor
from .metadata.entry_sizes import EntrySizes
from .metadata.layout import PartitionLayout
from .metadata.policies import BrokerPolicies
from .metadata.publish_times import OldestUnread
from .offsets import SourceOffset, new_query_id, positions_to_json
from .options import SourceOptions
from .planning.admission import BatchAdmission
from .planning.data_loss import DataLossPolicy
from .planning.progress import ProgressReports
from .planning.read_limit import BatchLimit
from .planning.start_positions import resolve_start
from .planning.task_ranges import task_ranges
from .planning.trigger_floor import TriggerFloor, check_partition_quotas
from .positions import BEFORE_EARLIEST, EntryPosition
from .read_task import ClientConfig, PartitionRange
from .reading.read import read_range
from .reading.read_path import describe_read_path, read_path_name
from .schemas.columns import ValueSchema
from .schemas.schema_guard import TopicSchemaGuard
from .throttling.engine import QuotaEngine
from .throttling.publish_rates import PublishRateTracker

log = logging.getLogger(__name__)

# What an offset Spark hands over is, in the errors that a malformed one raises.
START_FROM_CHECKPOINT = "start offset (from the checkpoint)"
START_OF_BATCH, END_OF_BATCH = "start offset of the micro-batch", "end offset of the micro-batch"


class PulsarStreamReader(DataSourceStreamReader):
    """Everything but latestOffset, whose signature depends on the Spark line (see the module doc)."""

    # Where the query progress report goes: reportLatestOffset (4.2+), or, where Spark shows a Python
    # source nothing else (4.0, 4.1), also each planned end offset (offsets.py, "progress").
    progress_in_offset = False

    def __init__(self, options: SourceOptions, clock: Callable[[], float] = time.time,
                 value_schema: ValueSchema | None = None) -> None:
        if options.end.given:
            raise ValueError(f"Option '{options.end.option}' applies to batch queries (spark.read) only; a stream reads on as "
                             "messages arrive. Remove it, or read with spark.read to stop at the given positions.")
        inside = options.start.inside_entries()
        if inside:
            # A stream's offsets (its batches' ends, a restart's start) are entries: a start inside one is not kept.
            raise ValueError(f"Option 'startingOffsets' for partition {inside[0]}: a \"batchIndex\" (a position inside an "
                             "entry) applies to batch queries (spark.read) only; a stream starts at an entry: remove "
                             "batchIndex to start at the entry's first message.")
        self.options = options
        self.value_schema = value_schema  # how read tasks decode payloads (None: raw bytes)
        self._clock = clock
        self._admin: PulsarAdmin | None = None
        self._catalog: PartitionCatalog | None = None
        self._policies: BrokerPolicies | None = None
        self._engine: QuotaEngine | None = None
        self._cursor: DurableCursor | None = None
        self._rates = PublishRateTracker()
        self._entry_sizes: EntrySizes | None = None
        self._adaptive = AdaptiveThrottle.of(options, clock, lambda: self.admin)
        self._progress = self._new_progress()
        self._admission = self._new_admission()
        self.data_loss = DataLossPolicy(options.subscription, options.durable_subscription, options.fail_on_data_loss)
        self._initial: SourceOffset | None = None
        self._query_id: str | None = None  # from the checkpointed offsets, or new with the first batch
        self._target: dict[str, EntryPosition] | None = None  # Trigger.AvailableNow's end
        self._report: dict = {}
        self._last_planned: tuple[dict, SourceOffset] | None = None  # the last end offset handed to Spark, and parsed
        floor = options.min_entries_per_trigger
        self._floor = TriggerFloor(floor, options.max_trigger_delay_ms, clock) if floor else None

    def __getstate__(self) -> dict:
        # Spark pickles this reader into every read task: ship options only, not the
        # driver's admin session, caches or quota engine (rebuilt lazily where needed).
        state = self.__dict__.copy()
        for name in ("_admin", "_catalog", "_policies", "_engine", "_cursor", "_admission", "_entry_sizes", "_progress",
                     "_adaptive"):
            state[name] = None
        state["_rates"] = PublishRateTracker()
        state["_last_planned"], state["_report"] = None, {}  # per partition: large at scale, unused by tasks
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._adaptive = AdaptiveThrottle.of(self.options, self._clock, lambda: self.admin)
        self._admission = self._new_admission()
        self._progress = self._new_progress()

    def _new_progress(self) -> ProgressReports:
        return ProgressReports(lambda: OldestUnread.of_admin(self.admin), self._clock, self.options.progress_per_partition)

    def _new_admission(self) -> BatchAdmission:
        return BatchAdmission(self.options, lambda: self.engine, lambda: self.policies, self._rates, lambda: self.entry_sizes)

    # -- lazily built collaborators (the reader is pickled to the runner process first) ---
    @property
    def admin(self) -> PulsarAdmin:
        if self._admin is None:
            self._admin = PulsarAdmin.for_planning(self.options)
        return self._admin

    @property
    def catalog(self) -> PartitionCatalog:
        if self._catalog is None:
            enable_console_log()  # first planning call in the runner process
            o = self.options
            log.info("Read tasks read with %s", describe_read_path(o.read_path, o.client_kwargs, o.reader_kwargs))
            self._progress.read_path = read_path_name(o.read_path, o.client_kwargs, o.reader_kwargs)
            needs_stats = o.throttled
            # Topics a pattern matches later must carry the schema type the query's columns decode.
            guard = TopicSchemaGuard(self.admin, self.value_schema).check if o.decode_schema else None
            # Live publish counters only for quotas relative to the publish rate (the broker's may be), or for
            # adaptiveThrottling's signal on other subscriptions' throttling counters.
            live = o.uses_broker_quotas or o.adaptive is not None or any(r.relative_to_publish_rate for r in (o.quota.source, o.topic_rate, o.subscription_rate))
            self._catalog = PartitionCatalog(self.admin, o.topics, o.topics_pattern, o.pattern_namespace,
                                             o.metadata_refresh_ms, needs_stats, on_topics=guard,
                                             stats_refresh_s=0.0 if live else o.policy_refresh_ms / 1000.0,
                                             in_background=True, own_subscription=o.subscription)
        return self._catalog

    @property
    def engine(self) -> QuotaEngine:
        if self._engine is None:
            from .throttling.store_factory import open_quota_store

            assert self._query_id is not None, "the query's identity is known before its first plan"
            quota = replace(self.options.quota, query_id=self._query_id)
            store = open_quota_store(self.options.quota_store_url, self.options.quota_state_path)
            adaptive = self._adaptive
            self._engine = QuotaEngine(quota, store, self._clock, adaptive.multiplier(store) if adaptive else None,
                                       adaptive.note if adaptive else None)
        return self._engine

    @property
    def entry_sizes(self) -> EntrySizes:
        if self._entry_sizes is None:
            self._entry_sizes = EntrySizes(self.admin, latency=self._adaptive.lookup_latency if self._adaptive else None)
        return self._entry_sizes

    @property
    def durable_cursor(self) -> DurableCursor:
        if self._cursor is None:
            self._cursor = DurableCursor(self.admin, self.options.subscription)
        return self._cursor

    @property
    def policies(self) -> BrokerPolicies:
        if self._policies is None:
            self._policies = BrokerPolicies(self.admin, self.options.policy_refresh_ms)
        return self._policies

    # -- offsets: SourceOffset inside, JSON only at Spark's calls ------------------------------
    def initialOffset(self) -> dict:
        return self.initial_offset().to_json()

    def initial_offset(self) -> SourceOffset:
        # Spark calls initialOffset twice at first start: answer the same both times.
        if self._initial is None:
            initial = resolve_start(self.options.start, self.catalog.snapshot(force=True), self.admin)
            if self.options.durable_subscription:
                self.durable_cursor.ensure(initial.positions)  # retention keeps everything from here on
            self._initial = initial
        return self._initial

    def offset_of(self, value: dict, where: str) -> SourceOffset:
        """An offset Spark hands over, parsed: usually the end this reader planned last, which it keeps
        parsed (parsing and checking 1,000 positions again cost more than the plan)."""
        if self._last_planned is not None and value == self._last_planned[0]:
            return self._last_planned[1]
        return SourceOffset.from_json(value, where)

    def to_spark(self, offset: SourceOffset) -> dict:
        """An end offset as Spark stores it, remembered so that Spark's next start is not parsed again."""
        value = offset.to_json()
        self._last_planned = (value, offset)
        return value

    def fix_available_now_target(self) -> None:
        """Trigger.AvailableNow (4.2+): read what is readable now, and nothing published later."""
        snap = self.catalog.snapshot(force=True)
        self._target = {p: snap.readable_end(p) for p in snap.layouts}
        log.info("Trigger.AvailableNow: reading up to %s", positions_to_json(self._target))

    def plan_end(self, start: SourceOffset, limit: BatchLimit) -> SourceOffset:
        """The end offset of the next micro-batch from `start` (Spark's latestOffset); `start` itself,
        the same object, when nothing is to be read (Spark runs no batch for an unchanged offset)."""
        given = start.positions
        self._identify(start)
        snap = self.catalog.snapshot()
        if snap.stats:
            self._rates.update(snap)
        if self._adaptive is not None:
            self._adaptive.plan_started(snap)
        starts = self.data_loss.drop_gone_partitions(given, snap)

        backlogs = {}
        proofs = start.ledger_ends
        for partition, layout in snap.layouts.items():
            s = starts.get(partition, BEFORE_EARLIEST)  # new partitions are read from their beginning
            self.data_loss.check_range(partition, layout, s, ledger_after=proofs.get(partition))
            # Never past an open transaction's start (the broker would not dispatch it); with
            # Trigger.AvailableNow, never beyond what was readable when the query started.
            until = snap.readable_end(partition)
            if self._target is not None:
                until = min(until, max(s, self._target.get(partition, BEFORE_EARLIEST)))
            backlogs[partition] = layout.backlog_after(s, until)
        accept = self._floor_check(limit, len(snap.layouts))
        admitted = self._admission.admit(backlogs, limit, accept)
        # Spark ends a Trigger.AvailableNow query at the first trigger that plans no data, so
        # an exhausted quota window must not plan an empty batch before the target is reached:
        # wait for the next window (windows start on whole epoch seconds) and plan again.
        while self._target is not None and not any(admitted.values()) and any(b.entries for b in backlogs.values()):
            log.info("Trigger.AvailableNow: quota exhausted for this window; waiting for the next one")
            time.sleep(1.0 - self._clock() % 1.0 + 0.01)
            admitted = self._admission.admit(backlogs, limit, accept)

        end = dict(starts)
        for partition, backlog in backlogs.items():
            s = starts.get(partition, BEFORE_EARLIEST)
            n = admitted.get(partition, 0)
            if not n and partition not in starts:
                continue  # a new partition nothing was admitted from: left out, or Spark would run an empty batch
            # A batch that ends a closed ledger ends "before the next one" (only when it moved:
            # an unchanged offset must stay equal, or Spark would run an empty batch).
            end[partition] = snap.layouts[partition].past_ledger_end(backlog.position_after(s, n)) if n else s
        self._report = self._progress.report(snap, end, self._admission.outcome,
                                             self._adaptive.report() if self._adaptive else None)
        if end == given:
            return start  # unchanged: no new batch (and its report, on 4.0/4.1, the one it was planned with)
        if self._floor is not None:
            self._floor.batch_planned()
        if self._adaptive is not None:
            self._adaptive.batch_planned()
        # Positions that end a closed ledger followed by an empty one carry that ledger's id: after
        # retention deletes the ledger, a restart proves from it that nothing unread went with it.
        next_ledgers = {p: following for p, e in end.items() if (following := snap.layouts[p].ledger_after_end(e)) is not None}
        # The query's first batch: its end records where it starts.
        first_batch_start = given if start == self._initial else None
        return SourceOffset(end, self._query_id, next_ledgers, first_batch_start,
                            self._report if self.progress_in_offset else None)

    def _floor_check(self, limit: BatchLimit, partitions: int) -> Callable[[int], bool] | None:
        """What decides, inside the quota transaction, whether the admitted entries run as a batch now."""
        floor = self._floor
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
            self._query_id, self._engine = carried, None  # the source-wide bucket is keyed on it
        elif self._query_id is None:
            self._query_id = new_query_id()

    def reportLatestOffset(self) -> dict | None:
        return self._report or None

    # -- execution --------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self.plan_tasks(self.offset_of(start, START_OF_BATCH), self.offset_of(end, END_OF_BATCH))

    def plan_tasks(self, start: SourceOffset, end: SourceOffset) -> list[PartitionRange]:
        """The read tasks of the micro-batch (start, end]."""
        # A re-run first batch gets a freshly resolved initial offset from Spark: its end knows better.
        # (start == end: 4.0/4.1's restart hook handing over the last end it saw, no batch to run.)
        carried = end.query_start if start != end else None
        starts = SourceOffset(carried) if carried else start
        proofs = starts.ledger_ends

        def check(partition: str, layout: PartitionLayout, s: EntryPosition, e: EntryPosition | None) -> None:
            self.data_loss.check_range(partition, layout, s, e, proofs.get(partition))
        return task_ranges(starts, end, self.catalog.snapshot(), self.options.max_entries_per_task,
                           self._client_config(), check, self.data_loss.partitions_gone)

    def _client_config(self) -> ClientConfig:
        return self.options.read_task_config(self.value_schema)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PartitionRange)
        return read_range(partition)

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint. Reads use non-durable readers, so nothing is held back
        # on the broker unless a durable subscription was asked for: then its cursor follows.
        if self.options.durable_subscription:
            self.durable_cursor.follow(self.offset_of(end, "committed offset").positions)

    def stop(self) -> None:
        self._progress.close()
        if self._entry_sizes is not None:
            self._entry_sizes.close()  # lookups under way are not waited for
        if self._catalog is not None:
            self._catalog.close()
        if self._admin is not None:
            self._admin.close()
