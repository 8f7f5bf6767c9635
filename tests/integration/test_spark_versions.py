"""Issue 15: the source on the Spark lines without admission control for Python streaming sources
(PySpark 4.0.x and 4.1.x, as Databricks 17.3 LTS and 18.x LTS run them), each in its own cached venv
(tests/compat_venvs.py) running today's checkout. Processing-time triggers are throttled, exactly
once across a restart; Trigger.AvailableNow reads one throttled batch and stops, with a WARN."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

from compat_venvs import ROOT, VERSIONS, compat_python
from helpers import Sent, create_topic, produce

PER_PARTITION = 5  # entries per partition per second, as compat_job sets the topic quota


def test_throttled_exactly_once_and_restartable_on_older_spark(broker, admin, pulsar_client, unique, tmp_path: Path):
    # Both versions at once: their time goes mostly to waiting out quota windows.
    jobs = {}
    for version in VERSIONS:
        python = compat_python(version)
        topic = create_topic(admin, f"compat-{unique}-{version}", 2)
        sent = produce(pulsar_client, topic, 40)  # one message per entry: 20 entries per partition
        an_topic = create_topic(admin, f"compat-an-{unique}-{version}", 0)
        an_sent = produce(pulsar_client, an_topic, 12, prefix="an")
        workdir = tmp_path / version
        workdir.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), PYTHONPATH=str(ROOT))
        job = subprocess.Popen([str(python), str(Path(__file__).parent / "compat_job.py"), broker.service_url,
                                broker.admin_url, topic, an_topic, str(workdir), str(len(sent)), str(len(an_sent))],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
        jobs[version] = (job, sent, an_sent)
    for version, (job, sent, an_sent) in jobs.items():
        try:
            out, err = job.communicate(timeout=400)
        finally:
            job.kill()
        check(version, job.returncode, out, err, sent, an_sent)


def check(version: str, returncode: int, out: str, err: str, sent: list[Sent], an_sent: list[Sent]) -> None:
    assert returncode == 0, f"PySpark {version}: {err[-4000:]}"
    result = json.loads(out.split("RESULT ", 1)[1])
    assert result["pyspark"] == version

    # Exactly once across the restart, and each batch inside the topic quota (2 partitions).
    assert Counter(result["main"]) == Counter(s.payload.decode() for s in sent), version
    assert result["first_run"] and result["second_run"], result
    batches = result["first_run"] + result["second_run"]
    assert max(batches) <= 2 * PER_PARTITION, (version, batches)
    assert len(batches) >= len(sent) // (2 * PER_PARTITION), (version, batches)

    # AvailableNow: one batch of at most one quota, then a processing-time run reads the rest once.
    assert result["available_now"] == [PER_PARTITION], (version, result["available_now"])
    assert len(result["after_available_now"]) == PER_PARTITION, version
    assert Counter(result["an"]) == Counter(s.payload.decode() for s in an_sent), version
    assert err.count("Trigger.AvailableNow and Trigger.Once read one throttled micro-batch") >= 4, version  # each query
