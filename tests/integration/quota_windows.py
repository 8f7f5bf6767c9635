"""What a foreachBatch sink received per micro-batch of a throttled query, and the quota window each
batch was planned in: quota windows are epoch aligned, so a batch is attributed to the window(s) its
planning may have run in (from the query progress: trigger start .. end of latestOffset), and the
checks are on entries/messages/bytes per micro-batch and per window, never on wall-clock speed. Also how
the throttling tests start and stop such a query and send it entries."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pulsar

PERIOD_S = 1
TRIGGER = {"processingTime": f"{PERIOD_S} second"}


@dataclass
class Batch:
    batch_id: int
    wall: float  # when the sink saw it
    entries: dict[str, set[tuple[int, int]]]  # partition topic -> distinct (ledger, entry)
    msgs: dict[str, int]
    value_bytes: dict[str, int]
    ids: list[bytes]
    planned: tuple[float, float] | None = None  # planning ran in [trigger start, end of latestOffset]
    values: list[bytes] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(self.msgs.values())

    def n_entries(self, partition: str) -> int:
        return len(self.entries.get(partition, ()))

    def planned_windows(self, period_s: int = PERIOD_S) -> tuple[int, ...]:
        assert self.planned is not None
        lo, hi = self.planned
        return tuple(range(math.floor(lo / period_s), math.floor(hi / period_s) + 1))


@dataclass
class Sink:
    """foreachBatch target; a batch re-run after a failure replaces its record."""

    name: str = "query"
    period_s: int = PERIOD_S
    batches: dict[int, Batch] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("topic", "messageId", "value").collect()
        entries: dict[str, set[tuple[int, int]]] = defaultdict(set)
        msgs: dict[str, int] = defaultdict(int)
        size: dict[str, int] = defaultdict(int)
        ids, values = [], []
        for r in rows:
            raw = bytes(r.messageId)
            mid = pulsar.MessageId.deserialize(raw)
            entries[r.topic].add((mid.ledger_id(), mid.entry_id()))
            msgs[r.topic] += 1
            size[r.topic] += len(r.value)
            ids.append(raw)
            values.append(bytes(r.value))
        with self.lock:
            self.batches[batch_id] = Batch(batch_id, time.time(), dict(entries), dict(msgs), dict(size), ids, values=values)

    # -- views ---------------------------------------------------------------------------
    def snapshot(self) -> list[Batch]:
        with self.lock:
            return [self.batches[b] for b in sorted(self.batches)]

    def data_batches(self) -> list[Batch]:
        return [b for b in self.snapshot() if b.rows]

    def total(self) -> int:
        return sum(b.rows for b in self.snapshot())

    def attach_progress(self, query) -> None:
        """Planning interval of each batch: progress timestamp (trigger start) .. + latestOffset."""
        planned = {batch_id: planning_interval(p) for batch_id, p in planned_batches(query).items()}
        previous = 0.0
        for b in self.snapshot():
            # A batch whose progress was not recorded (query stopped right after it) was
            # planned after the previous batch was planned and before the sink saw it.
            b.planned = planned.get(b.batch_id, (previous, b.wall))
            previous = b.planned[1]

    def table(self, partitions: list[str]) -> str:
        lines = [f"{self.name}: batch, planned (window of {self.period_s} s), then entries/msgs/value bytes per partition"]
        for b in self.snapshot():
            when = f"{b.planned[0]:.3f}+{b.planned[1] - b.planned[0]:.3f}s {b.planned_windows(self.period_s)}" if b.planned else "?"
            cells = " | ".join(f"{b.n_entries(p)}e/{b.msgs.get(p, 0)}m/{b.value_bytes.get(p, 0)}B" for p in partitions)
            lines.append(f"  #{b.batch_id} {when}: {cells}")
        return "\n".join(lines)


def planning_interval(progress) -> tuple[float, float]:
    start = datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
    return start, start + (progress["durationMs"] or {}).get("latestOffset", 0) / 1000.0


def placements(batches: list[Batch], period_s: int = PERIOD_S) -> Iterator[tuple[int, ...]]:
    """Every way to place each batch in one of the quota windows it may have been planned in (the
    window of each batch, in order; batches of several queries share ids): a batch whose planning
    crossed a window boundary has two."""
    possible = [b.planned_windows(period_s) for b in batches]
    ambiguous = sum(len(w) > 1 for w in possible)
    assert ambiguous <= 12, f"{ambiguous} batches with an ambiguous planning window: the machine is too slow"
    yield from itertools.product(*possible)


def per_window_ok(batches: list[Batch], measure, limit: float, period_s: int = PERIOD_S) -> tuple[bool, str]:
    """Is there a placement of batches in their possible planning windows such that, per
    window and partition, the summed measure(batch, partition) is <= limit? (Batches of
    several queries may be mixed: they then share the limit.)"""
    worst = ""
    for placed in placements(batches, period_s):
        totals: dict[tuple[int, str], float] = defaultdict(float)
        for b, window in zip(batches, placed, strict=True):
            for p in b.entries:
                totals[(window, p)] += measure(b, p)
        over = {k: v for k, v in totals.items() if v > limit + 1e-9}
        if not over:
            return True, ""
        worst = f"windows over {limit}: {sorted(over.items())}"
    return False, worst


def sharing_a_window(batches: list[Batch], b: Batch) -> list[Batch]:
    """The batches that may have been planned in the same quota window as `b` (b included).

    A trigger that runs late (a cold first plan, a busy machine) can plan two batches in one
    window: the second gets what the first left. So "a window used its quota" is checked on the
    sum over these batches, which is at least what b's actual window admitted."""
    mine = set(b.planned_windows())
    return [x for x in batches if mine & set(x.planned_windows())]


def shares_no_window(batches: list[Batch], b: Batch) -> bool:
    return sharing_a_window(batches, b) == [b]


def planned_batches(query) -> dict[int, dict]:
    """Progress of the triggers that ran a batch, by batch id."""
    return {int(p["batchId"]): p for p in query.recentProgress if "addBatch" in (p["durationMs"] or {})}


def options(broker, tmp_path: Path, topic: str, **extra) -> dict[str, str]:
    opts = {
        "service.url": broker.service_url,
        "admin.url": broker.admin_url,
        "topic": topic,
        "startingOffsets": "earliest",
        "quotaStatePath": str(tmp_path / "quota.sqlite"),
        "metadataRefreshIntervalMs": "400",
    }
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def start_query(spark, opts: dict[str, str], checkpoint: Path, sink: Sink, trigger: dict | None = None):
    reader = spark.readStream.format("pulsar-throttled")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.foreachBatch(sink).trigger(**(trigger or TRIGGER))
            .option("checkpointLocation", str(checkpoint)).start())


def stop(query, sink: Sink) -> None:
    # Let the progress of the last batch the sink saw be recorded (it holds its planning time).
    last = max((b.batch_id for b in sink.snapshot()), default=-1)
    deadline = time.monotonic() + 10
    while query.isActive and last not in planned_batches(query) and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()
    sink.attach_progress(query)


def send_entries(client: pulsar.Client, topic: str, n: int, prefix: str = "b", payload_size: int = 0) -> None:
    """n non-batched messages (n entries) sent as one quick burst."""
    producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    errors = []
    for i in range(n):
        body = f"{prefix}-{i}".encode().ljust(payload_size, b".")
        producer.send_async(body, lambda res, _mid: errors.append(res) if res != pulsar.Result.Ok else None)
    producer.flush()
    producer.close()
    assert not errors, errors
