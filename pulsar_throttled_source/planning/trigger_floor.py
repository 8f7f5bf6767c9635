"""The trigger floor (minEntriesPerTrigger with maxTriggerDelay): run a micro-batch now, or wait.

Spark's Kafka source skips a trigger whose batch would hold fewer offsets than minOffsetsPerTrigger,
until the backlog reaches it or maxTriggerDelay has passed since the last batch. Here the floor is
compared with what the plan *admits* (quotas and maxEntriesPerTrigger applied), so a throttled
trigger that could only run a small batch waits too; the quota still decides how much a batch holds.

Pure: the caller supplies the admitted count and the clock, so a fake clock pins every rule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..options.parse import check_reachable

if TYPE_CHECKING:
    from ..options import SourceOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    run: bool
    reason: str  # for the log line: why the batch runs or waits


class TriggerFloor:
    """Decides per trigger whether `admitted` entries are enough to run a batch.

    The delay counts from the last batch planned, or, before the first, from the query's first
    trigger (Kafka counts from epoch 0, so its first trigger always runs: a restart with a small
    backlog would write the small batch the floor exists to avoid)."""

    def __init__(self, min_entries: int, max_delay_ms: int, clock: Callable[[], float]) -> None:
        self.min_entries = min_entries
        self.max_delay_s = max_delay_ms / 1000.0
        self._clock = clock
        self._since: float | None = None  # when the delay started counting
        self._last_logged: tuple[bool, int] | None = None

    def verdict(self, admitted: int) -> Verdict:
        now = self._clock()
        if self._since is None:
            self._since = now
        if admitted <= 0:
            return Verdict(False, "nothing to admit")
        floor = self.min_entries
        if admitted >= floor:
            return Verdict(True, f"{admitted} entries reach the floor of {floor}")
        waited = now - self._since
        if waited >= self.max_delay_s:
            return Verdict(True, f"{admitted} entries (< {floor}), released by maxTriggerDelay after {waited:.1f} s")
        return Verdict(False, f"{admitted} entries < minEntriesPerTrigger {floor}; waiting at most "
                              f"{self.max_delay_s - waited:.1f} s more (maxTriggerDelay)")

    def batch_planned(self) -> None:
        """A batch runs: the delay counts again from now."""
        self._since = self._clock()

    def accepts(self, admitted: int) -> bool:
        """verdict() with one INFO line when it changes (Spark may ask ~90 times a second)."""
        verdict = self.verdict(admitted)
        if admitted > 0 and (verdict.run, admitted) != self._last_logged:
            log.info("Trigger floor: %s: %s", "running the batch" if verdict.run else "no batch yet", verdict.reason)
        self._last_logged = (verdict.run, admitted)
        return verdict.run


def check_partition_quotas(min_entries: int, o: SourceOptions, partitions: int) -> None:
    """The per-partition message quotas admit at most quota x partitions entries per trigger: known once the
    partitions are (not for a pattern, whose partitions may grow; a broker policy or relative quota may change)."""
    if o.topics_pattern is not None or o.quota_source == "broker" or partitions <= 0:
        return
    for option, rate in (("dispatchThrottlingRatePerTopicInMsg", o.topic_rate),
                         ("dispatchThrottlingRatePerSubscriptionInMsg", o.subscription_rate)):
        if rate.msgs > 0 and not rate.relative_to_publish_rate:
            check_reachable(min_entries, option, rate.msgs * partitions,
                            f" = {rate.msgs} messages per window x {partitions} partitions")
