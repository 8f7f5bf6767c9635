"""Large plans price partitions far below their quotas by estimate (throttling/headroom): which ones,
and what the engine then asks of the broker and charges. Fake clock, in-memory store."""

from __future__ import annotations

from memory_quota_store import MemoryQuotaStore

from pulsar_throttled_source.backlog_values import BacklogValues, LearnedBacklog
from pulsar_throttled_source.quota_settings import QuotaConfig, Rate
from pulsar_throttled_source.throttling.buckets import BucketSpec
from pulsar_throttled_source.throttling.demands import PartitionDemand
from pulsar_throttled_source.throttling.engine import QuotaEngine
from pulsar_throttled_source.throttling.headroom import ESTIMATE_ABOVE, HEADROOM, estimates_far_from_quota

TOPIC = "persistent://public/default/t"
INF = float("inf")


def per_entry(value: float) -> LearnedBacklog:
    return LearnedBacklog(BacklogValues((), ((0, value),)), None)


class Partition:
    """A demand whose entries hold `msgs` messages each; counts what it is asked."""

    def __init__(self, index: int, msgs: int, known: float | None, backlog: int = 2) -> None:
        self.name = f"{TOPIC}-partition-{index}"
        self.msgs = msgs
        self.known = known
        self.backlog = backlog
        self.learned = 0

    def learn(self, msgs: float, size: float) -> LearnedBacklog:
        self.learned += 1
        return LearnedBacklog(BacklogValues((float(self.msgs),) * self.backlog))

    def estimate(self) -> LearnedBacklog | None:
        return per_entry(self.known) if self.known is not None else None

    def demand(self, topic: Rate) -> PartitionDemand:
        return PartitionDemand(self.name, "sub", self.backlog, lambda k: 100.0 * k, self.learn,
                               topic_rates=(("options", topic),), estimate_backlog=self.estimate)


def spec(key: str, msgs: float = INF, size: float = INF) -> BucketSpec:
    return BucketSpec(key, "topic", "topic", 1, msgs, size)


def test_a_bucket_with_headroom_over_the_whole_plan_prices_by_estimate_and_one_without_does_not() -> None:
    parts = [Partition(i, 3, known=3.0) for i in range(4)]
    demands = [p.demand(Rate(msgs=1000)) for p in parts]
    shared = spec("shared", msgs=1000)
    plan_msgs = 4 * 2 * 3.0  # four partitions, two entries of three messages each
    far = estimates_far_from_quota(demands, [[shared]] * 4, {"shared": (plan_msgs * HEADROOM, INF)}, True)
    assert all(e is not None and e.msgs is not None and e.msgs.per_entry == 3.0 for e in far)
    near = estimates_far_from_quota(demands, [[shared]] * 4, {"shared": (plan_msgs * HEADROOM - 1, INF)}, True)
    assert near == [None] * 4  # the sum over the bucket's partitions counts, not each alone
    bytes_near = estimates_far_from_quota(demands, [[spec("shared", size=1000)]] * 4, {"shared": (INF, 799 * HEADROOM)}, True)
    assert bytes_near == [None] * 4  # 800 bytes by the ledgers' averages
    never_charged = estimates_far_from_quota(demands, [[shared]] * 4, {}, True)
    assert never_charged == [None] * 4  # a bucket this engine has not seen: looked up
    unknown = [Partition(9, 3, known=None).demand(Rate(msgs=1000))]
    assert estimates_far_from_quota(unknown, [[shared]], {"shared": (1e9, INF)}, True) == [None]
    counted = Partition(8, 3, known=3.0)
    asked: list[str] = []
    counted.estimate = lambda: asked.append("asked") or per_entry(3.0)  # type: ignore[method-assign]
    batch = estimates_far_from_quota([counted.demand(Rate(msgs=1000))], [[shared]], {"shared": (1e9, INF)}, False)
    assert batch == [None] and asked == []  # batch mode, message quotas: entries are counted, nothing estimated


def test_a_large_plan_far_below_its_quotas_asks_no_entry_after_its_first_and_charges_the_estimate() -> None:
    clock = [1000.0]
    engine = QuotaEngine(QuotaConfig(source=Rate(), mode="precise", query_id="q"), MemoryQuotaStore(), clock=lambda: clock[0])
    parts = [Partition(i, 3, known=3.0) for i in range(ESTIMATE_ABOVE + 1)]
    generous = Rate(msgs=10_000)
    first = engine.plan([p.demand(generous) for p in parts]).admissions
    assert all(p.learned == 1 for p in parts)  # the first plan knows no bucket: every entry priced
    assert {a.entries for a in first} == {2} and {a.msgs for a in first} == {6.0}
    clock[0] += 1
    second = engine.plan([p.demand(generous) for p in parts]).admissions
    assert all(p.learned == 1 for p in parts)  # far below the quota: nothing asked
    assert {a.entries for a in second} == {2} and {a.msgs for a in second} == {6.0}

    tight = Rate(msgs=int(6 * HEADROOM) - 1)  # each partition's own bucket: near its quota
    clock[0] += 1
    engine.plan([p.demand(tight) for p in parts])
    assert all(p.learned == 2 for p in parts)
    small = parts[:ESTIMATE_ABOVE]  # few partitions: every entry priced, however far the quota
    clock[0] += 1
    engine.plan([p.demand(generous) for p in small])
    assert all(p.learned == 3 for p in small)
