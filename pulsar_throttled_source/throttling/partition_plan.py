"""One partition's admission while the passes (allocation) work it out: whether throttling applies to it,
how its entries convert to messages and bytes, and what it has been admitted so far, charged to its buckets.

Building one (new_plan) may call the demand's learn_backlog, which may look entries up on the broker:
the engine builds every plan before it locks the buckets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..backlog_values import BacklogValues, LearnedBacklog
from ..quota_settings import QuotaConfig
from .buckets import Bucket, BucketSpec
from .demands import Admission, PartitionDemand


@dataclass(slots=True)
class PartitionPlan:
    """One partition's admission while it is being worked out."""

    demand: PartitionDemand
    index: int  # position in the caller's list, for a stable order
    specs: list[BucketSpec]
    msgs_per_entry: float  # 1.0 in batch mode; in precise mode the known entries' average (or 1.0)
    max_entries: int  # backlog, or 1 on a precise-mode first read without an estimate
    unthrottled: str | None
    buckets: list[Bucket] = field(default_factory=list)
    entries: int = 0
    held_back: str | None = None
    limited_by_share: bool = False
    known_msgs: BacklogValues | None = None  # precise mode: the messages of the backlog's first entries
    known_bytes: BacklogValues | None = None  # with a byte quota: their stored bytes
    _bytes_cache: dict[int, float] = field(default_factory=dict)

    @property
    def backlog(self) -> int:
        return max(0, self.demand.backlog_entries)

    def msgs(self, entries: int) -> float:
        return self.known_msgs.total(entries) if self.known_msgs is not None else entries * self.msgs_per_entry

    def bytes(self, entries: int) -> float:
        # Both may walk a list; the binary search asks for the same k repeatedly.
        if entries not in self._bytes_cache:
            known = self.known_bytes
            self._bytes_cache[entries] = (0.0 if not entries else known.total(entries) if known is not None
                                          else float(self.demand.bytes_for(entries)))
        return self._bytes_cache[entries]

    def advance_to(self, entries: int) -> None:
        """Admit up to ``entries`` in total and charge the difference to every bucket."""
        add_msgs = self.msgs(entries) - self.msgs(self.entries)
        add_bytes = self.bytes(entries) - self.bytes(self.entries)
        for bucket in self.buckets:
            bucket.charge(add_msgs, add_bytes)
        self.entries = entries

    def admission(self) -> Admission:
        return Admission(
            partition=self.demand.partition,
            entries=self.entries,
            msgs=self.msgs(self.entries),
            bytes=self.bytes(self.entries),
            held_back=self.held_back if self.entries < self.backlog else None,
            unthrottled=self.unthrottled,
        )


def new_plan(
    demand: PartitionDemand,
    index: int,
    specs: list[BucketSpec],
    config: QuotaConfig,
    unthrottled: bool,
    estimate: LearnedBacklog | None = None,
) -> PartitionPlan:
    """A plan with nothing admitted yet: whether throttling applies, and how entries convert to
    messages and bytes. With a message quota in precise mode, or a byte quota in either mode, that
    asks the demand about the entries the tightest quota could admit (before the buckets are
    locked: it may look entries up), unless `estimate` prices them (see headroom)."""
    backlog = max(0, demand.backlog_entries)
    if unthrottled:
        reason: str | None = "ReadAllAvailable"
    elif not specs:
        reason = "no quota"
    elif not config.throttle_non_backlog and backlog <= config.non_backlog_threshold_entries:
        threshold = config.non_backlog_threshold_entries
        reason = f"auto-off: backlog {backlog} <= threshold {threshold}"
    else:
        reason = None

    max_entries = backlog
    msgs_per_entry = 1.0
    precise = config.mode == "precise"
    msg_quotas = [spec.quota_msgs for spec in specs if math.isfinite(spec.quota_msgs)] if precise else []
    byte_quotas = [spec.quota_bytes for spec in specs if math.isfinite(spec.quota_bytes)]
    learned = LearnedBacklog()
    if estimate is not None and reason is None:
        learned = estimate
    elif backlog and demand.learn_backlog is not None and (msg_quotas or byte_quotas):
        # No window admits more than the tightest quota (plus an entry): learning the entries that
        # hold that much prices every admission by what it reads. (Unthrottled, one entry's
        # values price what is charged.)
        learned = demand.learn_backlog(min(msg_quotas, default=0.0) if reason is None else 0.0,
                                       min(byte_quotas, default=0.0) if reason is None else 0.0)
    # Precise mode counts what the entries hold wherever they were looked up (for a byte quota too),
    # so a plan's messages, charged and reported, are never its entry count under another name.
    known_msgs = learned.msgs if precise and learned.msgs is not None and learned.msgs.per_entry is not None else None
    if known_msgs is not None:
        msgs_per_entry = known_msgs.per_entry or 1.0
    elif msg_quotas and reason is None:
        # Like the broker's first read: without an estimate, read one entry.
        max_entries = min(1, backlog)
    if learned.reach is not None and reason is None:
        max_entries = min(max_entries, max(1, learned.reach))
    known_bytes = learned.bytes if learned.bytes is not None and learned.bytes.per_entry is not None else None
    return PartitionPlan(
        demand=demand,
        index=index,
        specs=specs,
        msgs_per_entry=msgs_per_entry,
        max_entries=max_entries,
        unthrottled=reason,
        known_msgs=known_msgs,
        known_bytes=known_bytes,
    )
