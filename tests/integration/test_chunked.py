"""Issue 12: chunked messages (payloads over the broker's maxMessageSize, spread over several
entries) arrive exactly once under quotas, splits, restarts, live producers and interleaved
producers; a message whose producer died mid-way is skipped, the rest delivered.

The session broker runs with maxMessageSize=128 KiB (conftest), so a 300 KB payload is a
3-chunk message."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pulsar
import pytest
from conftest import MAX_MESSAGE_SIZE
from helpers import (
    CHUNKED_SIZE,
    Sent,
    chunked_producer,
    create_topic,
    mixed_backlog,
    produce,
    produce_chunked,
    quiet_logger,
    send_chunked,
    wait_until,
)
from native_path import read_paths
from pyspark.sql.streaming.datasource import ReadAllAvailable
from streaming import Collected, identity, sent_identity, source_options, start_collecting, wait_caught_up

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.read_task import ranges_of
from pulsar_throttled_source.reading.receiver_queue import receiver_queue_for
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName


def assert_exactly_once(rows, sent) -> None:
    got = Counter(identity(r) for r in rows)
    duplicated = [k[0][:20] for k, n in got.items() if n > 1]
    assert not duplicated, f"duplicated: {duplicated}"
    expected = {sent_identity(s) for s in sent}
    missing = sorted(k[0][:20] for k in expected - set(got))
    assert not missing, f"{len(missing)} of {len(expected)} messages missing: {missing}"
    assert set(got) == expected


def run_available_now(spark, opts, checkpoint, sink: Collected, timeout: float = 180) -> None:
    q = start_collecting(spark, opts, sink, checkpoint, availableNow=True)
    assert q.awaitTermination(timeout), "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()


@pytest.mark.parametrize("case, extra", [
    ("topic quota of 2 entries per second (batch mode)", {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "2"}),
    ("three entries per trigger", {"maxEntriesPerTrigger": "3"}),
    ("tasks of at most 2 entries", {"maxEntriesPerTask": "2"}),
])
def test_chunked_messages_exactly_once_whatever_cuts_the_ranges(spark, broker, admin, pulsar_client, tmp_path, unique, case, extra):
    topic = create_topic(admin, f"chunked-{unique}", 2)
    sent = mixed_backlog(pulsar_client, topic)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", quotaStatePath=tmp_path / "q.sqlite", **extra)
    run_available_now(spark, opts, tmp_path / "cp", sink)
    assert_exactly_once(sink.rows, sent)
    if "maxEntriesPerTask" in extra:  # one batch, cut into tasks: ask the planner how many
        reader = AdmissionControlStreamReader(parse_options({k.lower(): str(v) for k, v in opts.items()}))
        tasks = [r for t in reader.partitions(reader.initialOffset(), reader.latestOffset(reader.initialOffset(), ReadAllAvailable()))
                 for r in ranges_of(t)]  # the ranges, whether or not a small batch packs them into fewer tasks
        assert len(tasks) > 10 and max(t.entries for t in tasks) <= 2, [t.entries for t in tasks]
    else:
        assert len(sink.batches) > 3, f"{case}: the ranges were not cut at all ({len(sink.batches)} batches)"


@pytest.mark.parametrize("read_path", read_paths("python", "native"))
def test_messages_of_more_chunks_than_the_reader_queue(spark, broker, admin, pulsar_client, tmp_path, unique, read_path):
    """A task's receiver queue is a sixteenth of its range (issue 32: the broker reads ahead by the
    queue), far fewer permits than a long chunked message has chunks: the client gives a permit back
    for each chunk it buffers, so the message still arrives, once."""
    topic = create_topic(admin, f"chunked-long-{unique}-{read_path}", 0)
    producer = chunked_producer(pulsar_client, topic)
    try:
        sent = []
        for i in range(3):
            sent += produce(pulsar_client, topic, 2, prefix=f"single-{i}")
            body = f"long-{i}-".encode().ljust(MAX_MESSAGE_SIZE * 10 + i, b"c")  # 11 chunks
            mid = producer.send(body, properties={"i": str(i)})
            sent.append(Sent(body, None, {"i": str(i)}, mid.partition(), mid.serialize(),
                             (mid.ledger_id(), mid.entry_id(), mid.batch_index())))
    finally:
        producer.close()
    assert chunks_of_last_message(admin, topic) == 11
    # A quota far above the backlog: the query is throttled (its readers read ahead by a sixteenth), never held back.
    opts = source_options(broker, topic, startingOffsets="earliest", readPath=read_path, quotaStatePath=tmp_path / "q.sqlite",
                          throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="100000")
    reader = AdmissionControlStreamReader(parse_options({k.lower(): str(v) for k, v in opts.items()}))
    tasks = reader.partitions(reader.initialOffset(), reader.latestOffset(reader.initialOffset(), ReadAllAvailable()))
    assert [receiver_queue_for(t) for t in tasks] == [3], [t.entries for t in tasks]  # 39 entries: 3 permits
    sink = Collected()
    run_available_now(spark, opts, tmp_path / "cp", sink)
    assert_exactly_once(sink.rows, sent)


def test_chunked_restart_after_three_throttled_batches(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"chunked-restart-{unique}", 0)
    sent = mixed_backlog(pulsar_client, topic)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch",
                          dispatchThrottlingRatePerTopicInMsg="2", quotaStatePath=tmp_path / "q.sqlite")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="300 milliseconds")
    try:
        wait_until(lambda: len(sink.batches) >= 3 or not q.isActive, 120, what="three throttled batches")
    finally:
        q.stop()
    assert 0 < sink.count() < len(sent)
    run_available_now(spark, opts, tmp_path / "cp", sink)
    assert_exactly_once(sink.rows, sent)


def test_chunked_while_a_producer_writes(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"chunked-live-{unique}", 2)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest")
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    sent: list[Sent] = []
    try:
        wait_until(lambda: q.lastProgress is not None, 60, what="the first batch")
        for round_ in range(10):
            sent += produce_chunked(pulsar_client, topic, 3, prefix=f"live{round_}")
            sent += produce(pulsar_client, topic, 2, prefix=f"small{round_}")
        wait_until(lambda: sink.count() >= len(sent) or not q.isActive, 120, what="every message")
        wait_caught_up(q)
    finally:
        q.stop()
    assert_exactly_once(sink.rows, sent)


def _interleaved(admin, topic: str) -> bool:
    """Whether chunks of different messages alternate in the topic's entries (admin entry metadata)."""
    name = TopicName.parse(topic)
    layout = PartitionLayout.from_internal_stats(topic, admin.internal_stats(name))
    uuids = []
    for ledger in layout.ledgers:
        for entry in range(ledger.entries):
            headers = admin.entry_headers(name, ledger.ledger_id, entry) or {}
            uuids.append(headers.get("X-Pulsar-uuid"))
    runs = [u for i, u in enumerate(uuids) if u and (i == 0 or uuids[i - 1] != u)]
    return len(runs) > len(set(runs))  # some message's chunks are split by another's


def test_chunked_from_two_producers_at_once(spark, broker, admin, tmp_path, unique):
    """A producer sends a long chunked message while another producer, on its own connection, sends
    short chunked messages: the broker appends chunks in the order they arrive, so the short messages'
    chunks land between the long one's (two threads each sending short messages interleaved only about
    half the time, and never in one CI run; a long message in flight makes it the rule)."""
    sent: list[Sent] = []
    for attempt in range(5):  # interleaved in every attempt measured; the check makes sure something was tested
        topic = create_topic(admin, f"chunked-two-{unique}-{attempt}", 0)
        # The client logs orphan chunks it drops at ERROR.
        clients = [pulsar.Client(broker.service_url, logger=quiet_logger("pulsar-chunk-test-client", logging.ERROR)) for _ in range(2)]
        long_side, short_side = (chunked_producer(c, topic, f"{side}-{unique}-{attempt}") for side, c in zip(("long", "short"), clients, strict=True))
        long_body = f"long-{attempt}-".encode().ljust(CHUNKED_SIZE * 16, b"l")  # ~37 chunks
        long_persisted = threading.Event()
        long_ids: list = []
        long_side.send_async(long_body, lambda result, mid: (long_ids.append((result, mid)), long_persisted.set()), properties={"src": "long"})
        sent = []
        while not long_persisted.is_set():  # short messages for as long as the long one is on its way
            sent += send_chunked(short_side, 1, f"short-{len(sent)}")
        [(result, mid)] = long_ids
        assert result == pulsar.Result.Ok, result
        sent.append(Sent(long_body, None, {"src": "long"}, mid.partition(), mid.serialize(), (mid.ledger_id(), mid.entry_id(), mid.batch_index())))
        for producer, client in zip((long_side, short_side), clients, strict=True):
            producer.close()
            client.close()
        if _interleaved(admin, topic):
            break
    else:
        pytest.fail("the short messages' chunks never landed inside the long message: nothing was tested")
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch",
                          dispatchThrottlingRatePerTopicInMsg="15", quotaStatePath=tmp_path / "q.sqlite")
    run_available_now(spark, opts, tmp_path / "cp", sink)
    assert_exactly_once(sink.rows, sent)


DOOMED_PRODUCER = r'''
import logging, sys, pulsar
log = logging.getLogger("doomed"); log.setLevel(logging.ERROR)
client = pulsar.Client(sys.argv[1], logger=log)
producer = client.create_producer(sys.argv[2], chunking_enabled=True, batching_enabled=False, producer_name=sys.argv[3])
print("ready", flush=True)
producer.send(b"huge-" + b"z" * 30_000_000)  # ~230 chunks; killed long before the last
'''


def kill_producer_mid_message(broker, admin, topic: str, name: str) -> int:
    """Start the huge message, SIGKILL its producer after its first chunks, and return how many of
    its chunks the broker stored once that settled (what was in flight still lands)."""
    topic_name = TopicName.parse(topic)
    entries = lambda: int(admin.internal_stats(topic_name)["numberOfEntries"])  # noqa: E731
    before = entries()
    proc = subprocess.Popen([sys.executable, "-c", DOOMED_PRODUCER, broker.service_url, topic, name],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        wait_until(lambda: entries() > before, 60, interval_s=0.002, what="the first chunk of the huge message")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    settled, last = entries(), -1
    while settled != last:  # the broker may still persist chunks that were in flight
        time.sleep(1.0)
        last, settled = settled, entries()
    return settled - before


def chunks_of_last_message(admin, topic: str) -> int:
    """How many chunks the topic's last chunked message has, from its newest chunk's metadata."""
    name = TopicName.parse(topic)
    layout = PartitionLayout.from_internal_stats(topic, admin.internal_stats(name))
    headers = admin.entry_headers(name, layout.latest.ledger_id, layout.latest.entry_id) or {}
    return int(headers.get("X-Pulsar-num-chunks-from-msg", 0))


def test_chunked_message_of_a_producer_that_died(spark, broker, admin, pulsar_client, tmp_path, unique):
    for attempt in range(3):
        topic = create_topic(admin, f"chunked-died-{unique}-{attempt}", 0)
        before = produce(pulsar_client, topic, 3, prefix="before") + produce_chunked(pulsar_client, topic, 2, prefix="before-big")
        stored = kill_producer_mid_message(broker, admin, topic, f"doomed-{unique}-{attempt}")
        if 0 < stored < chunks_of_last_message(admin, topic):
            break
    else:
        pytest.fail(f"the producer was never killed in the middle of its message ({stored} chunks stored)")
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", incompleteChunkWaitMs="2000")
    run_available_now(spark, opts, tmp_path / "cp", sink, timeout=120)
    assert_exactly_once(sink.rows, before)  # the complete messages, and nothing of the incomplete one
    # ... and messages written after it are read too, by a query that continues on the same checkpoint.
    after = produce(pulsar_client, topic, 2, prefix="after")
    run_available_now(spark, opts, tmp_path / "cp", sink, timeout=120)
    assert_exactly_once(sink.rows, before + after)


def test_entry_headers_of_a_missing_ledger_is_none(admin, pulsar_client, unique):
    topic = create_topic(admin, f"chunked-meta-{unique}", 0)
    produce_chunked(pulsar_client, topic, 1)
    name = TopicName.parse(topic)
    ledger = int(admin.internal_stats(name)["lastConfirmedEntry"].split(":")[0])
    first = admin.entry_headers(name, ledger, 0)
    assert first is not None and first["X-Pulsar-chunk-id"] == "0" and first["X-Pulsar-num-chunks-from-msg"] == "3"
    assert admin.entry_headers(name, 987654321, 0) is None
    with pytest.raises(Exception, match="HTTP 500"):
        admin.entry_headers(name, ledger, 99)  # past the last entry: a real error, not "gone"
