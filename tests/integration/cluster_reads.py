"""What the cluster tests (test_pulsar_cluster*.py, on the pulsar_cluster fixture) share: each partition's owner and
bundle by the brokers' lookup, moving a bundle to a broker, a topic whose partitions both brokers own, a throttled
drain of a topic and the exactly-once and per-window checks of what it delivered, the bookies holding each ledger."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

import pulsar
import requests
from helpers import Sent, create_topic, produce, wait_until
from quota_windows import Sink, options, per_window_ok, start_query, stop
from topic_admin import TopicAdmin

from pulsar_throttled_source.topics import TopicName

PARTITIONS = 6
BUNDLES = 8  # a namespace of several bundles: its bundles (and so the topic's partitions) spread over both brokers
ENTRY_QUOTA = 2  # entries per partition and second: each partition's ~7 entries take several windows


def endpoint(service_url: str, admin_url: str) -> SimpleNamespace:
    """What the tests' option builders take from a broker: its two URLs."""
    return SimpleNamespace(service_url=service_url, admin_url=admin_url)


def owner_of(admin_url: str, partition: str) -> str:
    """The partition's owner by the broker's lookup (which gives a bundle without one an owner): its admin URL."""
    answer = requests.get(f"{admin_url}/lookup/v2/topic/{TopicName.parse(partition).rest_path}", timeout=30)
    answer.raise_for_status()
    return str(answer.json()["httpUrl"])


def owners(admin_url: str, topic: str) -> dict[str, str]:
    """Each partition's owner: partition -> the owner's admin URL."""
    name = TopicName.parse(topic)
    return {str(name.partition(i)): owner_of(admin_url, str(name.partition(i))) for i in range(PARTITIONS)}


def bundle_of(admin_url: str, partition: str) -> str:
    answer = requests.get(f"{admin_url}/lookup/v2/topic/{TopicName.parse(partition).rest_path}/bundle", timeout=30)
    answer.raise_for_status()
    return answer.text.strip()


def move_bundle(admin_url: str, topic: str, bundle: str, to: SimpleNamespace) -> None:
    """Unload `bundle` of the topic's namespace onto broker `to` (what load shedding does, with a destination)."""
    namespace = TopicName.parse(topic).namespace_name
    requests.put(f"{admin_url}/admin/v2/namespaces/{namespace}/{bundle}/unload",
                 params={"destinationBroker": to.admin_url.removeprefix("http://")}, timeout=60).raise_for_status()


def spread(admin_url: str, topic: str, brokers: list[SimpleNamespace]) -> dict[str, str]:
    """Give the topic's bundles to the brokers so that each owns about half of its partitions (the load manager
    spreads a namespace's bundles, but a few bundles may all land on one broker); the owners then. An unload with a
    destination does not always land there (seen once in a whole-suite run: one broker kept 5 of 6 partitions), so a
    bundle not on its broker yet is moved again until every bundle is where it was sent."""
    current = owners(admin_url, topic)
    by_bundle: dict[str, list[str]] = {}
    for partition in current:
        by_bundle.setdefault(bundle_of(admin_url, partition), []).append(partition)
    load = {b.admin_url: 0 for b in brokers}
    target: dict[str, SimpleNamespace] = {}
    for bundle, partitions in sorted(by_bundle.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        url = min(load, key=lambda u: (load[u], u))
        load[url] += len(partitions)
        target[bundle] = next(b for b in brokers if b.admin_url == url)

    def placed() -> bool:
        now = owners(admin_url, topic)
        misplaced = [bundle for bundle, partitions in by_bundle.items() if now[partitions[0]] != target[bundle].admin_url]
        for bundle in misplaced:
            move_bundle(admin_url, topic, bundle, target[bundle])
        return not misplaced

    wait_until(placed, 120, interval_s=1.0, what=f"the bundles of {topic} on the brokers they were sent to")
    return owners(admin_url, topic)


def new_spread_topic(brokers, admin: TopicAdmin, client: pulsar.Client, batched: int, plain: int,
                     ) -> tuple[str, list[Sent], dict[str, str]]:
    """A 6-partition topic in a namespace of its own with 8 bundles, its partitions owned by both brokers, written by
    a batching producer (5 per entry) and a plain one; the topic, what was sent and the owners."""
    namespace = f"public/cluster-{uuid.uuid4().hex[:8]}"
    requests.put(f"{brokers[0].admin_url}/admin/v2/namespaces/{namespace}", json={"bundles": {"numBundles": BUNDLES}},
                 timeout=30).raise_for_status()
    topic = create_topic(admin, f"persistent://{namespace}/spread", PARTITIONS)
    owner = spread(brokers[0].admin_url, topic, brokers)
    sent = produce(client, topic, batched, batch=5, prefix="batched") + produce(client, topic, plain, prefix="plain")
    return topic, sent, owner


def drain_throttled(spark, at: SimpleNamespace, topic: str, sent: list[Sent], tmp_path,
                    meanwhile: Callable[[Sink], None] | None = None, **extra: str) -> Sink:
    """Read `topic` through `at` (its service and admin URLs) under an entry quota per partition until every message
    arrived, running `meanwhile(sink)` (e.g. moving bundles) once the query has started; the sink with the batches'
    planning windows. `extra`: more options (a topicsPattern replaces the topic)."""
    sink = Sink()
    opts = options(at, tmp_path, topic, throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg=ENTRY_QUOTA, **extra)
    if "topicsPattern" in extra:
        del opts["topic"]
    query = start_query(spark, opts, tmp_path / "cp", sink)
    try:
        if meanwhile is not None:
            meanwhile(sink)
        # Until every message came (not a count: a duplicate must not end the wait before the last one comes).
        payloads = {s.payload for s in sent}
        wait_until(lambda: payloads <= {v for b in sink.snapshot() for v in b.values} or not query.isActive, 120,
                   what="every message")
        assert query.isActive, query.exception()
    finally:
        stop(query, sink)
    return sink


def assert_exactly_once_under_quota(sink: Sink, topic: str, sent: list[Sent], partitions: list[str] | None = None) -> None:
    """`partitions`: those shown in the table on failure (default: the topic's PARTITIONS)."""
    partitions = partitions or [str(TopicName.parse(topic).partition(i)) for i in range(PARTITIONS)]
    table = sink.table(partitions)
    print(table)
    delivered = [v for b in sink.data_batches() for v in b.values]
    assert Counter(delivered) == Counter(s.payload for s in sent), f"{table}\n{what_differs(sink, sent)}"
    assert len(sink.data_batches()) >= 3, f"the quota should spread the backlog over several batches\n{table}"
    ok, why = per_window_ok(sink.data_batches(), lambda b, p: b.n_entries(p), ENTRY_QUOTA)
    assert ok, f"{why}\n{table}"


def ledger_bookies(admin_url: str, partition: str, bookies: dict[str, str]) -> dict[int, set[str]]:
    """Each ledger of the partition -> the bookies (by member name) its ensemble names, from the ledger metadata
    the broker's internal stats show with metadata=true."""
    stats = requests.get(f"{admin_url}/admin/v2/{TopicName.parse(partition).rest_path}/internalStats",
                         params={"metadata": "true"}, timeout=30)
    stats.raise_for_status()
    return {int(ledger["ledgerId"]): {name for name, address in bookies.items() if address in str(ledger.get("metadata"))}
            for ledger in stats.json()["ledgers"]}


def what_differs(sink: Sink, sent: list[Sent]) -> str:
    """Each payload delivered other than once: where it was written (partition, ledger:entry:batch index) and in
    which batches it came, with the ids it came with."""
    at = {s.payload: (s.partition, s.position) for s in sent}
    came: dict[bytes, list[tuple[int, tuple[int, int, int]]]] = {}
    for b in sink.data_batches():
        for value, raw in zip(b.values, b.ids, strict=True):
            mid = pulsar.MessageId.deserialize(raw)
            came.setdefault(value, []).append((b.batch_id, (mid.ledger_id(), mid.entry_id(), mid.batch_index())))
    lines = [f"{payload!r}: written to partition {at.get(payload, ('?', '?'))[0]} at {at.get(payload, ('?', '?'))[1]}, "
             f"delivered {len(came.get(payload, []))} times {came.get(payload, [])}"
             for payload in sorted(set(at) | set(came)) if len(came.get(payload, [])) != 1]
    return "\n".join(lines)
