"""Issue 42: a job that would use Trigger.AvailableNow catches a backlog up under a quota and stops on
PySpark 4.0 and 4.1, which give Python sources no admission control. The spark-submit example
(examples/throttled_ingest.py --trigger availableNow, which calls pulsar_throttled_source.catch_up) runs
with PySpark 4.0.5 and 4.1.4 (compat venvs, both at once): each detects that its PySpark has no admission
control, drains the backlog on a processing-time trigger in several micro-batches, every one within the
quota (counted from the file sink's own log of each batch's files), and stops once caught up; every payload
once. On 4.2+ the same command runs Trigger.AvailableNow: test_cluster.py, on a standalone cluster."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from compat_venvs import ROOT, VERSIONS, compat_python
from helpers import create_topic, produce
from spark_services import python_errors
from test_examples import EXAMPLES

RATE = 4  # entries per partition per second (--topic-rate-msgs, throttlingMode batch)
PARTITIONS = 2


def submit(python: Path, args: list[str], cwd: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    cmd = [str(python.parent / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2", str(EXAMPLES / "throttled_ingest.py"), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


def finish(job: subprocess.Popen, label: str, log: Path) -> str:
    try:
        out, err = job.communicate(timeout=300)
    finally:
        job.kill()
    log.write_text(out + err)
    assert job.returncode == 0, f"{label}: spark-submit failed, full log in {log}:\n" + python_errors(err)
    return out


def batch_rows(output: Path) -> dict[int, int]:
    """Rows per micro-batch, from the file sink's log: _spark_metadata/<batch> lists the files it committed."""
    rows = {}
    for entry in (output / "_spark_metadata").iterdir():
        if entry.name.isdigit():
            files = [json.loads(line)["path"] for line in entry.read_text().splitlines()[1:]]
            rows[int(entry.name)] = sum(pq.read_metadata(f.removeprefix("file://")).num_rows for f in files)
    return rows


def test_catch_up_drains_under_the_quota_and_stops_on_spark_4_0_and_4_1(broker, admin, pulsar_client, unique, tmp_path):
    runs = {}
    for version in VERSIONS:
        topic = create_topic(admin, f"catch-up-{unique}-{version}", PARTITIONS)
        sent = produce(pulsar_client, topic, 24)  # one message per entry: 12 per partition
        work = tmp_path / version
        work.mkdir()
        args = ["--service-url", broker.service_url, "--admin-url", broker.admin_url, "--topic", topic,
                "--mode", "batch", "--topic-rate-msgs", str(RATE), "--trigger", "availableNow", "--timeout", "120",
                "--checkpoint", str(work / "checkpoint"), "--output", str(work / "out"),
                "--option", f"quotaStatePath={work / 'quota.sqlite'}"]
        runs[version] = (sent, work, submit(compat_python(version), args, work))

    for version, (sent, work, job) in runs.items():
        out = finish(job, f"PySpark {version}", work / "spark-submit.log")
        assert "Caught up (processingTime trigger)" in out, (version, out[-2000:])  # not stopped by --timeout
        assert f"Done: {len(sent)} messages in " in out, (version, out[-2000:])
        rows = batch_rows(work / "out")
        assert max(rows.values()) <= PARTITIONS * RATE, (version, rows)  # every batch within the quota
        assert len(rows) >= len(sent) // (PARTITIONS * RATE), (version, rows)  # several batches
        values = pq.read_table(work / "out").column("value").to_pylist()
        assert Counter(bytes(v) for v in values) == Counter(s.payload for s in sent), version  # each once
