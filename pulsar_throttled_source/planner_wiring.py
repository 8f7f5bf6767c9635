"""The driver's planner (planning/micro_batch_planner.py) built from a stream's options: every collaborator made
once, here, and handed to the planner's constructor.

The stream reader calls this at its first planning call, in the long-lived Python process where Spark plans
(never in read tasks, which get pickled copies of a reader that never planned): the admin session, the catalog's
refresh thread and the quota store live in that process only (docs/PROCESSES.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from .adaptive_throttle import AdaptiveThrottle
from .console_log import enable_console_log
from .metadata.admin import PulsarAdmin
from .metadata.backlog_sizes import BacklogSizes
from .metadata.catalog import CatalogSettings, PartitionCatalog
from .metadata.durable_cursor import DurableCursor
from .metadata.policies import BrokerPolicies
from .metadata.publish_times import OldestUnread
from .options import SourceOptions
from .planning.admission import BatchAdmission
from .planning.data_loss import DataLossPolicy
from .planning.message_cap import MessageCap
from .planning.micro_batch_planner import MicroBatchPlanner, PlannerParts
from .planning.progress import ProgressReports
from .planning.trigger_floor import TriggerFloor
from .reading.read_path import describe_read_path, read_path_name
from .schemas.columns import ValueSchema
from .schemas.schema_guard import TopicSchemaGuard
from .throttling.engine import QuotaEngine
from .throttling.publish_rates import PublishRateTracker

log = logging.getLogger(__name__)


class QuotaEngines:
    """The query's quota engine, keyed on the query's identity (known at the first plan, from its offsets): built
    when a quota first needs it (a query without quotas never opens the quota store), again for a new identity."""

    def __init__(self, options: SourceOptions, clock: Callable[[], float], adaptive: AdaptiveThrottle | None) -> None:
        self._options, self._clock, self._adaptive = options, clock, adaptive
        self._query_id: str | None = None
        self._engine: QuotaEngine | None = None

    def identify(self, query_id: str) -> None:
        if query_id != self._query_id:
            self._query_id, self._engine = query_id, None  # the source-wide bucket is keyed on it

    def __call__(self) -> QuotaEngine:
        if self._engine is None:
            from .throttling.store_factory import open_quota_store

            assert self._query_id is not None, "the query's identity is known before its first plan"
            o, adaptive = self._options, self._adaptive
            store = open_quota_store(o.quota_store, o.quota_state_path)
            self._engine = QuotaEngine(replace(o.quota, query_id=self._query_id), store, self._clock,
                                       adaptive.multiplier(store) if adaptive else None, adaptive.note if adaptive else None)
        return self._engine


def build_planner(options: SourceOptions, value_schema: ValueSchema | None, clock: Callable[[], float],
                  sleep: Callable[[float], None], progress_in_offset: bool, catalog: PartitionCatalog | None = None,
                  oldest_unread: Callable[[], OldestUnread] | None = None) -> MicroBatchPlanner:
    """The stream's planner. `catalog` and `oldest_unread` (publish-time lookups) default to the broker's."""
    enable_console_log()  # the first planning call in the planner process
    o = options
    log.info("Read tasks read with %s", describe_read_path(o.read_path, o.client_kwargs, o.reader_kwargs))
    admin = PulsarAdmin.for_planning(o)
    adaptive = AdaptiveThrottle.of(o, clock, admin)
    backlog_sizes = BacklogSizes(admin, latency=adaptive.lookup_latency if adaptive else None)
    policies = BrokerPolicies(admin, o.policy_refresh_ms)
    engines = QuotaEngines(o, clock, adaptive)
    rates = PublishRateTracker()
    progress = ProgressReports(oldest_unread or (lambda: OldestUnread.of_admin(admin)), clock, o.progress_per_partition,
                               read_path_name(o.read_path, o.client_kwargs, o.reader_kwargs))
    floor = o.min_entries_per_trigger
    return MicroBatchPlanner(PlannerParts(
        options=o, admin=admin, catalog=catalog or _catalog(o, admin, value_schema),
        admission=BatchAdmission(o, engines, policies, rates, backlog_sizes), rates=rates,
        data_loss=DataLossPolicy(o.subscription, o.durable_subscription, o.fail_on_data_loss), progress=progress,
        client_config=o.read_task_config(value_schema), clock=clock, sleep=sleep,
        floor=TriggerFloor(floor, o.max_trigger_delay_ms, clock) if floor else None,
        message_cap=MessageCap(backlog_sizes) if o.max_messages_per_trigger is not None else None,
        cursor=DurableCursor(admin, o.subscription) if o.durable_subscription else None,
        adaptive=adaptive, progress_in_offset=progress_in_offset, on_identity=engines.identify,
        closers=(backlog_sizes.close,)))


def _catalog(o: SourceOptions, admin: PulsarAdmin, value_schema: ValueSchema | None) -> PartitionCatalog:
    # Topics a pattern matches later must carry the schema type the query's columns decode.
    guard = TopicSchemaGuard(admin, value_schema).check if o.decode_schema else None
    return PartitionCatalog(admin, CatalogSettings.of(o, streaming=True), on_topics=guard)
