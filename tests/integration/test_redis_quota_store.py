"""quotaStore=redis://...: the quota buckets in a real Redis server (started by the tests), shared by
planners on any host: the store's own guarantees, and two Spark applications sharing one topic
quota through it."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import create_topic, produce, wait_until
from quota_windows import Batch, per_window_ok, planning_interval
from redis_server import PASSWORD, redis_server, store_endpoint, store_options

from pulsar_throttled_source.admin_endpoint import QuotaStoreEndpoint
from pulsar_throttled_source.quota_settings import QuotaConfig, Rate
from pulsar_throttled_source.throttling.demands import PartitionDemand
from pulsar_throttled_source.throttling.engine import QuotaEngine
from pulsar_throttled_source.throttling.redis_store import BUCKET_TTL_S, QuotaStoreError, RedisQuotaStore
from pulsar_throttled_source.throttling.store import BucketState
from pulsar_throttled_source.throttling.store_factory import open_quota_store

P0 = "persistent://public/default/shared-partition-0"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


def increment(store: RedisQuotaStore, key: str, times: int) -> None:
    for _ in range(times):
        with store.transaction() as tx:
            state = tx.get(key) or BucketState(window=0, used_msgs=0.0, used_bytes=0.0)
            time.sleep(0)  # invite a lost update
            state.used_msgs += 1
            state.used_bytes += 10
            tx.put(key, state)


def _increment_in_child(url: str, key: str, times: int) -> None:
    increment(RedisQuotaStore(store_endpoint(url)), key, times)


def test_buckets_round_trip_and_expire_a_day_after_their_last_charge(redis_url: str) -> None:
    store = open_quota_store(store_endpoint(redis_url), "/nonexistent/never-opened.sqlite")
    assert isinstance(store, RedisQuotaStore)
    with store.transaction() as tx:
        assert tx.get("rt") is None
        tx.put("rt", BucketState(7, 1.5, 20.0))
        assert tx.get("rt") == BucketState(7, 1.5, 20.0)  # its own writes, before commit
    with store.transaction() as tx:
        assert tx.get("rt") == BucketState(7, 1.5, 20.0)
        tx.put_many({"rt2": BucketState(8, 2.0, 1.0)})
        # Several at once (one round trip), staged writes included.
        assert tx.get_many(["rt", "rt2", "none"]) == {"rt": BucketState(7, 1.5, 20.0), "rt2": BucketState(8, 2.0, 1.0), "none": None}
    with store.transaction() as tx:
        assert tx.get_many(["rt2", "rt"]) == {"rt2": BucketState(8, 2.0, 1.0), "rt": BucketState(7, 1.5, 20.0)}
    assert store._client.exists("pulsar-throttled:bucket:rt")
    ttl = store._client.ttl("pulsar-throttled:bucket:rt")
    assert BUCKET_TTL_S - 60 < ttl <= BUCKET_TTL_S


def test_a_failed_transaction_charges_nothing(redis_url: str) -> None:
    store = RedisQuotaStore(store_endpoint(redis_url))
    with pytest.raises(ZeroDivisionError), store.transaction() as tx:
        tx.put("failed", BucketState(1, 5.0, 5.0))
        raise ZeroDivisionError
    with store.transaction() as tx:
        assert tx.get("failed") is None


def test_no_increment_is_lost_across_threads_and_processes(redis_url: str) -> None:
    store = RedisQuotaStore(store_endpoint(redis_url))
    threads = [threading.Thread(target=increment, args=(store, "threads", 50)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    children = [multiprocessing.get_context("spawn").Process(target=_increment_in_child, args=(redis_url, "procs", 40))
                for _ in range(3)]
    for c in children:
        c.start()
    for c in children:
        c.join(120)
        assert c.exitcode == 0
    with store.transaction() as tx:
        assert tx.get("threads") == BucketState(0, 200.0, 2000.0)
        assert tx.get("procs") == BucketState(0, 120.0, 1200.0)


def test_two_engines_on_two_hosts_share_one_topic_quota(redis_url: str) -> None:
    # Two planners (as on two drivers), each with its own engine and its own connection: together
    # they admit exactly the topic quota per window, whoever plans first.
    topic = Rate(msgs=30)
    demand = PartitionDemand(P0, "sub", 1000, lambda k: float(k), None, topic_rates=(("options", topic),))
    engines = [QuotaEngine(QuotaConfig(Rate(), mode="batch", query_id=f"q{i}"), RedisQuotaStore(store_endpoint(redis_url)), lambda: 5000.5)
               for i in range(2)]
    admitted = [engine.plan([demand]).admissions[0].entries for engine in engines]
    assert admitted == [30, 0]


def test_an_unreachable_store_fails_fast_naming_the_option_without_the_password(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(QuotaStoreError) as error:
        RedisQuotaStore(QuotaStoreEndpoint("redis://127.0.0.1:1/0", None, PASSWORD))
    assert time.monotonic() - started < 15
    message = str(error.value)
    assert "option 'quotaStore'" in message and "redis://127.0.0.1:1/0" in message and PASSWORD not in message


def test_a_store_that_goes_away_fails_planning_instead_of_admitting(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        store = RedisQuotaStore(store_endpoint(url))
        engine = QuotaEngine(QuotaConfig(Rate(), mode="batch", query_id="away"), store, lambda: 6000.5)
        demand = PartitionDemand(P0, "sub", 10, lambda k: float(k), None, topic_rates=(("options", Rate(msgs=5)),))
        assert engine.plan([demand]).admissions[0].entries == 5
    with pytest.raises(QuotaStoreError, match=r"option 'quotaStore'.*Nothing was admitted or charged") as error:
        engine.plan([demand])
    assert PASSWORD not in str(error.value) and repr(store) == f"RedisQuotaStore('{url.replace(':' + PASSWORD + '@', '')}')"


def test_two_spark_applications_share_one_topic_quota_through_redis(spark, broker, admin, pulsar_client, redis_url,
                                                                    tmp_path, unique):
    # Two applications (two drivers, as two Databricks jobs), each with its own SQLite file: only the
    # Redis store is shared. Per window, both together stay within the topic quota; each reads every
    # message exactly once.
    quota, n = 10, 40  # each application reads all 40: together at least 8 windows at the shared quota
    topic = create_topic(admin, f"redis-shared-{unique}", 0)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    workdir = tmp_path / "second"
    workdir.mkdir()
    job = subprocess.Popen([sys.executable, str(Path(__file__).parent / "shared_quota_job.py"), broker.service_url,
                            broker.admin_url, topic, redis_url, str(workdir), str(n), str(quota)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
    values: list[str] = []
    query = None
    try:
        wait_until(lambda: (workdir / "ready").exists() or job.poll() is not None, 120, what="the second application's query")
        query = (spark.readStream.format("pulsar-throttled")
                 .options(**{"service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic,
                             "startingOffsets": "earliest", "throttlingMode": "batch", "subscription": "first-application",
                             "dispatchThrottlingRatePerTopicInMsg": str(quota), **store_options(redis_url),
                             "quotaStatePath": str(tmp_path / "not-shared.sqlite"), "metadataRefreshIntervalMs": "300"})
                 .load().writeStream.foreachBatch(lambda df, _: values.extend(bytes(r.value).decode() for r in df.collect()))
                 .trigger(processingTime="1 second").option("checkpointLocation", str(tmp_path / "cp")).start())
        wait_until(lambda: len(query.recentProgress) > 0 or not query.isActive, 120, what="the first application's query")
        # Both applications plan now: the messages arrive, and they read them side by side.
        sent = sorted(s.payload.decode() for s in produce(pulsar_client, topic, n, prefix="shared"))
        produced_at = time.time()
        wait_until(lambda: len(values) >= n or not query.isActive, 120, what="the first application's whole topic")
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= len(values), 10, what="its last progress")
        out, err = job.communicate(timeout=180)
    finally:
        if query is not None:
            query.stop()
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 0, err[-3000:]
    second = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])
    assert sorted(values) == sent and sorted(second["values"]) == sent  # each: every message, once

    def batches(planned: list[tuple[tuple[float, float], int]], first_id: int) -> list[Batch]:
        return [Batch(first_id + i, hi, {topic: set(range(rows))}, {topic: rows}, {}, [], planned=(lo, hi))
                for i, ((lo, hi), rows) in enumerate(planned)]

    mine = batches([(planning_interval(p), p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]], 0)
    theirs = batches([(tuple(b["planned"]), b["rows"]) for b in second["batches"]], 1000)
    table = "\n".join(f"{'first' if b.batch_id < 1000 else 'second'} {b.planned_windows()}: {b.rows}" for b in mine + theirs)
    # Both had messages to read from the moment they were produced until each one's last batch: in
    # those windows, whoever planned first took the quota and the other got what was left (nothing,
    # in batch mode with one-entry messages), as at a broker. Alone, each would have read 10 a window.
    both_behind = min(max(b.planned_windows()[-1] for b in bs) for bs in (mine, theirs)) - math.floor(produced_at) + 1
    assert both_behind >= n // quota, table
    ok, why = per_window_ok(mine + theirs, lambda b, p: b.msgs.get(p, 0), quota)
    assert ok, f"the two applications together went over the shared topic quota {quota}: {why}\n{table}"
