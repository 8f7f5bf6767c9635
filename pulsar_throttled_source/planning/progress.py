"""What the source reports to Spark's query progress: how far behind the query is after the planned
micro-batch, and what the throttle did this trigger. One compact JSON object per source, the same on
every Spark line (where each line shows it: docs/guides/monitoring.md, "Query progress"):

    {"entriesBehindLatest": 120, "maxEntriesBehindLatest": 70, "avgEntriesBehindLatest": 60.0,
     "messagesBehindLatest": 1200, "maxMessagesBehindLatest": 700, "avgMessagesBehindLatest": 600.0,
     "secondsBehindLatest": 4.2, "partitions": 2, "partitionsBehind": 2,
     "throttle": {"heldBy": "topic", "floorHeld": false, "readLimitHeld": 0,
                  "levels": {"topic": {"heldBack": 2, "windowUsed": 1.0, "debtMessages": 0, "debtBytes": 0,
                                       "windowStartMs": 1764150000000}}},
     "readPath": "native",
     "adaptive": {"multiplier": 0.5, "verdict": "decrease", "fired": ["pendingAdds"], "unreadable": [],
                  "waiting": [],
                  "windowStartMs": 1764150000000,
                  "ceiling": {"topic": {"messages": 1000, "bytes": null, "periodSeconds": 1,
                                        "relativeToPublishRate": false}, "brokerPolicies": false}}}

- lag counts the entries after the batch's end up to the newest readable entry of each partition
  (total, max and average over the partitions read, as Kafka's offsetsBehindLatest); messages are
  estimated from each partition's messages per entry (publish counters), seconds are the age, at
  planning, of the oldest unread message's publish time (max over partitions; null while unknown);
- throttle.levels: per quota level that took part in this trigger's plan (sourceWide, topic,
  subscription, brokerTopic, brokerSubscription): partitions it held back, the share of the fullest
  bucket's window used (0..1), the debt its buckets carry into later windows, and the start (epoch ms) of the
  window this trigger was charged to (the quota engine's clock when it planned); heldBy names the
  level that held back the most partitions (null: none); floorHeld: minEntriesPerTrigger held the
  batch; readLimitHeld: partitions maxEntriesPerTrigger cut;
- "perPartition" (option progressPerPartition only): per partition its newest readable entry and lag;
- "adaptive" (option adaptiveThrottling only, from the first decision on): the multiplier m the quotas are scaled
  by in the current controller window, the window's verdict (decrease, hold, increase), the stress signals that
  fired (lookupLatency, pendingAdds, othersThrottled, batchDuration, publishLatency), those that could not be read and
  those with nothing new since their last verdict (waiting; publishLatency between two broker stats periods), the window's
  start (epoch ms), and the ceilings m scales (each option level set; brokerPolicies: the broker's dispatch-rate
  policies are ceilings too). Built by adaptive_throttle.py.

progress_report is pure: the caller gives the lags, the publish times it knows and the clock's now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..metadata.catalog import CatalogSnapshot
from ..metadata.publish_times import OldestUnread
from ..positions import BEFORE_EARLIEST, EntryPosition
from ..throttling.demands import SOURCE_LEVEL, SUBSCRIPTION_LEVEL, TOPIC_LEVEL
from ..throttling.publish_rates import msgs_per_entry
from .admission import TriggerOutcome

# The level names of the report (JSON keys, metric labels) for the labels the quota engine uses.
LEVEL_KEYS = {SOURCE_LEVEL: "sourceWide", TOPIC_LEVEL: "topic", SUBSCRIPTION_LEVEL: "subscription",
              f"broker {TOPIC_LEVEL}": "brokerTopic", f"broker {SUBSCRIPTION_LEVEL}": "brokerSubscription"}


class Lag(NamedTuple):
    """One partition after the batch's end: entries and (estimated) messages behind, its first unread entry."""

    entries: int
    messages: int
    first_unread: EntryPosition | None


class Lags(NamedTuple):
    """Every partition's lag, and the totals the report shows (computed once per snapshot and end)."""

    partitions: dict[str, Lag]
    behind: dict[str, EntryPosition]  # partitions behind: their first unread entry
    totals: dict[str, Any]


class ProgressReports:
    """The planner's reports, one per planning call: holds the publish-time lookups (built at the first
    report, their thread pool with them), and the lags of the last snapshot and end, which idle polls
    (~90 a second, the same snapshot and end) reuse: each then costs the lookups' bookkeeping only."""

    def __init__(self, oldest_unread: Callable[[], OldestUnread], clock: Callable[[], float], per_partition: bool,
                 read_path: str) -> None:
        self._new_lookups = oldest_unread
        self._lookups: OldestUnread | None = None
        self._clock = clock
        self._per_partition = per_partition
        self._last: tuple[CatalogSnapshot, Mapping[str, EntryPosition], Lags] | None = None
        self._read_path = read_path  # as the driver's environment resolves it (reading/read_path.py)

    def report(self, snap: CatalogSnapshot, end: Mapping[str, EntryPosition], outcome: TriggerOutcome,
               adaptive: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._lookups is None:
            self._lookups = self._new_lookups()
        if self._last is not None and self._last[0] is snap and self._last[1] == end:
            lags = self._last[2]
        else:
            lags = partition_lags(snap, end)
            self._last = (snap, dict(end), lags)
        times = self._lookups.publish_times(lags.behind)
        report = progress_report(snap, lags, times, self._clock(), outcome, self._read_path, self._per_partition)
        if adaptive is not None:
            report["adaptive"] = adaptive
        return report

    def close(self) -> None:
        if self._lookups is not None:
            self._lookups.close()


def partition_lags(snap: CatalogSnapshot, end: Mapping[str, EntryPosition]) -> Lags:
    """Each partition's lag after `end`, up to its newest readable entry."""
    partitions: dict[str, Lag] = {}
    for partition, layout in snap.layouts.items():
        backlog = layout.backlog_after(end.get(partition, BEFORE_EARLIEST), snap.readable_end(partition))
        if not backlog.runs:
            partitions[partition] = CAUGHT_UP
            continue
        entries = backlog.entries
        per_entry = msgs_per_entry(snap.stats.get(partition), layout)
        ledger, entry, _, _ = backlog.runs[0]
        partitions[partition] = Lag(entries, round(entries * per_entry) if per_entry else entries, EntryPosition(ledger, entry))
    totals = {**spread("EntriesBehindLatest", [l.entries for l in partitions.values()]),
              **spread("MessagesBehindLatest", [l.messages for l in partitions.values()])}
    behind = {p: l.first_unread for p, l in partitions.items() if l.first_unread is not None}
    return Lags(partitions, behind, totals)


CAUGHT_UP = Lag(0, 0, None)


def progress_report(snap: CatalogSnapshot, lags: Lags, publish_ms: Mapping[str, int], now: float,
                    outcome: TriggerOutcome, read_path: str, per_partition: bool = False) -> dict[str, Any]:
    """The report (see the module doc). `publish_ms`: the publish time of the first unread entry of
    partitions behind, where known; `now`: epoch seconds."""
    seconds = {p: max(0.0, round(now - publish_ms[p] / 1000.0, 3)) for p in lags.behind if p in publish_ms}
    report: dict[str, Any] = {**lags.totals,
                              "secondsBehindLatest": max(seconds.values(), default=None if lags.behind else 0.0),
                              "partitions": len(lags.partitions), "partitionsBehind": len(lags.behind),
                              "throttle": throttle_report(outcome), "readPath": read_path}
    if per_partition:
        report["perPartition"] = {p: {"latest": snap.readable_end(p).to_json(), "entriesBehind": lag.entries,
                                      "messagesBehind": lag.messages,
                                      "secondsBehind": seconds.get(p, None if lag.entries else 0.0),
                                      "heldBackBy": level_of(outcome.held_back.get(p))}
                                  for p, lag in lags.partitions.items()}
    return report


def spread(name: str, numbers: list[int]) -> dict[str, Any]:
    """Total, max and average over partitions, as {"<name>", "max<name>", "avg<name>"} (total first)."""
    total = sum(numbers)
    return {name[0].lower() + name[1:]: total, f"max{name}": max(numbers, default=0),
            f"avg{name}": round(total / len(numbers), 3) if numbers else 0.0}


def throttle_report(outcome: TriggerOutcome) -> dict[str, Any]:
    held: dict[str, int] = {}
    for reason in outcome.held_back.values():
        key = level_of(reason)
        if key is not None:
            held[key] = held.get(key, 0) + 1
    levels = {}
    for level in outcome.levels:
        key = LEVEL_KEYS.get(level.label, level.label)
        levels[key] = {"heldBack": held.get(key, 0), "windowUsed": round(level.window_used, 4),
                       "debtMessages": round(level.debt_msgs, 3), "debtBytes": round(level.debt_bytes, 3),
                       "windowStartMs": level.window_start_ms}
    held_by = max(held, key=lambda k: held[k]) if held else None
    return {"heldBy": held_by, "floorHeld": outcome.floor_held, "readLimitHeld": outcome.read_limit_cut, "levels": levels}


def level_of(reason: str | None) -> str | None:
    """The level a held-back reason names ("topic quota exhausted (msgs)" -> "topic"; None: none does)."""
    if not reason:
        return None
    # Longest label first: "broker topic ..." is not the options' "topic".
    for label in sorted(LEVEL_KEYS, key=len, reverse=True):
        if reason.startswith(label + " "):
            return LEVEL_KEYS[label]
    return None
