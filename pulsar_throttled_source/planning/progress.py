"""What the source reports to Spark's query progress: how far behind the query is after the planned
micro-batch, and what the throttle did this trigger. One compact JSON object per source, the same on
every Spark line (where each line shows it: README, "Query progress"):

    {"entriesBehindLatest": 120, "maxEntriesBehindLatest": 70, "avgEntriesBehindLatest": 60.0,
     "messagesBehindLatest": 1200, "maxMessagesBehindLatest": 700, "avgMessagesBehindLatest": 600.0,
     "secondsBehindLatest": 4.2, "partitions": 2, "partitionsBehind": 2,
     "throttle": {"heldBy": "topic", "floorHeld": false, "readLimitHeld": 0,
                  "levels": {"topic": {"heldBack": 2, "windowUsed": 1.0, "debtMessages": 0, "debtBytes": 0}}},
     "readPath": "native"}

- lag counts the entries after the batch's end up to the newest readable entry of each partition
  (total, max and average over the partitions read, as Kafka's offsetsBehindLatest); messages are
  estimated from each partition's messages per entry (publish counters), seconds are the age, at
  planning, of the oldest unread message's publish time (max over partitions; null while unknown);
- throttle.levels: per quota level that took part in this trigger's plan (sourceWide, topic,
  subscription, brokerTopic, brokerSubscription): partitions it held back, the share of the fullest
  bucket's window used (0..1), and the debt its buckets carry into later windows; heldBy names the
  level that held back the most partitions (null: none); floorHeld: minEntriesPerTrigger held the
  batch; readLimitHeld: partitions maxEntriesPerTrigger cut;
- "perPartition" (option progressPerPartition only): per partition its newest readable entry and lag.

Pure: the caller gives the snapshot, the ends, the publish times it knows and the clock's now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..metadata.catalog import CatalogSnapshot
from ..metadata.publish_times import OldestUnread
from ..positions import BEFORE_EARLIEST, EntryPosition
from ..throttling.model import SOURCE_LEVEL, SUBSCRIPTION_LEVEL, TOPIC_LEVEL
from .admission import TriggerOutcome
from .publish_rates import msgs_per_entry

# The level names of the report (JSON keys, metric labels) for the labels the quota engine uses.
LEVEL_KEYS = {SOURCE_LEVEL: "sourceWide", TOPIC_LEVEL: "topic", SUBSCRIPTION_LEVEL: "subscription",
              f"broker {TOPIC_LEVEL}": "brokerTopic", f"broker {SUBSCRIPTION_LEVEL}": "brokerSubscription"}


class ProgressReports:
    """The reader's reports, one per planning call: holds the publish-time lookups (built lazily: the
    reader is pickled to the runner first) and what the report needs that does not change per call."""

    def __init__(self, oldest_unread: Callable[[], OldestUnread], clock: Callable[[], float], per_partition: bool) -> None:
        self._new_lookups = oldest_unread
        self._lookups: OldestUnread | None = None
        self._clock = clock
        self._per_partition = per_partition
        self.read_path = "python"  # as the driver's environment resolves it (see reading/read_path.py)

    def report(self, snap: CatalogSnapshot, end: Mapping[str, EntryPosition], outcome: TriggerOutcome) -> dict[str, Any]:
        if self._lookups is None:
            self._lookups = self._new_lookups()
        times = self._lookups.publish_times(first_unread(snap, end))
        return progress_report(snap, end, times, self._clock(), outcome, self.read_path, self._per_partition)

    def close(self) -> None:
        if self._lookups is not None:
            self._lookups.close()


def first_unread(snap: CatalogSnapshot, end: Mapping[str, EntryPosition]) -> dict[str, EntryPosition]:
    """Each partition that is behind after `end`: its first unread entry."""
    out = {}
    for partition, layout in snap.layouts.items():
        backlog = layout.backlog_after(end.get(partition, BEFORE_EARLIEST), snap.readable_end(partition))
        if backlog.runs:
            ledger, entry, _, _ = backlog.runs[0]
            out[partition] = EntryPosition(ledger, entry)
    return out


def progress_report(snap: CatalogSnapshot, end: Mapping[str, EntryPosition], publish_ms: Mapping[str, int],
                    now: float, outcome: TriggerOutcome, read_path: str, per_partition: bool = False) -> dict[str, Any]:
    """The report (see the module doc). `publish_ms`: the publish time of the first unread entry of
    partitions behind, where known; `now`: epoch seconds."""
    entries: dict[str, int] = {}
    messages: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for partition, layout in snap.layouts.items():
        behind = layout.backlog_after(end.get(partition, BEFORE_EARLIEST), snap.readable_end(partition)).entries
        per_entry = msgs_per_entry(snap.stats.get(partition), layout) if behind else None
        entries[partition] = behind
        messages[partition] = round(behind * per_entry) if per_entry else behind
        if behind and partition in publish_ms:
            seconds[partition] = max(0.0, round(now - publish_ms[partition] / 1000.0, 3))
    lagging = [p for p, n in entries.items() if n]
    report: dict[str, Any] = {**spread("EntriesBehindLatest", entries.values()),
                              **spread("MessagesBehindLatest", messages.values()),
                              "secondsBehindLatest": max(seconds.values(), default=None if lagging else 0.0),
                              "partitions": len(entries), "partitionsBehind": len(lagging),
                              "throttle": throttle_report(outcome), "readPath": read_path}
    if per_partition:
        report["perPartition"] = {p: {"latest": snap.readable_end(p).to_json(), "entriesBehind": entries[p],
                                      "messagesBehind": messages[p], "secondsBehind": seconds.get(p, None if entries[p] else 0.0),
                                      "heldBackBy": level_of(outcome.held_back.get(p))}
                                  for p in entries}
    return report


def spread(name: str, values: Any) -> dict[str, Any]:
    """Total, max and average over partitions, as {"<name>", "max<name>", "avg<name>"} (total first)."""
    numbers = list(values)
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
                       "debtMessages": round(level.debt_msgs, 3), "debtBytes": round(level.debt_bytes, 3)}
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
