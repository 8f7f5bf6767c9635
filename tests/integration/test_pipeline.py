"""Issue 15: the Spark Declarative Pipelines example (examples/pipeline), run as users run it
with `spark-pipelines run`: a streaming table over the source copies the topic under a quota.

One run: a second one (resuming from the pipeline's storage, which holds the source's checkpoint)
needs a persistent catalog, a Hive metastore started by each run, and the two runs cost 200
worker-seconds of a suite kept under 15 minutes. What a second run relies on, a restart from the
checkpoint reading exactly what arrived since, is the source's restart behaviour, tested in
test_restarts.py and test_source.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import yaml
from helpers import EXAMPLES, create_topic, produce
from spark_services import BIN, python_errors, spark_env


def run_pipeline(spec: Path) -> None:
    env = {**spark_env(), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(BIN / "spark-pipelines"), "run", "--spec", str(spec)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=spec.parent)
    with (spec.parent / "run.log").open("a") as log:
        log.write(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"spark-pipelines failed, log in {spec.parent / 'run.log'}:\n" + python_errors(proc.stdout + proc.stderr)


def table_values(warehouse: Path) -> Counter:
    import pyarrow.dataset as ds

    files = [p for p in (warehouse / "orders").rglob("*.parquet")]
    return Counter(bytes(v) for v in ds.dataset(files, format="parquet").to_table().column("value").to_pylist())


def test_pipeline_streaming_table_copies_the_topic_under_a_quota(broker, admin, pulsar_client, unique, tmp_path):
    project = tmp_path / "pipeline"
    shutil.copytree(EXAMPLES / "pipeline", project)
    spec_path = project / "spark-pipeline.yml"
    spec = yaml.safe_load(spec_path.read_text())
    topic = create_topic(admin, f"pipeline-{unique}", 2)
    spec["storage"] = (tmp_path / "storage").as_uri()
    spec["configuration"].update({"pulsar.service.url": broker.service_url, "pulsar.admin.url": broker.admin_url,
                                  "pulsar.topic": topic, "pulsar.topicRateMsgs": "10"})
    spec_path.write_text(yaml.safe_dump(spec))

    first = produce(pulsar_client, topic, 200, batch=5, prefix="first")  # 20 entries per partition
    run_pipeline(spec_path)
    assert table_values(project / "spark-warehouse") == Counter(s.payload for s in first)
