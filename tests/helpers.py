"""Test helpers: create topics and produce known messages through the real client (plain, batched, chunked,
encrypted), and wait for a condition with a deadline."""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pulsar
import requests
from conftest import MAX_MESSAGE_SIZE
from topic_admin import TopicAdmin

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.topics import TopicName

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"  # the repository's examples/


@dataclass(frozen=True)
class Sent:
    payload: bytes
    key: str | None
    properties: dict[str, str]
    partition: int
    message_id: bytes  # serialized pulsar.MessageId
    position: tuple[int, int, int]  # ledger, entry, batch index


def create_topic(admin: TopicAdmin, name: str, partitions: int) -> str:
    topic = TopicName.parse(name)
    if partitions > 0:
        admin.create_partitioned_topic(topic, partitions)
    else:
        admin.create_topic(topic)
    return str(topic)


def produce(client: pulsar.Client, topic: str, count: int, *, batch: int = 0, prefix: str = "m",
            partition_key: bool = True, properties: bool = True, payload_size: int = 0) -> list[Sent]:
    """Send `count` messages round-robin over the partitions; `batch` > 0 packs that many per entry."""
    sent: list[Sent] = []
    counter = iter(range(1 << 62))
    # Our own router: keyed messages would otherwise be hashed onto a few partitions.
    kwargs = dict(message_router=lambda msg, num_partitions: next(counter) % num_partitions)
    if batch > 0:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=batch,
                                          batching_max_publish_delay_ms=100, block_if_queue_full=True,
                                          batching_max_allowed_size_in_bytes=10 * 1024 * 1024, **kwargs)
    else:
        producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True, **kwargs)
    payloads = []
    for i in range(count):
        body = f"{prefix}-{i}".encode()
        if payload_size:
            body = body.ljust(payload_size, b".")
        key = f"k{i % 7}" if partition_key else None
        props = {"i": str(i), "src": prefix} if properties else {}
        payloads.append((body, key, props))
    ids: list[pulsar.MessageId | None] = [None] * count
    failed: list[pulsar.Result] = []

    def callback_for(i: int):
        def done(res, msg_id) -> None:
            if res != pulsar.Result.Ok:
                failed.append(res)
            ids[i] = msg_id
        return done

    # Asynchronous sends without batching too: each message is still an entry of its own, in order per partition, and
    # the producer keeps up to its queue in flight instead of waiting out a round trip per message (500 messages:
    # ~2-3.5 s one by one at load 4, 0.1-0.3 s in flight).
    for i, (body, key, props) in enumerate(payloads):
        args = {"properties": props} if props else {}
        if key is not None:
            args["partition_key"] = key
        producer.send_async(body, callback_for(i), **args)
    producer.flush()
    producer.close()
    assert not failed, f"sends to {topic} failed: {failed[:5]}"
    for (body, key, props), mid in zip(payloads, ids, strict=True):
        assert mid is not None
        sent.append(Sent(body, key, props, mid.partition(), mid.serialize(), (mid.ledger_id(), mid.entry_id(), mid.batch_index())))
    return sent


def create_namespace(admin: TopicAdmin, namespace: str) -> str:
    """A namespace of its own, so that unloading its bundles disturbs no other test's topics."""
    requests.put(f"{admin.base}/admin/v2/namespaces/{namespace}", timeout=30).raise_for_status()
    return namespace


def unload_bundles(admin: TopicAdmin, namespace: str) -> int:
    """Unload every bundle of `namespace` (what load shedding does): its topics move to a new owner."""
    bundles = requests.get(f"{admin.base}/admin/v2/namespaces/{namespace}/bundles", timeout=30)
    bundles.raise_for_status()
    bounds = bundles.json()["boundaries"]
    for lo, hi in itertools.pairwise(bounds):
        requests.put(f"{admin.base}/admin/v2/namespaces/{namespace}/{lo}_{hi}/unload", timeout=60).raise_for_status()
    return len(bounds) - 1


def trim_everything(admin: TopicAdmin, topic: str) -> None:
    """Retention 0, then unload and trim until the broker deleted every closed ledger of `topic`."""
    trim_until(admin, topic, lambda layout: layout.total_entries == 0 or layout.first.ledger_id > 0 and layout.ledgers[0].entries < 50)


def trim_until(admin: TopicAdmin, topic: str, done) -> PartitionLayout:
    """Retention 0, then unload (closing the current ledger) and trim until `done(layout)` holds."""
    name = TopicName.parse(topic)
    admin.set_retention(name, 0, 0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        admin.unload_topic(name)  # closes the current ledger so that retention may drop it
        time.sleep(1)
        try:
            admin.trim_topic(name)
        except Exception:
            pass
        layout = PartitionLayout.from_internal_stats(topic, admin.internal_stats(name))
        if done(layout):
            return layout
    raise AssertionError("retention did not delete the ledgers")


def wait_until(predicate, timeout_s: float = 60.0, interval_s: float = 0.2, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def quiet_logger(name: str, level: int = logging.WARNING) -> logging.Logger:
    """A logger for a test's own pulsar.Client: the C++ client logs every connection at INFO otherwise."""
    logger = logging.getLogger(name)
    logger.setLevel(level)
    return logger


CHUNKED_SIZE = int(MAX_MESSAGE_SIZE * 2.3)  # three chunks


def chunked_producer(client: pulsar.Client, topic: str, name: str | None = None):
    counter = iter(range(1 << 62))
    kwargs = {"producer_name": name} if name else {}
    return client.create_producer(topic, chunking_enabled=True, batching_enabled=False, block_if_queue_full=True,
                                  message_router=lambda msg, n: next(counter) % n, **kwargs)


def send_chunked(producer, count: int, prefix: str) -> list[Sent]:
    """`count` chunked messages, round-robin over the partitions, each waited for."""
    sent = []
    for i in range(count):
        body = f"{prefix}-{i}-".encode().ljust(CHUNKED_SIZE + i, b"c")
        props = {"i": str(i), "src": prefix}
        mid = producer.send(body, properties=props, partition_key=f"k{i % 7}")
        sent.append(Sent(body, f"k{i % 7}", props, mid.partition(), mid.serialize(), (mid.ledger_id(), mid.entry_id(), mid.batch_index())))
    return sent


def produce_chunked(client: pulsar.Client, topic: str, count: int, *, prefix: str = "big") -> list[Sent]:
    producer = chunked_producer(client, topic)
    try:
        return send_chunked(producer, count, prefix)
    finally:
        producer.close()


def mixed_backlog(client: pulsar.Client, topic: str, tag: str = "") -> list[Sent]:
    """What a real topic holds: single messages, producer batches and chunked messages in between."""
    sent = produce(client, topic, 6, prefix=f"single{tag}")
    sent += produce_chunked(client, topic, 6, prefix=f"big{tag}")
    sent += produce(client, topic, 20, batch=5, prefix=f"batched{tag}")
    sent += produce_chunked(client, topic, 4, prefix=f"big2{tag}")
    sent += produce(client, topic, 4, prefix=f"tail{tag}")
    return sent


def produce_encrypted(client: pulsar.Client, topic: str, key_pair) -> Counter:
    keys = pulsar.CryptoKeyReader(*key_pair)
    sent = Counter()
    for batching in (False, True):
        producer = client.create_producer(topic, encryption_key="orders-key", crypto_key_reader=keys, batching_enabled=batching,
                                          batching_max_messages=5, batching_max_publish_delay_ms=50)
        for i in range(15):
            body = f"secret-{batching}-{i}".encode()
            producer.send_async(body, None) if batching else producer.send(body)
            sent[body] += 1
        producer.flush()
        producer.close()
    return sent


def batch_rows(output: Path) -> dict[int, int]:
    """Rows per micro-batch, from the file sink's log: _spark_metadata/<batch> lists the files it committed."""
    import pyarrow.parquet as pq

    rows = {}
    for entry in (output / "_spark_metadata").iterdir():
        if entry.name.isdigit():
            files = [json.loads(line)["path"] for line in entry.read_text().splitlines()[1:]]
            rows[int(entry.name)] = sum(pq.read_metadata(f.removeprefix("file://")).num_rows for f in files)
    return rows


def wait_sources_started(query, timeout_s: float = 60.0) -> None:
    """Until a started query's sources are initialized (its Python streaming source runner connected back).

    Spark gives that runner a fixed 10 s to connect back (PythonWorkerFactory, not configurable); several
    started at once on 2 cores while other JVMs start can miss it ("Python worker failed to connect back"),
    so tests that run queries side by side start them one after another's sources are up."""
    wait_until(lambda: not query.isActive or query.status["message"] != "Initializing sources", timeout_s,
               what=f"query {query.id} to initialize its sources")
