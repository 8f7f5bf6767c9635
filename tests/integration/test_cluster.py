"""Issue 15 (and issue 5's spark-submit example): a real standalone cluster (a master and a worker process, as `spark-class` starts
them) runs the spark-submit example under a quota: the read tasks run in the worker's executor
JVM and its Python workers, not in the driver, and still deliver every message once."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest
from helpers import EXAMPLES, batch_rows, create_topic, produce
from spark_services import BIN, python_errors, spark_env, start_standalone_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    url, services = start_standalone_cluster(tmp_path_factory.mktemp("cluster"))
    yield url, services[0]
    for service in services:
        service.stop()


def test_spark_submit_example_on_a_standalone_cluster(cluster, broker, admin, pulsar_client, unique, tmp_path):
    import pyarrow.parquet as pq

    topic = create_topic(admin, f"cluster-{unique}", 2)
    sent = produce(pulsar_client, topic, 200, batch=10, prefix="batched")  # 10 entries per partition
    sent += produce(pulsar_client, topic, 100, prefix="single")  # +50 entries per partition: 2 ledgers each
    output = tmp_path / "parquet"
    master_url, worker = cluster
    cmd = [
        str(BIN / "spark-submit"), "--master", master_url, "--deploy-mode", "client",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.executor.memory=768m", "--conf", "spark.cores.max=2",
        str(EXAMPLES / "throttled_ingest.py"),
        "--service-url", broker.service_url, "--admin-url", broker.admin_url,
        "--topic", topic, "--starting-offsets", "earliest",
        "--mode", "batch", "--topic-rate-msgs", "20", "--trigger", "availableNow",
        "--checkpoint", str(tmp_path / "checkpoint"), "--output", str(output),
        "--option", f"quotaStatePath={tmp_path / 'quota.sqlite'}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=spark_env(), cwd=tmp_path)
    (tmp_path / "spark-submit.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"spark-submit failed, full log in {tmp_path / 'spark-submit.log'}:\n" + python_errors(proc.stderr)
    assert f"Done: {len(sent)} messages" in proc.stdout, proc.stdout[-2000:]
    assert "Caught up (availableNow trigger)" in proc.stdout, proc.stdout[-2000:]  # 4.2+: Spark's own AvailableNow
    batches = int(proc.stdout.split(f"Done: {len(sent)} messages in ")[1].split()[0])
    assert batches >= 3, "60 entries per partition at 20 entries per period need at least 3 micro-batches"
    rows = batch_rows(output)
    assert len(rows) == batches and sum(rows.values()) == len(sent), rows
    assert "Asked to launch executor" in worker.log(), "the read tasks did not run on the cluster's worker"

    table = pq.read_table(output)  # _spark_metadata is skipped: names starting with '_' are ignored
    assert Counter(bytes(v) for v in table.column("value").to_pylist()) == Counter(s.payload for s in sent)
    assert set(table.column("topic").to_pylist()) == {f"{topic}-partition-0", f"{topic}-partition-1"}
