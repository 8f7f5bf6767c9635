"""Issue 52: the source on a real cluster (the pulsar_cluster fixture: ZooKeeper, 3 bookies, 2 brokers and a proxy,
each its own process on its own 127.0.0.N address): the partitions of one topic owned by different brokers, so that
an admin call on one broker is redirected (307) to another host, and reads go to both; then the same through the
proxy (service.url and admin.url both on it). Exact payload sets, every quota window within its quota."""

from __future__ import annotations

import time
from collections import Counter
from types import SimpleNamespace

import pulsar
import pytest
import requests
from cluster_reads import (
    PARTITIONS,
    assert_exactly_once_under_quota,
    bundle_of,
    drain_throttled,
    endpoint,
    move_bundle,
    new_spread_topic,
    owner_of,
    owners,
)
from helpers import Sent, quiet_logger, wait_until
from quota_windows import Sink
from streaming import source_options
from topic_admin import TopicAdmin

from pulsar_throttled_source.topics import TopicName


@pytest.fixture(scope="module")
def brokers(pulsar_cluster) -> list[SimpleNamespace]:
    return [endpoint(b["serviceUrl"], b["adminUrl"]) for b in pulsar_cluster.info.brokers]


@pytest.fixture(scope="module")
def proxy(pulsar_cluster) -> SimpleNamespace:
    return endpoint(pulsar_cluster.info.proxy["serviceUrl"], pulsar_cluster.info.proxy["adminUrl"])


@pytest.fixture(scope="module")
def cluster_admin(brokers):
    admin = TopicAdmin(brokers[0].admin_url)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def cluster_client(pulsar_cluster):
    client = pulsar.Client(pulsar_cluster.info.serviceUrl, logger=quiet_logger("cluster-test-client"))
    yield client
    client.close()


@pytest.fixture(scope="module")
def spread_topic(brokers, cluster_admin, cluster_client) -> tuple[str, list[Sent], dict[str, str]]:
    return new_spread_topic(brokers, cluster_admin, cluster_client, 60, 30)



def test_a_throttled_stream_over_partitions_owned_by_both_brokers(spark, brokers, spread_topic, tmp_path):
    topic, sent, owner = spread_topic
    # Both brokers own some of the partitions, and broker 1 redirects an admin call for broker 2's to that host.
    assert set(owner.values()) == {b.admin_url for b in brokers}, owner
    elsewhere = next(p for p, url in owner.items() if url == brokers[1].admin_url)
    answer = requests.get(f"{brokers[0].admin_url}/admin/v2/{TopicName.parse(elsewhere).rest_path}/internalStats",
                          allow_redirects=False, timeout=30)
    assert answer.status_code == 307 and answer.headers["Location"].startswith(brokers[1].admin_url), answer.headers
    sink = drain_throttled(spark, brokers[0], topic, sent, tmp_path)
    assert_exactly_once_under_quota(sink, topic, sent)


def test_the_same_stream_through_the_proxy(spark, proxy, spread_topic, tmp_path):
    topic, sent, owner = spread_topic
    # The proxy forwards the admin API to a broker it discovered and follows that broker's redirect itself: the
    # source sees one host answering for every partition.
    for partition in owner:
        answer = requests.get(f"{proxy.admin_url}/admin/v2/{TopicName.parse(partition).rest_path}/internalStats",
                              allow_redirects=False, timeout=30)
        assert answer.status_code == 200, (partition, answer.status_code, answer.headers)
    sink = drain_throttled(spark, proxy, topic, sent, tmp_path)
    assert_exactly_once_under_quota(sink, topic, sent)


def test_a_batch_query_over_partitions_on_both_brokers(spark, brokers, proxy, spread_topic):
    topic, sent, owner = spread_topic
    assert len(set(owner.values())) == 2, owner
    for at in (brokers[1], proxy):  # the admin API of the other broker this time, then the proxy's
        rows = spark.read.format("pulsar-throttled").options(**source_options(at, topic)).load().collect()
        assert Counter(bytes(r.value) for r in rows) == Counter(s.payload for s in sent), at


def test_bundles_moved_to_the_other_broker_again_and_again_while_a_throttled_stream_reads(
        spark, pulsar_cluster, brokers, cluster_admin, cluster_client, tmp_path):
    topic, sent, owner = new_spread_topic(brokers, cluster_admin, cluster_client, 120, 60)  # ~14 entries a partition
    partition_of = {bundle_of(brokers[0].admin_url, p): p for p in owner}  # one partition of each bundle
    moves: list[str] = []

    def move_again_and_again(sink: Sink) -> None:
        # The topic's bundles move to the other broker in turn, one a second, from the first batch until everything
        # was delivered or each moved twice (there and back): moves land between batches and in the middle of reads.
        # (Faster churn, every bundle moved every 2 s, made a reader's subscribe retry until pulsar-client's 30 s
        # operation timeout once: ridden through, but slow.)
        wait_until(lambda: sink.total() > 0, 60, what="the first batch")
        while sink.total() < len(sent) and len(moves) < 2 * len(partition_of):
            bundle = sorted(partition_of)[len(moves) % len(partition_of)]
            other = next(b for b in brokers if b.admin_url != owner_of(brokers[0].admin_url, partition_of[bundle]))
            move_bundle(brokers[0].admin_url, topic, bundle, other)
            moves.append(f"{bundle} -> {other.admin_url}")
            time.sleep(1.0)

    # service.url names both brokers, as Pulsar's clients accept; the admin API is broker 1's, redirected as bundles move.
    at = endpoint(pulsar_cluster.info.serviceUrl, brokers[0].admin_url)
    sink = drain_throttled(spark, at, topic, sent, tmp_path, move_again_and_again)
    assert len(moves) >= len(partition_of), f"every bundle should have moved while the query read: {moves}"
    assert_exactly_once_under_quota(sink, topic, sent)


def test_the_broker_owning_half_the_partitions_killed_mid_stream(spark, pulsar_cluster, brokers, cluster_admin,
                                                                cluster_client, tmp_path):
    topic, sent, owner = new_spread_topic(brokers, cluster_admin, cluster_client, 120, 60)
    victim = pulsar_cluster.info.brokers[1]["name"]  # brokers[1]: it owns about half of the partitions (spread)
    assert sum(url == brokers[1].admin_url for url in owner.values()) >= PARTITIONS // 3, owner

    batch_rows: list = []

    def kill_broker_2(sink: Sink) -> None:
        wait_until(lambda: sink.total() > 0, 60, what="the first batch")
        pulsar_cluster.kill(victim)  # SIGKILL: its bundles move only once its metadata session expires (5 s)
        # Meanwhile a batch query is planned and read, while broker 1 still redirects to the dead broker.
        batch_rows.extend(spark.read.format("pulsar-throttled").options(**source_options(brokers[0], topic)).load()
                          .collect())

    try:
        # Both URLs on the broker that lives: its admin API redirects to the dead one until the session expires.
        sink = drain_throttled(spark, brokers[0], topic, sent, tmp_path, kill_broker_2)
        assert set(owners(brokers[0].admin_url, topic).values()) == {brokers[0].admin_url}
    finally:
        pulsar_cluster.restart(victim)  # only now that the query has moved on (or failed)
    assert_exactly_once_under_quota(sink, topic, sent)
    assert Counter(bytes(r.value) for r in batch_rows) == Counter(s.payload for s in sent)
