"""Issue 32: what the throttle costs the storage it protects, in miniature (bench/bookie_reads.py has
the figures): a precise-mode drain of a backlog a producer batched alike looks up at most a tenth of
an entry per entry it delivers, and each partition's reader carries on from range to range instead of
having the broker read its queue again; every message is delivered once."""

from __future__ import annotations

import time
from collections import Counter

import pulsar
from helpers import create_topic
from native_path import needs_native_path
from streaming import source_options

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.reading import native_reader
from pulsar_throttled_source.reading.read import read_ranges
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader


@needs_native_path
def test_a_precise_drain_looks_up_a_tenth_of_an_entry_per_entry_and_reads_on_with_the_same_readers(
        broker, admin, pulsar_client, unique, monkeypatch):
    topic = create_topic(admin, f"storage-cost-{unique}", 2)
    sent = backfill(pulsar_client, topic, partitions=2, per_partition=2_000)  # 200 entries of 10 per partition
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="precise", readPath="native",
                          dispatchThrottlingRatePerTopicInMsg="1000", metadataRefreshIntervalMs="200")
    opened: list[str] = []
    real_open = native_reader.NativeReader.open.__func__  # type: ignore[attr-defined]

    def counted_open(cls, loaded, client, cfg, topic, *args):  # type: ignore[no-untyped-def]
        opened.append(topic)
        return real_open(cls, loaded, client, cfg, topic, *args)

    monkeypatch.setattr(native_reader.NativeReader, "open", classmethod(counted_open))
    stream = AdmissionControlStreamReader(parse_options({k.lower(): str(v) for k, v in opts.items()}))
    start, delivered, entries, batches = stream.initialOffset(), Counter[bytes](), 0, 0
    deadline = time.monotonic() + 90
    while sum(delivered.values()) < len(sent) and time.monotonic() < deadline:
        end = stream.latestOffset(start, stream.getDefaultReadLimit())
        if end == start:
            time.sleep(0.2)
            continue
        for part in stream.partitions(start, end):
            delivered.update(v for batch in read_ranges(part) for v in batch.column("value").to_pylist())
            entries += part.entries
        stream.commit(end)
        start, batches = end, batches + 1
    lookups = stream.planner.admin.requests_by_kind["entry"]
    stream.stop()
    assert delivered == Counter(sent)  # nothing lost, nothing twice
    assert batches >= 2  # throttled: the backlog took several micro-batches
    assert lookups <= 0.1 * entries, (lookups, entries)
    assert sorted(opened) == sorted(set(opened)) and len(opened) == 2, opened  # one reader per partition, kept



def backfill(client: pulsar.Client, topic: str, partitions: int, per_partition: int) -> list[bytes]:
    """What a bulk load writes: a producer per partition sending as fast as it can, so that every
    batch fills to batchingMaxMessages (10) before its publish delay (the last may be part-full)."""
    sent: list[bytes] = []
    for index in range(partitions):
        producer = client.create_producer(f"{topic}-partition-{index}", batching_enabled=True, batching_max_messages=10,
                                          batching_max_publish_delay_ms=10_000, block_if_queue_full=True)
        for n in range(per_partition):
            payload = f"p{index}-{n}".encode().ljust(100, b".")
            producer.send_async(payload, None)
            sent.append(payload)
        producer.flush()
        producer.close()
    return sent
