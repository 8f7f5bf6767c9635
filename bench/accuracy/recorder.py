"""What a throttled query delivered, micro-batch by micro-batch, and when each batch was planned.

Deliveries come from a foreachBatch sink (the rows themselves: their entries, count and payload
sizes); planning times and the backlog the source reports come from the query progress. Both are
kept as plain data that serialises to JSON, so the second application of the shared-redis
scenarios (a subprocess) can hand its record back to the bench.
"""

from __future__ import annotations

import json
import math
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pulsar

Position = tuple[int, int]  # (ledgerId, entryId)


@dataclass
class Delivery:
    """What one micro-batch delivered from one partition."""

    entries: dict[Position, int] = field(default_factory=dict)  # entry -> messages delivered from it
    msgs: int = 0
    payload_bytes: int = 0  # sum of the messages' values (what a reader is handed, no metadata)

    def to_json(self) -> dict[str, Any]:
        return {"entries": [[l, e, n] for (l, e), n in sorted(self.entries.items())], "msgs": self.msgs,
                "payload_bytes": self.payload_bytes}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Delivery:
        return cls({(int(l), int(e)): int(n) for l, e, n in d["entries"]}, int(d["msgs"]), int(d["payload_bytes"]))


@dataclass(frozen=True)
class Plan:
    """One trigger's planning step, from its query progress (with or without data)."""

    batch_id: int
    window: int  # the quota window latestOffset ended in: the engine plans at its end
    has_data: bool  # a micro-batch ran (Spark skips the batch when the plan admitted nothing)
    backlog_after: dict[str, int]  # partition -> entries left after this plan (the source's report)

    def to_json(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "window": self.window, "has_data": self.has_data, "backlog_after": self.backlog_after}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Plan:
        return cls(int(d["batch_id"]), int(d["window"]), bool(d["has_data"]), {k: int(v) for k, v in d["backlog_after"].items()})


class Recorder:
    """foreachBatch sink: per batch and partition, the entries, messages and payload bytes delivered."""

    def __init__(self) -> None:
        self.batches: dict[int, dict[str, Delivery]] = {}
        self.lock = threading.Lock()  # foreachBatch runs on Spark's thread, readers on the bench's

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        got: dict[str, Delivery] = defaultdict(Delivery)
        for r in df.select("topic", "messageId", F.length("value").alias("size")).collect():
            mid = pulsar.MessageId.deserialize(bytes(r.messageId))
            d = got[r.topic]
            position = (mid.ledger_id(), mid.entry_id())
            d.entries[position] = d.entries.get(position, 0) + 1
            d.msgs += 1
            d.payload_bytes += int(r.size or 0)
        with self.lock:
            self.batches[batch_id] = dict(got)

    def data_batches(self) -> int:
        with self.lock:
            return sum(1 for b in self.batches.values() if b)

    def delivered_msgs(self) -> int:
        with self.lock:
            return sum(d.msgs for b in self.batches.values() for d in b.values())

    def snapshot(self) -> dict[int, dict[str, Delivery]]:
        with self.lock:
            return dict(self.batches)


@dataclass
class RunRecord:
    """One query's whole run: its plans and what its batches delivered."""

    plans: list[Plan]
    batches: dict[int, dict[str, Delivery]]

    def to_json(self) -> str:
        return json.dumps({"plans": [p.to_json() for p in self.plans],
                           "batches": {str(b): {p: d.to_json() for p, d in parts.items()} for b, parts in self.batches.items()}})

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        raw = json.loads(text)
        return cls([Plan.from_json(p) for p in raw["plans"]],
                   {int(b): {p: Delivery.from_json(d) for p, d in parts.items()} for b, parts in raw["batches"].items()})


def plans_of(progress: list[dict[str, Any]], period_s: int = 1) -> list[Plan]:
    """Every recorded trigger of a query, oldest first (spark.sql.streaming.noDataProgressEventInterval=0
    makes Spark record the triggers that planned nothing too)."""
    plans = []
    for p in progress:
        durations = p.get("durationMs") or {}
        start = datetime.strptime(p["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        window = math.floor((start + durations.get("latestOffset", 0) / 1000.0) / period_s)
        plans.append(Plan(int(p["batchId"]), window, "addBatch" in durations, _backlog(p)))
    return plans


def _backlog(progress: dict[str, Any]) -> dict[str, int]:
    """Per partition, the entries the source says are left after the plan (`latestOffset` of the
    progress: what reportLatestOffset returned); empty when the source reported nothing."""
    sources = progress.get("sources") or []
    raw = sources[0].get("latestOffset") if sources else None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    parts = raw.get("perPartition") or {}  # the bench's queries set progressPerPartition
    return {p: int(v["entriesBehind"]) for p, v in parts.items() if isinstance(v, dict) and "entriesBehind" in v}
