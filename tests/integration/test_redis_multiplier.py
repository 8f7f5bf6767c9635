"""The cluster's congestion multiplier (adaptiveThrottling) in a real Redis server (quotaStore=redis://...): the same
read-modify-write semantics as the SQLite store (tests/unit/test_multiplier_store.py), with four planners each on its
own connection, as four Spark applications on different hosts would be, and the record's expiry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from multiplier_checks import CLUSTER, W, apply, shared_store_checks
from redis_server import redis_server, store_endpoint

from pulsar_throttled_source.throttling.redis_store import BUCKET_TTL_S, RedisQuotaStore
from pulsar_throttled_source.throttling.store import MultiplierState


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis-multiplier")) as url:
        yield url


def test_four_planners_on_one_redis_decide_once_per_window(redis_url: str) -> None:
    shared_store_checks(lambda: RedisQuotaStore(store_endpoint(redis_url), prefix="multiplier-shared:"))


def test_multiplier_round_trips_expires_and_a_failed_transaction_writes_nothing(redis_url: str) -> None:
    import redis

    store = RedisQuotaStore(store_endpoint(redis_url), prefix="multiplier-rt:")
    assert apply(store, W, "decrease") == MultiplierState(W, 1.0, "decrease", 0.5)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.put_multiplier(CLUSTER, MultiplierState(2 * W, 0.5, "decrease", 0.25))
        raise RuntimeError("planning failed")
    restarted = RedisQuotaStore(store_endpoint(redis_url), prefix="multiplier-rt:")  # another process, another host: same record
    assert apply(restarted, 2 * W, "increase") == MultiplierState(2 * W, 0.5, "increase", 0.55)
    ttl = redis.Redis.from_url(redis_url).ttl("multiplier-rt:multiplier:" + CLUSTER)
    assert BUCKET_TTL_S - 60 < ttl <= BUCKET_TTL_S
    with store.transaction() as tx:  # slow start is kept with the record (a record without the field: out of it)
        tx.put_multiplier("http://slow:8080", MultiplierState(W, 0.2, "increase", 0.4, slow_start=True))
    with restarted.transaction() as tx:
        assert tx.get_multiplier("http://slow:8080") == MultiplierState(W, 0.2, "increase", 0.4, slow_start=True)


def test_two_planners_back_off_together_on_one_planners_stress_signal(redis_url: str) -> None:
    """Two applications on two hosts (two connections) with real stress signals on a fake clock: only the first sees
    the producers' pain (pending adds); both apply the cluster's m from the next window on, and climb back together."""
    from pulsar_throttled_source.metadata.catalog import CatalogSnapshot
    from pulsar_throttled_source.metadata.stress_readings import BrokerStress
    from pulsar_throttled_source.quota_settings import AdaptiveConfig
    from pulsar_throttled_source.throttling.controller import CongestionController
    from pulsar_throttled_source.throttling.signals import PendingAddsSignal

    now = [3_000_000.0]
    config = AdaptiveConfig(slow_start=False)
    stressed, calm = PendingAddsSignal(), PendingAddsSignal()
    first = CongestionController(config, CLUSTER, RedisQuotaStore(store_endpoint(redis_url), prefix="multiplier-signals:"), [stressed],
                                 lambda: now[0])
    second = CongestionController(config, CLUSTER, RedisQuotaStore(store_endpoint(redis_url), prefix="multiplier-signals:"), [calm],
                                  lambda: now[0])
    partition = "persistent://public/default/t"
    stressed.observe(CatalogSnapshot(now[0], {}, {}, {}, now[0], {partition: BrokerStress(40)}))
    calm.observe(CatalogSnapshot(now[0], {}, {}, {}, now[0], {partition: BrokerStress(0)}))
    # The second decides first and keeps its m for the window; the first's decrease is the window's, and reaches the
    # second at its next window, which starts from it.
    assert (second.multiplier(), first.multiplier()) == (1.0, 0.5)
    assert first.last is not None and first.last.fired() == ["pendingAdds"]
    now[0] += 10
    assert (first.multiplier(), second.multiplier()) == (0.55, 0.55)
