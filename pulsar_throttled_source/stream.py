"""Driver side: plan micro-batches (initialOffset, latestOffset, partitions, commit).

All planning methods run in one long-lived Python process on the driver, on one
reader object, so caches and quota state survive between micro-batches. Each
`latestOffset` call decides, per partition, how many backlog entries the next
micro-batch may cover: everything available, or what the quota engine admits.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from .admin import PulsarAdmin
from .catalog import CatalogSnapshot, PartitionCatalog, PublishStats
from .durable_cursor import DurableCursor
from .layout import Backlog, PartitionLayout
from .options import SourceOptions
from .policies import BrokerPolicies
from .positions import BEFORE_EARLIEST, EntryPosition, checkpointed_offsets, offsets_to_json
from .read import read_range
from .read_errors import DataLossError
from .read_task import ClientConfig, PartitionRange
from .throttle import Admission, PartitionDemand, QuotaEngine, Rate
from .topics import TopicName

log = logging.getLogger("pulsar_throttled_source")


class _StderrUnlessConfigured(logging.StreamHandler):
    """Planning runs in Spark's Python streaming-source runner, where nobody configures logging:
    print our INFO lines to stderr (Spark forwards it to the driver's console) unless the root
    logger has handlers, in which case the record reaches them by propagation instead."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


if not any(isinstance(h, _StderrUnlessConfigured) for h in log.handlers):
    _handler = _StderrUnlessConfigured()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(_handler)
    if log.level == logging.NOTSET:  # the runner inherits the driver's environment
        _level = logging.getLevelName(os.environ.get("PULSAR_THROTTLED_LOG_LEVEL", "INFO").upper())
        log.setLevel(_level if isinstance(_level, int) else logging.INFO)

UNLIMITED_ROWS = 2**62  # "no cap" as a ReadMaxRows, so Trigger.Once's ReadAllAvailable stays distinguishable


class PublishRateTracker:
    """Publish rates from deltas of the broker's live counters between catalog snapshots.

    The broker's msgRateIn is refreshed only every statsUpdateFrequencyInSecs (60 s by
    default); counter deltas follow a producer within one refresh interval.
    """

    def __init__(self) -> None:
        self._prev: dict[str, tuple[float, int, int]] = {}
        self.rates: dict[str, tuple[float, float]] = {}

    def update(self, snap: CatalogSnapshot) -> None:
        for partition, s in snap.stats.items():
            prev = self._prev.get(partition)
            if prev is not None and snap.fetched_at > prev[0]:
                dt = snap.fetched_at - prev[0]
                dm, db = s.msg_in_counter - prev[1], s.bytes_in_counter - prev[2]
                if dm >= 0 and db >= 0:  # counters reset when a topic is reloaded: skip that sample
                    self.rates[partition] = (dm / dt, db / dt)
            elif partition not in self.rates:
                self.rates[partition] = (s.msg_rate_in, s.throughput_in)
            if prev is None or snap.fetched_at > prev[0]:
                self._prev[partition] = (snap.fetched_at, s.msg_in_counter, s.bytes_in_counter)


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self._clock = clock
        self._admin: PulsarAdmin | None = None
        self._catalog: PartitionCatalog | None = None
        self._policies: BrokerPolicies | None = None
        self._engine: QuotaEngine | None = None
        self._cursor: DurableCursor | None = None
        self._rates = PublishRateTracker()
        self._initial: dict | None = None
        self._target: dict[str, EntryPosition] | None = None  # Trigger.AvailableNow's end
        self._report: dict = {}
        self._warned: set[tuple] = set()
        self._last_summary = ""

    def __getstate__(self) -> dict:
        # Spark pickles this reader into every read task: ship options only, not the
        # driver's admin session, caches or quota engine (rebuilt lazily where needed).
        state = self.__dict__.copy()
        for name in ("_admin", "_catalog", "_policies", "_engine", "_cursor"):
            state[name] = None
        state["_rates"] = PublishRateTracker()
        return state

    # -- lazily built collaborators (the reader is pickled to the runner process first) ---
    @property
    def admin(self) -> PulsarAdmin:
        if self._admin is None:
            o = self.options
            self._admin = PulsarAdmin(o.admin_url, o.admin_timeout_ms / 1000.0, o.admin_auth_token, o.admin_tls_verify,
                                      retry_timeout_s=o.admin_retry_timeout_ms / 1000.0)
        return self._admin

    @property
    def catalog(self) -> PartitionCatalog:
        if self._catalog is None:
            o = self.options
            needs_stats = o.throttled
            self._catalog = PartitionCatalog(self.admin, o.topics, o.topics_pattern, o.pattern_namespace,
                                             o.metadata_refresh_ms, needs_stats)
        return self._catalog

    @property
    def engine(self) -> QuotaEngine:
        if self._engine is None:
            from .quota_store import SqliteQuotaStore

            self._engine = QuotaEngine(self.options.quota, SqliteQuotaStore(self.options.quota_state_path), self._clock)
        return self._engine

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

    # -- offsets ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        # Spark calls this twice at first start: answer the same both times.
        if self._initial is None:
            positions = self._initial_positions(self.catalog.snapshot(force=True))
            if self.options.durable_subscription:
                self.durable_cursor.ensure(positions)  # retention keeps everything from here on
            self._initial = offsets_to_json(positions)
        return self._initial

    def _initial_positions(self, snap: CatalogSnapshot) -> dict[str, EntryPosition]:
        start = self.options.start
        if start.kind == "earliest":
            return {p: _before_first(layout) for p, layout in snap.layouts.items()}
        if start.kind == "latest":  # an open transaction's messages come after "latest" once it commits
            return {p: snap.readable_end(p) for p in snap.layouts}
        if start.kind == "time":
            assert start.time_ms is not None
            return {p: self._position_for_time(p, layout, start.time_ms) for p, layout in snap.layouts.items()}
        given = dict(start.positions)
        unknown = [p for p in given if p not in snap.layouts]
        if unknown:
            raise ValueError(f"Option 'startingOffsets' names partition(s) {', '.join(unknown)} that the query does not read; "
                             f"known partitions: {', '.join(snap.layouts) or 'none'}.")
        out: dict[str, EntryPosition] = {}
        for p, layout in snap.layouts.items():
            value = given.get(p, "latest")
            if value == "earliest":
                out[p] = _before_first(layout)
            elif value == "latest":
                out[p] = snap.readable_end(p)
            else:
                assert isinstance(value, EntryPosition)
                # A user position is the first entry to read; offsets hold the last entry read.
                out[p] = EntryPosition(value.ledger_id, value.entry_id - 1)
        return out

    def _position_for_time(self, partition: str, layout: PartitionLayout, time_ms: int) -> EntryPosition:
        found = self.admin.message_id_by_timestamp(TopicName.parse(partition), time_ms)
        ledger, entry = int(found.get("ledgerId", -1)), int(found.get("entryId", -1))
        if ledger < 0 or EntryPosition(ledger, entry) > layout.latest:
            return layout.latest  # nothing published at or after time_ms yet
        return EntryPosition(ledger, entry - 1)

    def getDefaultReadLimit(self) -> ReadLimit:
        # Never ReadAllAvailable: that one is reserved for Trigger.Once, read unthrottled.
        return ReadMaxRows(self.options.max_entries_per_trigger or UNLIMITED_ROWS)

    def prepareForTriggerAvailableNow(self) -> None:
        snap = self.catalog.snapshot(force=True)
        self._target = {p: snap.readable_end(p) for p in snap.layouts}
        log.info("Trigger.AvailableNow: reading up to %s", offsets_to_json(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        starts = checkpointed_offsets(start, "start offset (from the checkpoint)")
        snap = self.catalog.snapshot()
        if snap.stats:
            self._rates.update(snap)
        starts = self._drop_gone_partitions(starts, snap)

        backlogs: dict[str, Backlog] = {}
        for partition, layout in snap.layouts.items():
            s = starts.get(partition, BEFORE_EARLIEST)  # new partitions are read from their beginning
            self._check_data_loss(partition, layout, s)
            # Never past an open transaction's start (the broker would not dispatch it); with
            # Trigger.AvailableNow, never beyond what was readable when the query started.
            until = snap.readable_end(partition)
            if self._target is not None:
                until = min(until, max(s, self._target.get(partition, BEFORE_EARLIEST)))
            backlogs[partition] = layout.backlog_after(s, until)
        admitted = self._admit(backlogs, limit, snap)
        # Spark ends a Trigger.AvailableNow query at the first trigger that plans no data, so
        # an exhausted quota window must not plan an empty batch before the target is reached:
        # wait for the next window (windows start on whole epoch seconds) and plan again.
        while self._target is not None and not any(admitted.values()) and any(b.entries for b in backlogs.values()):
            log.info("Trigger.AvailableNow: quota exhausted for this window; waiting for the next one")
            time.sleep(1.0 - self._clock() % 1.0 + 0.01)
            admitted = self._admit(backlogs, limit, snap)

        end = dict(starts)
        for partition, backlog in backlogs.items():
            s = starts.get(partition, BEFORE_EARLIEST)
            end[partition] = backlog.position_after(s, admitted.get(partition, 0))
        self._report = self._backlog_report(snap, end)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return self._report or None

    # -- admission ------------------------------------------------------------------------
    def _admit(self, backlogs: dict[str, Backlog], limit: ReadLimit, snap: CatalogSnapshot) -> dict[str, int]:
        wanted = {p: b.entries for p, b in backlogs.items() if b.entries > 0}
        if not wanted:
            return {}
        read_all = isinstance(limit, ReadAllAvailable)
        if isinstance(limit, ReadMaxRows) and limit.max_rows < sum(wanted.values()):
            wanted = split_proportionally(wanted, limit.max_rows)
        if not self.options.throttled:
            return wanted
        if read_all and ("ReadAllAvailable",) not in self._warned:
            self._warned.add(("ReadAllAvailable",))
            log.warning("Trigger.Once asks for all available data: this micro-batch ignores the configured quotas "
                        "(the buckets are still charged). Use Trigger.AvailableNow for throttled catch-up.")
        demands = [self._demand(p, backlogs[p], n, snap) for p, n in wanted.items() if n > 0]
        admissions = self.engine.plan(demands, unthrottled=read_all)
        self._log_summary(admissions)
        return {a.partition: a.entries for a in admissions}

    def _demand(self, partition: str, backlog: Backlog, entries: int, snap: CatalogSnapshot) -> PartitionDemand:
        o = self.options
        topic_rates: list[tuple[str, Rate]] = []
        sub_rates: list[tuple[str, Rate]] = []
        if o.quota_source in ("options", "both"):
            if not o.topic_rate.is_unlimited():
                topic_rates.append(("options", o.topic_rate))
            if not o.subscription_rate.is_unlimited():
                sub_rates.append(("options", o.subscription_rate))
        if o.uses_broker_quotas:
            broker_topic, broker_sub = self.policies.rates(TopicName.parse(partition).base)
            if broker_topic is not None:
                topic_rates.append(("broker", broker_topic))
            if broker_sub is not None:
                sub_rates.append(("broker", broker_sub))
        sample = msgs_per_entry(snap.stats.get(partition), snap.layouts[partition])
        rate_msgs, rate_bytes = self._rates.rates.get(partition, (0.0, 0.0))
        return PartitionDemand(partition=partition, subscription=o.subscription, backlog_entries=entries,
                               bytes_for=backlog.bytes_for, msgs_per_entry_sample=sample,
                               publish_rate_msgs=rate_msgs, publish_rate_bytes=rate_bytes,
                               topic_rates=tuple(topic_rates), subscription_rates=tuple(sub_rates))

    def _log_summary(self, admissions: Sequence[Admission]) -> None:
        summary = self.engine.summary(admissions)
        # Idle polls repeat the same line ~90 times a second: log only what changed or admitted data.
        if any(a.entries for a in admissions) or summary != self._last_summary:
            log.info("Planning %s: %s", self.options.subscription, summary)
        self._last_summary = summary

    # -- data loss and deleted topics -------------------------------------------------------
    def _check_data_loss(self, partition: str, layout: PartitionLayout, start: EntryPosition,
                         end: EntryPosition | None = None) -> None:
        """Unread entries after `start` (up to a planned `end`, for a batch re-run) that are no longer stored."""
        lost = layout.lost_range(start)
        if lost is None and end is not None and start < end and not layout.stores(end) and (layout.first is None or end < layout.first):
            # The planned range ends before the oldest stored entry: its entries were deleted.
            lost = (start, layout.first or EntryPosition(end.ledger_id, end.entry_id + 1))
        if lost is None:
            return
        cursor = layout.cursor(self.options.subscription) if self.options.durable_subscription else None
        if cursor is not None and cursor <= start:
            return  # the broker deletes nothing past a subscription's cursor: only read entries went
        after, before = lost
        message = (f"Data loss in {partition}: the entries after {after} and before {before} are no longer stored "
                   "(retention expired, or the topic was truncated or recreated)."
                   + ("" if self.options.durable_subscription else
                      f" Ledger {after.ledger_id} is deleted, so whether it held entries after {after} is unknown;"
                      " durableSubscription=true keeps unread entries and tells the two apart."))
        if self.options.fail_on_data_loss:
            raise DataLossError(message + " Set failOnDataLoss=false to continue from the oldest stored entry.")
        if (partition, after) not in self._warned:
            self._warned.add((partition, after))
            log.warning("%s Continuing from %s because failOnDataLoss=false.", message, before)

    def _drop_gone_partitions(self, starts: dict[str, EntryPosition], snap: CatalogSnapshot) -> dict[str, EntryPosition]:
        gone = [p for p in starts if p not in snap.layouts]
        if not gone:
            return starts
        if self.options.fail_on_data_loss:
            # After a deletion nobody can tell whether unread messages went with it, so the
            # safe answer is to stop (as Spark's Kafka source does), naming what vanished.
            topics = sorted({str(TopicName.parse(p).base) for p in gone})
            raise DataLossError(f"Topic(s) {', '.join(topics)} were deleted while the query read them; partitions "
                                f"{', '.join(gone)} can no longer be read and messages not yet read may be lost. "
                                "Set failOnDataLoss=false to continue without them.")
        for p in gone:
            if ("gone", p) not in self._warned:
                self._warned.add(("gone", p))
                log.warning("Partition %s no longer exists; the query continues without it (failOnDataLoss=false).", p)
        return {p: s for p, s in starts.items() if p in snap.layouts}

    def _backlog_report(self, snap: CatalogSnapshot, end: dict[str, EntryPosition]) -> dict:
        report = {}
        for partition, layout in snap.layouts.items():
            e = end.get(partition, BEFORE_EARLIEST)
            remaining = layout.backlog_after(e).entries
            per_entry = msgs_per_entry(snap.stats.get(partition), layout)
            report[partition] = {
                "latest": layout.latest.to_json(),
                "backlogEntries": remaining,
                "backlogMessagesEstimate": round(remaining * per_entry) if per_entry else remaining,
            }
        return report

    # -- execution --------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        starts = checkpointed_offsets(start, "start offset of the micro-batch")
        ends = checkpointed_offsets(end, "end offset of the micro-batch")
        snap = self.catalog.snapshot()
        config = self._client_config()
        out: list[InputPartition] = []
        for partition, e in ends.items():
            s = starts.get(partition, BEFORE_EARLIEST)
            if e <= s:
                continue
            layout = snap.layouts.get(partition)
            index = TopicName.parse(partition).partition_index
            if layout is not None:
                # A batch re-run after a restart was planned on an older layout: entries of it deleted
                # since are not in this one, so they are reported here, as planning would.
                self._check_data_loss(partition, layout, s, e)
            if layout is None or layout.latest < e:
                # Planned on a newer layout than this snapshot shows: read without an entry list.
                out.append(PartitionRange(partition, index, s, e, -1, config))
                continue
            backlog = layout.backlog_after(s, e)
            step = self.options.max_entries_per_task
            bounds = [s]
            if step > 0 and backlog.entries > step and backlog.position_after(s, backlog.entries) == e:
                bounds += [backlog.position_after(s, k) for k in range(step, backlog.entries, step)]
            bounds.append(e)
            for lo, hi in zip(bounds, bounds[1:]):
                runs = layout.backlog_after(lo, hi).runs
                out.append(PartitionRange(partition, index, lo, hi, sum(r[2] for r in runs), config,
                                          tuple((ledger, first, count) for ledger, first, count, _ in runs)))
        return out

    def _client_config(self) -> ClientConfig:
        o = self.options
        return ClientConfig(o.service_url, o.client_kwargs, o.reader_kwargs, o.auth_params, o.poll_timeout_ms,
                            o.max_rows_per_arrow_batch, admin_url=o.admin_url, admin_token=o.admin_auth_token,
                            admin_tls_verify=o.admin_tls_verify, admin_timeout_ms=o.admin_timeout_ms,
                            fail_on_data_loss=o.fail_on_data_loss, incomplete_chunk_wait_ms=o.incomplete_chunk_wait_ms,
                            private_key_path=o.private_key_path, public_key_path=o.public_key_path,
                            crypto_failure_action=o.crypto_failure_action)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PartitionRange)
        return read_range(partition)

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint. Reads use non-durable readers, so nothing is held back
        # on the broker unless a durable subscription was asked for: then its cursor follows.
        if self.options.durable_subscription:
            self.durable_cursor.follow(checkpointed_offsets(end, "committed offset"))

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()


def _before_first(layout: PartitionLayout) -> EntryPosition:
    """"earliest" as a concrete position (before the oldest stored entry), so that a batch re-run after
    retention deleted its entries is reported as loss, as Kafka's resolved earliest offsets are."""
    first = layout.first
    return BEFORE_EARLIEST if first is None else EntryPosition(first.ledger_id, -1)


def split_proportionally(wanted: dict[str, int], total: int) -> dict[str, int]:
    """Cap the sum of entries at `total`, in proportion to each partition's backlog."""
    if total <= 0:
        return {p: 0 for p in wanted}
    whole = sum(wanted.values())
    shares = {p: min(n, n * total // whole) for p, n in wanted.items()}
    left = total - sum(shares.values())
    for p in sorted(wanted, key=lambda p: wanted[p] - shares[p], reverse=True):
        if left <= 0:
            break
        if shares[p] < wanted[p]:
            shares[p] += 1
            left -= 1
    return shares


def msgs_per_entry(stats: PublishStats | None, layout: PartitionLayout) -> float | None:
    """Average messages per entry from the publish-side counters; None while unknown."""
    if stats is None or layout.entries_added <= 0 or stats.msg_in_counter <= 0:
        return None
    return stats.msg_in_counter / layout.entries_added
