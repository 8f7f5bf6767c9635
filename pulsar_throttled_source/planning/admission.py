"""How many backlog entries each partition may advance in the next micro-batch.

Spark's read limit (maxEntriesPerTrigger, or Trigger.Once's read-all on 4.2+; see read_limit)
caps the batch first; the quota engine then admits what the configured and broker quotas allow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from ..metadata.backlog_sizes import BacklogSizes
from ..metadata.layout import Backlog
from ..metadata.policies import BrokerPolicies
from ..options import SourceOptions
from ..quota_settings import Rate
from ..throttling.demands import Admission, PartitionDemand
from ..throttling.engine import QuotaEngine
from ..throttling.publish_rates import PublishRateTracker
from ..throttling.report import LevelReport
from ..topics import TopicName
from .read_limit import BatchLimit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TriggerOutcome:
    """What held the last planned batch back, for the query progress (planning/progress.py)."""

    held_back: dict[str, str] = field(default_factory=dict)  # partition -> why it got less than its backlog
    levels: tuple[LevelReport, ...] = ()  # per quota level, as the plan charged it (none: no plan ran)
    floor_held: bool = False  # the trigger floor (minEntriesPerTrigger) held the whole batch back
    read_limit_cut: int = 0  # partitions maxEntriesPerTrigger gave less than their backlog


@dataclass(frozen=True)
class AdmittedBatch:
    """admit()'s answer: the entries each partition may advance, and what held the batch back."""

    entries: dict[str, int]  # partition -> entries admitted (none: no batch)
    outcome: TriggerOutcome = field(default_factory=TriggerOutcome)


class BatchAdmission:
    """Turns backlogs and Spark's read limit into entries per partition, logging the quota verdict."""

    def __init__(self, options: SourceOptions, engine: Callable[[], QuotaEngine],
                 policies: BrokerPolicies, rates: PublishRateTracker, backlog_sizes: BacklogSizes) -> None:
        self._options = options
        self._engine = engine  # built lazily: a query without quotas never opens the quota store
        self._policies = policies
        self._rates = rates
        self._backlog_sizes = backlog_sizes  # entries looked up when a quota needs them (see throttling.partition_plan.new_plan)
        self._warned_read_all = False
        self._last_summary = ""

    @property
    def backlog_sizes(self) -> BacklogSizes:
        """The entry lookups behind the quotas (what is known and under way)."""
        return self._backlog_sizes

    def admit(self, backlogs: dict[str, Backlog], limit: BatchLimit,
              accept: Callable[[int], bool] | None = None, entry_caps: Mapping[str, int] | None = None) -> AdmittedBatch:
        """Entries per partition for the next batch. `accept` (the trigger floor) sees the total
        admitted and may refuse the batch: then {} is returned and no quota is charged. `entry_caps`: the
        entries maxMessagesPerTrigger leaves each partition (planning/message_cap.py), applied first."""
        wanted = {p: b.entries for p, b in backlogs.items() if b.entries > 0}
        if entry_caps is not None:
            wanted = {p: n for p, b in wanted.items() if (n := min(b, entry_caps.get(p, 0))) > 0}
        if not wanted:
            return AdmittedBatch({})
        outcome = TriggerOutcome()
        read_all = limit.read_all
        if limit.max_entries is not None and limit.max_entries < sum(wanted.values()):
            capped = split_proportionally(wanted, limit.max_entries)
            outcome = TriggerOutcome(read_limit_cut=sum(1 for p, n in capped.items() if n < wanted[p]))
            wanted = capped
        if not self._options.throttled:
            if accept is None or accept(sum(wanted.values())):
                return AdmittedBatch(wanted, outcome)
            return AdmittedBatch({}, replace(outcome, floor_held=True))
        if read_all and not self._warned_read_all:
            self._warned_read_all = True
            log.warning("Trigger.Once asks for all available data: this micro-batch ignores the configured quotas "
                        "(the buckets are still charged). Use Trigger.AvailableNow for throttled catch-up.")
        self._backlog_sizes.new_plan(len(wanted))
        demands = [self._demand(p, backlogs[p], n) for p, n in wanted.items() if n > 0]
        engine = self._engine()
        plan = engine.plan(demands, unthrottled=read_all, accept=accept)
        if not plan.admissions:
            # held back by `accept`: nothing charged, nothing to look up ahead
            return AdmittedBatch({}, replace(outcome, floor_held=bool(demands)))
        outcome = replace(outcome, levels=plan.levels,
                          held_back={a.partition: a.held_back for a in plan.admissions if a.held_back})
        self._log_summary(engine.summary(plan), plan.admissions)
        for admission in plan.admissions:  # the next window's entries, looked up while this batch runs
            self._backlog_sizes.prefetch(admission.partition, backlogs[admission.partition], admission.entries)
        return AdmittedBatch({a.partition: a.entries for a in plan.admissions}, outcome)

    def _demand(self, partition: str, backlog: Backlog, entries: int) -> PartitionDemand:
        o = self._options
        topic_rates: list[tuple[str, Rate]] = []
        sub_rates: list[tuple[str, Rate]] = []
        if o.quota_source in ("options", "both"):
            if not o.topic_rate.is_unlimited():
                topic_rates.append(("options", o.topic_rate))
            if not o.subscription_rate.is_unlimited():
                sub_rates.append(("options", o.subscription_rate))
        if o.uses_broker_quotas:
            broker_topic, broker_sub = self._policies.rates(TopicName.parse(partition).base)
            if broker_topic is not None:
                topic_rates.append(("broker", broker_topic))
            if broker_sub is not None:
                sub_rates.append(("broker", broker_sub))
        rate_msgs, rate_bytes = self._rates.rates.get(partition, (0.0, 0.0))
        sizes = self._backlog_sizes
        return PartitionDemand(partition=partition, subscription=o.subscription, backlog_entries=entries,
                               bytes_for=backlog.bytes_for,
                               learn_backlog=sizes.learner(partition, backlog),
                               estimate_backlog=partial(sizes.estimate, partition, backlog),
                               publish_rate_msgs=rate_msgs, publish_rate_bytes=rate_bytes,
                               topic_rates=tuple(topic_rates), subscription_rates=tuple(sub_rates))

    def _log_summary(self, summary: str, admissions: Sequence[Admission]) -> None:
        # Idle polls repeat the same line ~90 times a second: log only what changed or admitted data.
        if any(a.entries for a in admissions) or summary != self._last_summary:
            log.info("Planning %s: %s", self._options.subscription, summary)
        self._last_summary = summary


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
