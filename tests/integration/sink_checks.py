"""What the sink's tests share: a topic read back with the plain Python client, every field of every message, and
a write's connection options."""

from __future__ import annotations

from collections import Counter

import pulsar


def read_back(client: pulsar.Client, topic: str, expected: int | None) -> list[tuple]:
    """Every message of every partition of `topic`, as (partition, value or None, key, properties, event time ms, ordering key)."""
    got: list[tuple] = []
    for partition in client.get_topic_partitions(topic):
        reader = client.create_reader(partition, pulsar.MessageId.earliest)
        try:
            while reader.has_message_available():
                m = reader.read_next(10_000)
                got.append((m.message_id().partition(), None if m.has_null_value() else m.data(), m.partition_key() or None,
                            properties_of(m.properties()), m.event_timestamp() or None, _text(m.ordering_key())))
        finally:
            reader.close()
    assert expected is None or len(got) == expected, f"{len(got)} messages in {topic}, expected {expected}"
    return got


def entry_sizes(client: pulsar.Client, topic: str) -> Counter:
    """How many entries of `topic` hold how many messages (a producer's batch is one entry)."""
    per_entry: Counter = Counter()
    for partition in client.get_topic_partitions(topic):
        reader = client.create_reader(partition, pulsar.MessageId.earliest)
        try:
            while reader.has_message_available():
                i = reader.read_next(10_000).message_id()
                per_entry[(partition, i.ledger_id(), i.entry_id())] += 1
        finally:
            reader.close()
    return Counter(per_entry.values())


def properties_of(properties: dict[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    return tuple(sorted(properties.items())) if properties else None


def _text(value: str | bytes | None) -> str | None:
    return (value.decode() if isinstance(value, bytes) else value) or None


def sink_options(broker, topic: str | None, **extra: str) -> dict[str, str]:
    return {"service.url": broker.service_url, "admin.url": broker.admin_url, **({"topic": topic} if topic else {}), **extra}
