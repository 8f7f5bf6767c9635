"""Issue 42: a job that would use Trigger.AvailableNow catches a backlog up under a quota and stops on
PySpark 4.0 and 4.1, which give Python sources no admission control. The spark-submit example
(examples/throttled_ingest.py --trigger availableNow, which calls pulsar_throttled_source.catch_up) runs
with PySpark 4.0.5 and 4.1.4 (compat venvs, overlapping: 4.0.5 starts once 4.1.4 has committed its first micro-batch; on a busy
two-core machine a JVM starting while Spark starts its Python streaming source runner made that runner
miss Spark's fixed 10 s to connect back): each detects that its PySpark has no admission
control, drains the backlog on a processing-time trigger in several micro-batches, every one within the
quota (counted from the file sink's own log of each batch's files), and stops once caught up; every payload
once. On 4.2+ the same command runs Trigger.AvailableNow (test_cluster.py, on a standalone cluster); here
the session's PySpark (4.2+) catches up with AvailableNow, then the 4.0/4.1 way on the same checkpoint."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from compat_venvs import ROOT, VERSIONS, compat_python
from helpers import EXAMPLES, batch_rows, create_topic, produce
from spark_services import python_errors

RATE = 4  # entries per partition per second (--topic-rate-msgs, throttlingMode batch)
PARTITIONS = 2


def submit(python: Path, args: list[str], work: Path) -> subprocess.Popen:
    """The example under spark-submit; its stderr (Spark's log) goes to a file: it would fill a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    cmd = [str(python.parent / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2", str(EXAMPLES / "throttled_ingest.py"), *args]
    with open(work / "spark-submit.log", "w") as log:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=work)


def first_batch_committed(job: subprocess.Popen, work: Path) -> None:
    """Until the job's first micro-batch has committed (its Python streaming source runner is up) or it ended."""
    deadline = time.monotonic() + 240
    while not (work / "checkpoint" / "commits" / "0").exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)


def finish(job: subprocess.Popen, label: str, work: Path) -> str:
    try:
        out, _ = job.communicate(timeout=300)
    finally:
        job.kill()
    log = work / "spark-submit.log"
    assert job.returncode == 0, f"{label}: spark-submit failed, full log in {log}:\n" + python_errors(log.read_text())
    return out



def test_catch_up_drains_under_the_quota_and_stops_on_spark_4_0_and_4_1(broker, admin, pulsar_client, unique, tmp_path):
    backlogs = {}
    for version in reversed(VERSIONS):  # 4.0's JVM starts second: see the module doc
        topic = create_topic(admin, f"catch-up-{unique}-{version}", PARTITIONS)
        backlogs[version] = (topic, produce(pulsar_client, topic, 24))  # one message per entry: 12 per partition
    jobs: list[tuple[str, list, Path, subprocess.Popen]] = []
    for version, (topic, sent) in backlogs.items():
        work = tmp_path / version
        work.mkdir()
        args = ["--service-url", broker.service_url, "--admin-url", broker.admin_url, "--topic", topic,
                "--mode", "batch", "--topic-rate-msgs", str(RATE), "--trigger", "availableNow", "--timeout", "120",
                "--checkpoint", str(work / "checkpoint"), "--output", str(work / "out"),
                "--option", f"quotaStatePath={work / 'quota.sqlite'}"]
        if jobs:  # overlapping runs, but no JVM starting beside a runner that starts (see the module doc)
            first_batch_committed(jobs[-1][3], jobs[-1][2])
        jobs.append((version, sent, work, submit(compat_python(version), args, work)))

    for version, sent, work, job in jobs:
        out = finish(job, f"PySpark {version}", work)
        assert "Caught up (processingTime trigger)" in out, (version, out[-2000:])  # not stopped by --timeout
        assert f"Done: {len(sent)} messages in " in out, (version, out[-2000:])
        rows = batch_rows(work / "out")
        assert max(rows.values()) <= PARTITIONS * RATE, (version, rows)  # every batch within the quota
        assert len(rows) >= len(sent) // (PARTITIONS * RATE), (version, rows)  # several batches
        values = pq.read_table(work / "out").column("value").to_pylist()
        assert Counter(bytes(v) for v in values) == Counter(s.payload for s in sent), version  # each once


def test_catch_up_on_spark_4_2_and_later_is_available_now_then_the_4_0_way_on_the_same_checkpoint(
        spark, broker, admin, pulsar_client, unique, tmp_path):
    from pulsar_throttled_source.catch_up import catch_up

    topic = create_topic(admin, f"catch-up-now-{unique}", PARTITIONS)
    sent = produce(pulsar_client, topic, 20)  # 10 entries per partition

    def writer():
        return (spark.readStream.format("pulsar-throttled").option("service.url", broker.service_url)
                .option("admin.url", broker.admin_url).option("topic", topic).option("startingOffsets", "earliest")
                .option("throttlingMode", "batch").option("dispatchThrottlingRatePerTopicInMsg", str(RATE))
                .option("quotaStatePath", str(tmp_path / "quota.sqlite")).load()
                .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "checkpoint")))

    result = catch_up(writer(), timeout_s=120)  # this PySpark has admission control: Trigger.AvailableNow
    assert (result.trigger, result.rows, result.query.isActive) == ("availableNow", len(sent), False)
    assert result.batches >= 3 and result.reports[0]["entriesBehindLatest"] == 0
    # What a 4.0/4.1 run does, here on the 4.2+ reader (its report in latestOffset): the messages sent since.
    late = produce(pulsar_client, topic, 8, prefix="late")
    result = catch_up(writer(), timeout_s=120, available_now=False, processing_time="200 milliseconds")
    assert (result.trigger, result.rows, result.query.isActive) == ("processingTime", len(late), False)

    rows = batch_rows(tmp_path / "out")
    assert max(rows.values()) <= PARTITIONS * RATE, rows  # every batch within the quota
    values = pq.read_table(tmp_path / "out").column("value").to_pylist()
    assert Counter(bytes(v) for v in values) == Counter(s.payload for s in sent + late)  # each once
