"""The live producer of the precise-idle-gaps scenario: bursts faster than the quota, each followed
by a gap: the producer waits until the reader has caught up, then idles GAP_S more (several idle
windows) before the next burst.

Each burst batches differently, so a window after a gap is priced on entries unlike the last ones
the planner saw: `batched-10` (a batch is cut at 10 messages), `unbatched` (a non-batching producer:
the client refuses batching_max_messages=1), `by-time` (batches cut by a 10 ms timer while the
messages arrive in clumps of random size, so entries hold from 1 to a few dozen messages).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pulsar

BATCHINGS = ("batched-10", "unbatched", "by-time")
GAP_S = 5.0  # idle time after the reader caught up with a burst, before the next one
CATCH_UP_TIMEOUT_S = 600.0


def burst_seconds(total_s: float) -> float:
    """Bursts of 0.2 x the run at 1.6 x the quota leave 0.12 x the run of backlog, drained in as long
    again; with the gaps, three bursts fill about 1.2 x the run (72 s for 60) when triggers keep up
    with the windows, longer on a busy machine (the gaps wait for the reader to catch up)."""
    return 0.2 * total_s


def _producer_config(batching: str) -> dict:
    if batching == "batched-10":
        return {"batching_enabled": True, "batching_max_messages": 10, "batching_max_publish_delay_ms": 100}
    if batching == "unbatched":
        return {"batching_enabled": False}
    return {"batching_enabled": True, "batching_max_messages": 1000, "batching_max_publish_delay_ms": 10}


def warm_up(client: pulsar.Client, partitions: list[str], per_partition: int = 10) -> int:
    """A few messages before the bursts: Spark's first micro-batch with data takes seconds (it starts
    Python workers), and the bursts must meet a query past that. Returns the messages sent."""
    for partition in partitions:
        producer = client.create_producer(partition, **_producer_config("batched-10"))
        for i in range(per_partition):
            producer.send_async(f"warm-up-{i}".encode().ljust(40, b"."), None)
        producer.flush()
        producer.close()
    return per_partition * len(partitions)


class BurstProducer(threading.Thread):
    """Publishes `rate` messages per second and partition for `burst_s` per batching; before each
    burst, waits until `caught_up(produced)` (the reader has everything produced so far), then GAP_S."""

    def __init__(self, client: pulsar.Client, partitions: list[str], burst_s: float, rate: float,
                 caught_up: Callable[[int], bool], already_produced: int = 0, seed: int = 11) -> None:
        super().__init__(name="bench-bursts", daemon=True)
        self.client, self.partitions, self.burst_s, self.rate = client, partitions, burst_s, rate
        self.caught_up, self.produced = caught_up, already_produced
        self.rnd = random.Random(seed)
        self.sent = {p: 0 for p in partitions}
        self.spans: list[tuple[str, float, float, int]] = []  # (batching, first send, flushed (epoch s), messages)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for batching in BATCHINGS:
                deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
                while not self.caught_up(self.produced):  # the gap must be idle for the reader, whatever its pace
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the reader did not catch up within {CATCH_UP_TIMEOUT_S:.0f} s")
                    time.sleep(0.1)
                time.sleep(GAP_S)
                self._burst(batching)
        except BaseException as e:  # reported by the runner, which must not wait on a dead producer
            self.error = e

    def _burst(self, batching: str) -> None:
        producers = {p: self.client.create_producer(p, block_if_queue_full=True, **_producer_config(batching))
                     for p in self.partitions}
        started, wall = time.monotonic(), time.time()
        sent_here = 0
        while (elapsed := time.monotonic() - started) < self.burst_s:
            due = int(self.rate * elapsed) - sent_here  # paced on the clock, whatever the sends cost
            for partition, producer in producers.items():
                for _ in range(due):
                    self.sent[partition] += 1
                    producer.send_async(f"{batching}-{self.sent[partition]}".encode().ljust(40, b"."), None)
            sent_here += max(0, due)
            # By-time batching: clumps of random size (random pauses) against a fixed timer vary the entries.
            time.sleep(self.rnd.uniform(0.002, 0.04) if batching == "by-time" else 0.01)
        for producer in producers.values():
            producer.flush()
            producer.close()
        self.produced += sent_here * len(producers)
        self.spans.append((batching, wall, time.time(), sent_here * len(producers)))
