"""Issue 15: the source on the Spark lines without admission control for Python streaming sources
(PySpark 4.0.x and 4.1.x, as Databricks 17.3 LTS and 18.x LTS run them), each in its own cached venv
(tests/compat_venvs.py) running today's checkout. Processing-time triggers are throttled, exactly
once across a restart; Trigger.AvailableNow reads one throttled batch and stops, with a WARN. Issue 39 on
these lines (no reportLatestOffset): the source's report rides in the end offset, where the quickstart
notebook's watch cell (run as it is) reads it; lag falls to 0, a caught-up query left idle runs no batch
and writes no offset, and the metrics listener exports each event's lag. (4.3: test_query_progress.py, and
the whole notebook on every line in test_notebook.py.) Issue 42 on these lines: the spark-submit example with
--trigger availableNow (its main, in the same application) detects that its PySpark has no admission control,
drains a backlog on a processing-time trigger in several micro-batches, every one within the quota (counted from
the file sink's own log of each batch's files), and stops once caught up; every payload once. (4.2+:
test_catch_up.py and test_cluster.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from compat_venvs import ROOT, VERSIONS, compat_python
from helpers import Sent, batch_rows, create_topic, produce

PER_PARTITION = 5  # entries per partition per second, as compat_job sets the topic quota
WATCHED = 20  # entries per partition of the watched query's topic, one message each: 4 batches at its quota
CATCH_UP_RATE = 4  # entries per partition per second in the example's catch-up (--topic-rate-msgs)


def test_throttled_exactly_once_and_restartable_on_older_spark(broker, admin, pulsar_client, unique, tmp_path: Path):
    # Both versions at once: their time goes mostly to waiting out quota windows.
    jobs = {}
    for version in VERSIONS:
        python = compat_python(version)
        topic = create_topic(admin, f"compat-{unique}-{version}", 2)
        sent = produce(pulsar_client, topic, 40)  # one message per entry: 20 entries per partition
        an_topic = create_topic(admin, f"compat-an-{unique}-{version}", 0)
        an_sent = produce(pulsar_client, an_topic, 12, prefix="an")
        progress_topic = create_topic(admin, f"compat-progress-{unique}-{version}", 2)
        produce(pulsar_client, progress_topic, 2 * WATCHED, prefix="watched")
        catch_up_topic = create_topic(admin, f"compat-catch-up-{unique}-{version}", 2)
        catch_up_sent = produce(pulsar_client, catch_up_topic, 24, prefix="catch-up")  # 12 entries per partition
        workdir = tmp_path / version
        workdir.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), PYTHONPATH=str(ROOT))
        job = subprocess.Popen([str(python), str(Path(__file__).parent / "compat_job.py"), broker.service_url,
                                broker.admin_url, topic, an_topic, progress_topic, catch_up_topic, str(workdir), str(len(sent)), str(len(an_sent)),
                                str(ROOT / "notebooks" / "quickstart.ipynb")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
        jobs[version] = (job, sent, an_sent, catch_up_sent, workdir)
    for version, (job, sent, an_sent, catch_up_sent, workdir) in jobs.items():
        try:
            out, err = job.communicate(timeout=400)
        finally:
            job.kill()
        check(version, job.returncode, out, err, sent, an_sent)
        check_caught_up(version, out.split("RESULT ", 1)[1], workdir / "catch_up", catch_up_sent)


def check(version: str, returncode: int, out: str, err: str, sent: list[Sent], an_sent: list[Sent]) -> None:
    assert returncode == 0, f"PySpark {version}: {err[-4000:]}"
    result = json.loads(out.split("RESULT ", 1)[1].split("\n", 1)[0])  # the example prints after it
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
    check_watched(version, result["watched"])


def check_caught_up(version: str, printed: str, output: Path, sent: list[Sent]) -> None:
    """The example's availableNow catch-up: a processing-time trigger on these lines, several batches, each in the quota."""
    assert "Caught up (processingTime trigger)" in printed, (version, printed[-2000:])  # not stopped by --timeout
    assert f"Done: {len(sent)} messages in " in printed, (version, printed[-2000:])
    rows = batch_rows(output)
    assert max(rows.values()) <= 2 * CATCH_UP_RATE, (version, rows)  # every batch within the quota (2 partitions)
    assert len(rows) >= len(sent) // (2 * CATCH_UP_RATE), (version, rows)  # several batches
    values = pq.read_table(output).column("value").to_pylist()
    assert Counter(bytes(v) for v in values) == Counter(s.payload for s in sent), version  # each once


def check_watched(version: str, watched: dict) -> None:
    """The notebook's watch cell read the lag and throttle state from the end offset; idle is idle."""
    assert f"Read {2 * WATCHED} messages in" in watched["printed"], (version, watched["printed"])
    behind = [r["entriesBehindLatest"] for r in watched["reports"]]
    assert behind == sorted(behind, reverse=True) and behind[-1] == 0 and len(behind) >= 3, (version, behind)
    assert all(r["secondsBehindLatest"] > 0 and r["throttle"]["heldBy"] == "topic"
               for r in watched["reports"] if r["entriesBehindLatest"]), (version, watched["reports"])
    idle = watched["idle"]
    assert (idle["entriesBehindLatest"], idle["secondsBehindLatest"], idle["throttle"]["heldBy"]) == (0, 0.0, None), version
    assert watched["idle_batches"] == watched["idle_offsets"] == 0, (version, watched)
    # The metrics listener reads these lines' events (the report in the end offset) and exports each one's lag.
    pairs = watched["metric_pairs"]
    assert pairs and all(reported == exported for reported, exported in pairs), (version, pairs)
    assert pairs[0][0][0] > 0 and pairs[-1][0][0] == 0, (version, pairs)
    shown = json.loads(watched["last_progress_json"])["sources"][0]
    assert shown["endOffset"]["progress"] == shown["latestOffset"]["progress"] == idle, (version, shown)
