"""Issue 52: the source on a real cluster (the pulsar_cluster fixture: ZooKeeper, 3 bookies, 2 brokers and a proxy,
each its own process on its own 127.0.0.N address): the partitions of one topic owned by different brokers, so that
an admin call on one broker is redirected (307) to another host, and reads go to both; then the same through the
proxy (service.url and admin.url both on it). Then the cluster's failures: bundles moved, a broker killed, a bookie
killed with SIGKILL while a backlog is read (every ledger has a second copy: ensembles of 2 on 3 bookies), a bundle
split while a pattern query reads, and an admin.url naming several hosts whose first is a killed broker; what was
killed is restarted for the tests after. Exact payload sets, every quota window within its quota.
One file, so one cluster start: the fixture is the module's, stopped when the file is done."""

from __future__ import annotations

import itertools
import time
import uuid
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
    ledger_bookies,
    move_bundle,
    new_spread_topic,
    owner_of,
    owners,
)
from helpers import Sent, create_topic, produce, quiet_logger, unload_bundles, wait_until
from native_path import SKIP_REASON
from quota_windows import Sink
from streaming import source_options
from topic_admin import TopicAdmin

from pulsar_throttled_source.local_broker.cluster_layout import BOOKIE
from pulsar_throttled_source.metadata.admin import PulsarAdmin
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


def test_a_bookie_killed_while_a_backlog_is_read(spark, pulsar_cluster, brokers, cluster_admin, cluster_client,
                                                 tmp_path):
    topic, sent, _ = new_spread_topic(brokers, cluster_admin, cluster_client, 120, 60)  # ~14 entries a partition
    # A backlog: the topic's ledgers closed and nothing of them in a broker's cache, so every read goes to bookies.
    unload_bundles(cluster_admin, str(TopicName.parse(topic).namespace_name))
    bookies = {m.name: m.address("bookie") for m in pulsar_cluster.layout.of_role(BOOKIE)}
    partitions = [str(TopicName.parse(topic).partition(i)) for i in range(6)]
    held = {p: ledger_bookies(brokers[0].admin_url, p, bookies) for p in partitions}
    ledgers = {ledger: names for by_ledger in held.values() for ledger, names in by_ledger.items()}
    written = {s.position[0] for s in sent}
    assert written <= set(ledgers) and all(len(ledgers[ledger]) == 2 for ledger in written), ledgers
    # The bookie holding the most of the written ledgers (at least 4 of 6: 12 copies on 3 bookies).
    victim = max(sorted(bookies), key=lambda name: sum(name in ledgers[ledger] for ledger in written))
    killed_at: list[int] = []
    batch_rows: list = []

    def kill_a_bookie(sink: Sink) -> None:
        wait_until(lambda: sink.total() > 0, 180, what="the first batch")
        pulsar_cluster.kill(victim)  # SIGKILL: the brokers' reads of its ledgers go to their other copy
        killed_at.append(max(b.batch_id for b in sink.snapshot()))
        # Meanwhile a batch query on the other read path reads the whole backlog.
        other_path = "python" if SKIP_REASON else "native"
        batch_rows.extend(spark.read.format("pulsar-throttled")
                          .options(**source_options(brokers[0], topic, readPath=other_path)).load().collect())

    try:
        sink = drain_throttled(spark, endpoint(pulsar_cluster.info.serviceUrl, brokers[0].admin_url), topic, sent,
                               tmp_path, kill_a_bookie, readPath="python")
    finally:
        pulsar_cluster.restart(victim)  # the tests after find 3 bookies again
    assert_exactly_once_under_quota(sink, topic, sent)
    assert Counter(bytes(r.value) for r in batch_rows) == Counter(s.payload for s in sent)
    # The stream read ledgers of the killed bookie after it died.
    read_after = {ledger for b in sink.data_batches() if b.batch_id > killed_at[0]
                  for entries in b.entries.values() for ledger, _ in entries}
    assert any(victim in ledgers[ledger] for ledger in read_after), (victim, read_after, ledgers)


def test_a_bundle_split_while_a_pattern_query_reads(spark, pulsar_cluster, brokers, cluster_admin, cluster_client,
                                                    tmp_path):
    # A namespace of one bundle holding every topic: the split (and the move after it) disturbs all of them.
    namespace = f"public/split-{uuid.uuid4().hex[:8]}"
    admin_url = brokers[0].admin_url
    requests.put(f"{admin_url}/admin/v2/namespaces/{namespace}", json={"bundles": {"numBundles": 1}},
                 timeout=30).raise_for_status()
    counts = {f"persistent://{namespace}/orders-{name}": n for name, n in (("a", 0), ("b", 0), ("c", 0), ("d", 2))}
    topics = [create_topic(cluster_admin, topic, n) for topic, n in counts.items()]
    create_topic(cluster_admin, f"persistent://{namespace}/other", 0)
    sent: list[Sent] = []
    for topic in topics:
        sent += produce(cluster_client, topic, 40, batch=5, prefix=f"{topic[-1]}-batched")
        sent += produce(cluster_client, topic, 10, prefix=f"{topic[-1]}-plain")  # ~9 entries a partition
    produce(cluster_client, f"persistent://{namespace}/other", 20, prefix="not-matched")
    # Where the data lives: a non-partitioned topic is its own partition.
    partitions = [str(TopicName.parse(t).partition(i)) if n else t for t, n in counts.items() for i in range(max(n, 1))]
    halves: list[str] = []
    moves: list[str] = []

    def split_and_move(sink: Sink) -> None:
        wait_until(lambda: sink.total() > 0, 180, what="the first batch")
        bundles = requests.get(f"{admin_url}/admin/v2/namespaces/{namespace}/bundles", timeout=30).json()["boundaries"]
        assert len(bundles) == 2, bundles
        requests.put(f"{admin_url}/admin/v2/namespaces/{namespace}/{bundles[0]}_{bundles[1]}/split",
                     params={"unload": "true", "splitAlgorithmName": "range_equally_divide"},
                     timeout=60).raise_for_status()
        bounds = requests.get(f"{admin_url}/admin/v2/namespaces/{namespace}/bundles", timeout=30).json()["boundaries"]
        halves.extend(f"{lo}_{hi}" for lo, hi in itertools.pairwise(bounds))
        # Then each half to the other broker than the one owning its topics now (a split's halves land where the
        # load manager puts them: this makes sure they change host while the query reads).
        for half in halves:
            inside = [p for p in partitions if bundle_of(admin_url, p) == half]
            if inside:
                other = next(b for b in brokers if b.admin_url != owner_of(admin_url, inside[0]))
                move_bundle(admin_url, topics[0], half, other)
                moves.append(f"{half} ({len(inside)} partitions) -> {other.admin_url}")

    sink = drain_throttled(spark, endpoint(pulsar_cluster.info.serviceUrl, admin_url), topics[0], sent, tmp_path,
                           split_and_move, topicsPattern=f"persistent://{namespace}/orders-.*")
    assert len(halves) == 2 and moves, (halves, moves)
    assert_exactly_once_under_quota(sink, topics[0], sent, partitions)
    assert {"persistent://" + namespace + "/other"}.isdisjoint({p for b in sink.data_batches() for p in b.entries})


def test_admin_url_naming_a_killed_broker_first(spark, pulsar_cluster, brokers, cluster_admin, cluster_client,
                                               tmp_path):
    topic, sent, _ = new_spread_topic(brokers, cluster_admin, cluster_client, 120, 60)
    victim = pulsar_cluster.info.brokers[1]["name"]
    dead, live = (b.admin_url.removeprefix("http://") for b in brokers[1::-1])
    several = endpoint(brokers[0].service_url, f"http://{dead},{live}")  # as Pulsar's admin clients take them
    pulsar_cluster.kill(victim)
    try:
        # The admin API answers from the next host at once; the killed broker's partitions once they moved.
        api = PulsarAdmin(several.admin_url, timeout_s=10, retry_timeout_s=60)
        assert api.partition_count(TopicName.parse(topic)) == 6
        assert api.base == f"http://{live}"
        rows = spark.read.format("pulsar-throttled").options(**source_options(several, topic)).load().collect()
        assert Counter(bytes(r.value) for r in rows) == Counter(s.payload for s in sent)
        sink = drain_throttled(spark, several, topic, sent, tmp_path)
        assert set(owners(brokers[0].admin_url, topic).values()) == {brokers[0].admin_url}
    finally:
        pulsar_cluster.restart(victim)
    assert_exactly_once_under_quota(sink, topic, sent)
