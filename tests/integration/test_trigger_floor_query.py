"""Issue 34: the trigger floor (minEntriesPerTrigger with maxTriggerDelay) on a real broker and Spark 4.2+.

A slow producer makes a stream that would otherwise run a tiny batch per trigger: with the floor, every
batch holds at least the floor, except one released by the delay (then it comes about the delay after the
previous batch), and every message arrives once. With Trigger.AvailableNow the last batch may be under it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from helpers import create_topic, wait_until
from streaming import Collected, source_options, start_collecting

FLOOR = 10
DELAY_S = 5.0


@dataclass
class TimedBatches(Collected):
    """Collected, plus when each batch reached the sink (monotonic seconds)."""

    times: dict[int, float] = field(default_factory=dict)

    def sink(self, df, batch_id: int) -> None:
        super().sink(df, batch_id)
        with self.lock:
            self.times[batch_id] = time.monotonic()

    def sizes(self) -> list[tuple[float, int]]:
        """(time, rows) of each batch that delivered rows, in batch order (Spark's batch 0 may be empty)."""
        with self.lock:
            return [(self.times[b], len(self.batches[b])) for b in sorted(self.batches) if self.batches[b]]


def slow_producer(client, topic: str, count: int, per_second: float, sent: list[bytes]) -> threading.Thread:
    def run() -> None:
        producer = client.create_producer(topic, batching_enabled=False)  # one entry per message
        for i in range(count):
            payload = f"slow-{i}".encode()
            producer.send(payload)
            sent.append(payload)
            time.sleep(1.0 / per_second)
        producer.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_slow_producer_makes_batches_of_at_least_the_floor_or_released_by_the_delay(spark, broker, admin, pulsar_client,
                                                                                        tmp_path, unique):
    topic = create_topic(admin, f"floor-{unique}", 2)
    warm = pulsar_client.create_producer(topic, batching_enabled=False)
    sent = [f"warm-{i}".encode() for i in range(FLOOR)]
    for payload in sent:
        warm.send(payload)
    warm.close()
    sink = TimedBatches()
    opts = source_options(broker, topic, startingOffsets="earliest", minEntriesPerTrigger=FLOOR,
                          maxTriggerDelay=f"{int(DELAY_S)}s", quotaStatePath=tmp_path / "q.sqlite")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="300 milliseconds")
    try:
        # The first batch starts the read workers (seconds on a busy machine): time only the batches after it.
        wait_until(lambda: sink.count() >= FLOOR or not q.isActive, 120, what="the first batch")
        warmed = len(sink.sizes())
        producer = slow_producer(pulsar_client, topic, 40, 4.0, sent)  # ~10 s
        producer.join(60)
        wait_until(lambda: sink.count() >= len(sent) or not q.isActive, 60, what="the slow producer's messages")
        # Nothing is left to read now: a tail under the floor can only come by the delay.
        tail = slow_producer(pulsar_client, topic, 3, 20.0, sent)
        tail.join(30)
        wait_until(lambda: sink.count() >= len(sent) or not q.isActive, 60, what="the tail")
        time.sleep(1.0)  # a late duplicate would show here
    finally:
        q.stop()
    assert q.exception() is None, q.exception()
    assert Counter(bytes(r.value) for r in sink.rows) == Counter(sent)  # nothing lost, nothing twice

    # When each batch's trigger started and ended, from Spark's own progress (the sink's times include task start-up).
    batches = [(progress_time(p), progress_time(p) + p["durationMs"]["triggerExecution"] / 1000, p["numInputRows"])
               for p in q.recentProgress if p["numInputRows"] > 0]
    assert [rows for _, _, rows in batches] == [rows for _, rows in sink.sizes()]
    assert len(batches) - warmed >= 4, batches  # the floor gathered entries; without it a batch per trigger (~1 entry)
    for (began, ended, _), (at, _, rows) in zip(batches[warmed - 1:], batches[warmed:], strict=False):
        # A batch under the floor was planned only once the delay had passed since the previous one was
        # (a trigger's timestamp is taken just before the source plans: 1 s of slack on a busy machine).
        assert rows >= FLOOR or at - began >= DELAY_S - 1.0, f"{rows} rows {at - began:.1f} s after the previous batch: {batches}"
        # ... and no batch waited much longer than the delay after the previous one finished.
        assert at - ended <= DELAY_S + 3.0, f"{at - ended:.1f} s without a batch (delay {DELAY_S} s): {batches}"
    assert batches[-1][2] == 3  # the tail, released by the delay


def progress_time(progress: dict) -> float:
    return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def test_available_now_last_batch_may_be_under_the_floor(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"floor-an-{unique}", 2)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    sent = [f"an-{i}".encode() for i in range(23)]
    for payload in sent:
        producer.send(payload)
    producer.close()
    sink = TimedBatches()
    # A topic quota of 5 entries per partition and second: 10 per window on 2 partitions, the floor exactly.
    opts = source_options(broker, topic, startingOffsets="earliest", minEntriesPerTrigger=FLOOR, throttlingMode="batch",
                          dispatchThrottlingRatePerTopicInMsg=5, quotaStatePath=tmp_path / "q.sqlite")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(60), "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    assert Counter(bytes(r.value) for r in sink.rows) == Counter(sent)
    assert [rows for _, rows in sink.sizes()] == [10, 10, 3]  # 2 x 5 per window; the last 3 under the floor
