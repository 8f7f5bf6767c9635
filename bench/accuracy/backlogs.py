"""Topics filled before a scenario's query starts (the query then drains them under its quota).

- `batched-10`: a producer batching 10 messages per entry (the data of the integration scenarios);
- `variable`: entries of 8..12 messages (mean 10), like a producer that batches by time;
- `rebatched`: producers that changed batching over the topic's history: a third of the entries
  batched 10 per entry, a third unbatched, then batched again;
- `large-400`: messages of 100 B batched 400 per entry (about 43.6 KB stored per entry), larger than
  one window's quota of the large-entries scenarios.
"""

from __future__ import annotations

import logging
import math
import random
import threading

import pulsar

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName

MSGS_PER_ENTRY = (8, 12)  # uniform, inclusive, for the variable backlog
LARGE_BATCH = 400  # messages per entry of the large-400 backlog
LARGE_MSG_BYTES = 100


def entries_needed(kind: str, seconds: float) -> int:
    """Entries per partition so that no drain runs out within `seconds` (plus start-up)."""
    if kind == "large-400":
        # A quota below one entry admits one entry every 3 to 4 windows: one per 2 s is ample.
        return math.ceil(seconds / 2) + 10
    # 500 messages per second (the precise quota) plus a margin: 50 entries of 10, or more of the
    # rebatched topic, whose unbatched third brings it to 7 messages per entry.
    per_entry = 7 if kind == "rebatched" else 10
    return math.ceil(500 * (seconds + 20) / per_entry)


def produce_backlog(client: pulsar.Client, topic: str, partitions: int, entries_per_partition: int, kind: str,
                    seed: int = 7) -> dict[str, int]:
    """Fills every partition (one thread each); returns the messages sent per partition."""
    counts: dict[str, int] = {}

    def fill(partition: str, rnd: random.Random) -> None:
        if kind in ("batched-10", "rebatched"):
            counts[partition] = _fill_stretches(client, partition, entries_per_partition, kind)
        elif kind == "variable":
            counts[partition] = _fill_variable(client, partition, entries_per_partition, rnd)
        elif kind == "large-400":
            counts[partition] = _fill_large(client, partition, entries_per_partition)
        else:
            raise ValueError(f"unknown backlog {kind!r}")

    name = TopicName.parse(topic)
    threads = [threading.Thread(target=fill, args=(str(name.partition(i)), random.Random(seed + i))) for i in range(partitions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def _fill_stretches(client: pulsar.Client, partition: str, entries: int, kind: str) -> int:
    sent = 0
    stretches = [(10, entries)] if kind == "batched-10" else [(10, entries // 3), (1, entries // 3), (10, entries // 3)]
    for per_entry, n_entries in stretches:
        # The client refuses batching_max_messages=1: an unbatched stretch needs a non-batching producer.
        batching = {"batching_enabled": True, "batching_max_messages": per_entry,
                    "batching_max_publish_delay_ms": 100} if per_entry > 1 else {"batching_enabled": False}
        producer = client.create_producer(partition, block_if_queue_full=True, **batching)
        for _ in range(n_entries * per_entry):
            sent += 1
            producer.send_async(f"m{sent}".encode().ljust(40, b"."), None)
        producer.flush()
        producer.close()
    return sent


def _fill_variable(client: pulsar.Client, partition: str, entries: int, rnd: random.Random) -> int:
    sent = 0
    producer = client.create_producer(partition, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=60_000, block_if_queue_full=True)
    for e in range(entries):
        for i in range(rnd.randint(*MSGS_PER_ENTRY)):
            producer.send_async(f"e{e}-m{i}".encode().ljust(40, b"."), None)
            sent += 1
        producer.flush()  # closes the entry: its size is what rnd chose
    producer.close()
    return sent


def _fill_large(client: pulsar.Client, partition: str, entries: int) -> int:
    # A batch is cut at 400 messages (the size limit and the delay are far away); no compression.
    producer = client.create_producer(partition, batching_enabled=True, batching_max_messages=LARGE_BATCH,
                                      batching_max_allowed_size_in_bytes=4 << 20, batching_max_publish_delay_ms=600_000,
                                      block_if_queue_full=True)
    for i in range(entries * LARGE_BATCH):
        producer.send_async(f"m{i}".encode().ljust(LARGE_MSG_BYTES, b"."), None)
    producer.flush()
    producer.close()
    return entries * LARGE_BATCH


def entries_in(admin: PulsarAdmin, topic: TopicName) -> dict[str, int]:
    """Entries per partition, from the ledgers (every backlog here starts at entry 0 of its topic)."""
    return {name: int(stats.get("entriesAddedCounter", 0))
            for name, stats in admin.partitioned_internal_stats(topic).items()}


def quiet_logger() -> logging.Logger:
    """The Pulsar client logs every producer and reader at INFO: keep the bench's output readable."""
    logger = logging.getLogger("bench-pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger
