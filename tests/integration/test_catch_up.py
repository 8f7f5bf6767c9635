"""Issue 42: a job that would use Trigger.AvailableNow catches a backlog up under a quota and stops, on
every Spark line. The spark-submit example (examples/throttled_ingest.py --trigger availableNow, which
calls pulsar_throttled_source.catch_up) runs with PySpark 4.0.5 and 4.1.4 (compat venvs, no admission
control: a processing-time trigger stopped once caught up) and the test venv's PySpark 4.2+
(Trigger.AvailableNow itself), all three at once. Each drains its backlog in several micro-batches, every
one within the quota (counted from the file sink's own log of each batch's files), stops, and a second
run after more messages arrive reads exactly those: every payload once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
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


def test_catch_up_drains_under_the_quota_and_stops_on_every_spark_line(broker, admin, pulsar_client, unique, tmp_path):
    pythons = {version: compat_python(version) for version in VERSIONS}
    pythons[pyspark.__version__] = Path(sys.executable)  # 4.2+: Trigger.AvailableNow
    runs = {}
    for version, python in pythons.items():
        topic = create_topic(admin, f"catch-up-{unique}-{version}", PARTITIONS)
        sent = produce(pulsar_client, topic, 24, prefix="backlog")  # one message per entry: 12 per partition
        work = tmp_path / version
        work.mkdir()
        args = ["--service-url", broker.service_url, "--admin-url", broker.admin_url, "--topic", topic,
                "--mode", "batch", "--topic-rate-msgs", str(RATE), "--trigger", "availableNow", "--timeout", "120",
                "--checkpoint", str(work / "checkpoint"), "--output", str(work / "out"),
                "--option", f"quotaStatePath={work / 'quota.sqlite'}"]
        runs[version] = (python, topic, sent, work, args, submit(python, args, work))

    for version, (python, topic, sent, work, args, job) in runs.items():
        out = finish(job, f"PySpark {version}", work / "first.log")
        trigger = "processingTime" if version in VERSIONS else "availableNow"  # detected by feature in each venv
        assert f"Caught up ({trigger} trigger)" in out, (version, out[-2000:])
        assert f"Done: {len(sent)} messages in " in out, (version, out[-2000:])
        rows = batch_rows(work / "out")
        assert sum(rows.values()) == len(sent), (version, rows)
        assert max(rows.values()) <= PARTITIONS * RATE, (version, rows)  # every batch within the quota
        assert len(rows) >= len(sent) // (PARTITIONS * RATE), (version, rows)  # several batches
        late = produce(pulsar_client, topic, 6, prefix="late")
        runs[version] = (python, topic, sent + late, work, args, submit(python, args, work))

    for version, (_, _, sent, work, _, job) in runs.items():
        out = finish(job, f"PySpark {version}, second run", work / "second.log")
        assert "Done: 6 messages in " in out, (version, out[-2000:])  # only what came after the first run
        values = pq.read_table(work / "out").column("value").to_pylist()
        assert Counter(bytes(v) for v in values) == Counter(s.payload for s in sent), version  # each once
        assert max(batch_rows(work / "out").values()) <= PARTITIONS * RATE, version
