"""Issue 12: end-to-end encrypted topics. With the private key every message arrives decrypted,
exactly once; without it the query fails at once with an error naming the topic (not after
pollTimeoutMs with a wrong diagnosis)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from helpers import create_topic, produce_encrypted
from streaming import Collected, failure_of, source_options, start_collecting


def test_encrypted_topic_read_with_the_private_key(spark, broker, admin, pulsar_client, tmp_path, unique, key_pair):
    topic = create_topic(admin, f"encrypted-{unique}", 2)
    sent = produce_encrypted(pulsar_client, topic, key_pair)
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", **{"encryption.privateKeyPath": key_pair[1]})
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(120) and q.exception() is None, q.exception()
    assert Counter(bytes(r.value) for r in sink.rows) == sent


def test_encrypted_topic_without_a_key_fails_fast_and_says_why(spark, broker, admin, pulsar_client, tmp_path, unique, key_pair):
    topic = create_topic(admin, f"encrypted-nokey-{unique}", 0)
    produce_encrypted(pulsar_client, topic, key_pair)
    started = time.monotonic()
    q = start_collecting(spark, source_options(broker, topic, startingOffsets="earliest"), Collected(), tmp_path / "cp",
                         availableNow=True)
    message = failure_of(q, 60)  # pollTimeoutMs is 120 s: failing within 60 s shows no read waited for it
    assert topic in message and "encrypted" in message and "encryption.privateKeyPath" in message
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("action", ["consume", "discard"])
def test_crypto_failure_action_without_a_key(spark, broker, admin, pulsar_client, tmp_path, unique, key_pair, action):
    """consume: every entry arrives still encrypted (a producer batch as one row); discard: nothing
    arrives and the query ends normally, not after pollTimeoutMs."""
    from pulsar_throttled_source.topics import TopicName

    topic = create_topic(admin, f"encrypted-{action}-{unique}", 0)
    sent = produce_encrypted(pulsar_client, topic, key_pair)
    entries = int(admin.internal_stats(TopicName.parse(topic))["numberOfEntries"])
    sink = Collected()
    started = time.monotonic()
    q = start_collecting(spark, source_options(broker, topic, startingOffsets="earliest", cryptoFailureAction=action),
                         sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(90) and q.exception() is None, q.exception()
    values = [bytes(r.value) for r in sink.rows]
    if action == "consume":
        assert len(values) == entries and not set(values) & set(sent)  # one row per entry, none readable
    else:
        assert values == []
    assert time.monotonic() - started < 60
