"""Issue 12: transactional topics read as read_committed. Committed messages arrive once, aborted
never; a topic ending on a commit or abort marker needs no wait; an open transaction holds the
range back while the query keeps running, and its messages arrive once it commits.

The Python client cannot produce in transactions, so a small Java producer (java/TxnProducer.java,
run on the broker's own client jars; one for the session, moved from topic to topic) writes them; the session
broker runs a transaction coordinator."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from helpers import create_topic, wait_until
from java_producer import COMMITTED, HISTORY
from streaming import Collected, source_options, start_collecting


@pytest.fixture
def txn_producer(txn_jvm):
    """The session's transactional producer, moved to a test's topic."""
    return txn_jvm.on


def payloads(sink: Collected) -> Counter:
    return Counter(bytes(r.value) for r in sink.rows)


@pytest.mark.parametrize("ending", ["abort marker", "commit marker"])
@pytest.mark.parametrize("quota", [{}, {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "4"}], ids=["no quota", "4 entries per second"])
def test_committed_once_aborted_never_and_no_wait_on_markers(spark, broker, admin, txn_producer, tmp_path, unique, ending, quota):
    topic = create_topic(admin, f"txn-{unique}", 0)
    history = HISTORY if ending == "abort marker" else HISTORY + ["begin", "send c2", "commit"]
    expected = COMMITTED + (Counter({b"c2": 1}) if ending == "commit marker" else Counter())
    txn_producer(topic).do(*history)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", quotaStatePath=tmp_path / "q.sqlite", **quota)
    started = time.monotonic()
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    # The default pollTimeoutMs is 120 s: a read waiting for a marker would show here.
    assert q.awaitTermination(90), "the query waited on entries the broker never dispatches"
    assert q.exception() is None, q.exception()
    assert payloads(sink) == expected
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_open_transaction_holds_the_range_back_and_the_query_keeps_running(spark, broker, admin, txn_producer, tmp_path, unique, outcome):
    topic = create_topic(admin, f"txn-open-{unique}", 0)
    producer = txn_producer(topic)
    producer.do("plain p0", "begin", "send o0", "send o1")  # the transaction stays open
    sink = Collected()
    q = start_collecting(spark, source_options(broker, topic, startingOffsets="earliest"), sink, tmp_path / "cp",
                         processingTime="200 milliseconds")
    try:
        wait_until(lambda: sink.count() >= 1 or not q.isActive, 60, what="the message before the open transaction")
        progressed = len(q.recentProgress)
        wait_until(lambda: len(q.recentProgress) > progressed or not q.isActive, 60, what="the query to keep polling")
        assert q.isActive and q.exception() is None, q.exception()
        # Planning sees the transaction's entries and holds them back: lag counts up to the newest readable
        # entry, which the open transaction's first entry is past (the broker dispatches none of it yet).
        assert json.loads(q.lastProgress["sources"][0]["latestOffset"])["entriesBehindLatest"] == 0
        assert payloads(sink) == Counter({b"p0": 1})  # nothing of the open transaction yet
        producer.do(outcome, "plain p1")
        expected = Counter({b"p0": 1, b"p1": 1}) + (Counter({b"o0": 1, b"o1": 1}) if outcome == "commit" else Counter())
        wait_until(lambda: payloads(sink) == expected or sum(payloads(sink).values()) > sum(expected.values()) or not q.isActive,
                   60, what=f"the messages after the {outcome}")
        assert q.isActive and q.exception() is None, q.exception()
    finally:
        q.stop()
    assert payloads(sink) == expected
