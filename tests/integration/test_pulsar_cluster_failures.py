"""Issue 52, the cluster's failures beside test_pulsar_cluster.py's (on the same pulsar_cluster fixture): a bookie
killed with SIGKILL while a backlog is read (every ledger has a second copy: ensembles of 2 on 3 bookies), a bundle
split while a pattern query reads, and an admin.url naming several hosts whose first is a killed broker. Exact
payload sets, every quota window within its quota; what was killed is restarted for the tests after."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from types import SimpleNamespace

import pulsar
import pytest
import requests
from cluster_reads import (
    assert_exactly_once_under_quota,
    bundle_of,
    drain_throttled,
    endpoint,
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
def cluster_admin(brokers):
    admin = TopicAdmin(brokers[0].admin_url)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def cluster_client(pulsar_cluster):
    client = pulsar.Client(pulsar_cluster.info.serviceUrl, logger=quiet_logger("cluster-failures-client"))
    yield client
    client.close()


def ledger_bookies(admin_url: str, partition: str, bookies: dict[str, str]) -> dict[int, set[str]]:
    """Each ledger of the partition -> the bookies (by member name) its ensemble names, from the ledger metadata
    the broker's internal stats show with metadata=true."""
    stats = requests.get(f"{admin_url}/admin/v2/{TopicName.parse(partition).rest_path}/internalStats",
                         params={"metadata": "true"}, timeout=30)
    stats.raise_for_status()
    return {int(ledger["ledgerId"]): {name for name, address in bookies.items() if address in str(ledger.get("metadata"))}
            for ledger in stats.json()["ledgers"]}


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
