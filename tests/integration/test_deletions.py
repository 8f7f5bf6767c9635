"""Issue 32: a topic deleted while a throttled query reads its backlog ends the matter in seconds,
not after pollTimeoutMs (120 s by default): with failOnDataLoss=true the query fails naming the
topic; with false it goes on with the other topic, whose every message arrives exactly once."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from helpers import create_topic, produce, wait_until
from streaming import Collected, failure_of, source_options, start_collecting

from pulsar_throttled_source.topics import TopicName

SOON_S = 20  # "well under pollTimeoutMs" (120 s), and under the client's operation timeout (30 s)


def rows_of(sink: Collected, prefix: bytes) -> int:
    return sum(1 for r in sink.rows if bytes(r.value).startswith(prefix))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_topic_deleted_while_its_backlog_is_read_under_a_quota(spark, broker, admin, pulsar_client, tmp_path, unique, fail):
    keep = create_topic(admin, f"delq-{unique}-keep", 2)
    gone = create_topic(admin, f"delq-{unique}-gone", 2)
    kept = produce(pulsar_client, keep, 800, batch=4, prefix="keep")  # 100 entries per partition
    produce(pulsar_client, gone, 1600, batch=2, prefix="gone")  # 400 entries per partition: minutes at the quota
    sink = Collected()
    # 20 entries a second per partition: the deleted topic's backlog is still being read when it goes.
    opts = source_options(broker, None, topics=f"{keep},{gone}", startingOffsets="earliest", failOnDataLoss=fail,
                          throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="20", **{"pulsar.reader.receiverQueueSize": "5"})
    q = start_collecting(spark, opts, sink, tmp_path / "cp", processingTime="200 milliseconds")
    try:
        wait_until(lambda: rows_of(sink, b"gone") >= 100, 90, what="the backlog being read")
        deleted_at = time.monotonic()
        admin.delete_topic(TopicName.parse(gone), partitioned=True)
        if fail == "true":
            message = failure_of(q, SOON_S)
            print(f"failed {time.monotonic() - deleted_at:.1f} s after the deletion")
            assert gone in message, message
            return
        wait_until(lambda: rows_of(sink, b"keep") >= len(kept), SOON_S, what="the kept topic read")
        assert time.monotonic() - deleted_at < SOON_S
        assert q.isActive, q.exception()
        got = Counter(bytes(r.value) for r in sink.rows if bytes(r.value).startswith(b"keep"))
        assert got == Counter(s.payload for s in kept)  # exactly once
        gone_rows = Counter(bytes(r.value) for r in sink.rows if bytes(r.value).startswith(b"gone"))
        assert max(gone_rows.values()) == 1  # what was read of the deleted topic, once
    finally:
        if q.isActive:
            q.stop()
