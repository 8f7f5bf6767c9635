"""Issue 39 on the Spark lines without reportLatestOffset: on 4.0.5 and 4.1.4 the source's report rides in the
end offset, where the quickstart notebook's watch cell (run as it is) reads it; lag falls to 0, and a caught-up
query left idle runs no batch and writes no offset; the metrics listener exports each event's lag. 4.3 (latestOffset): test_query_progress.py and the whole
notebook in test_notebook.py. progress_job.py runs on 4.3 too (pass sys.executable) when checking by hand."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from compat_venvs import ROOT, VERSIONS, compat_python
from helpers import create_topic, produce

ENTRIES = 20  # per partition, one message each: 2 batches at the job's quota of 5 per partition, then 2 more


def test_the_notebook_watch_cell_reads_lag_and_throttle_state_on_4_0_and_4_1(broker, admin, pulsar_client, unique, tmp_path: Path):
    jobs = {}
    for version, python in [(v, compat_python(v)) for v in VERSIONS]:
        topic = create_topic(admin, f"progress-{unique}-{version}", 2)
        produce(pulsar_client, topic, 2 * ENTRIES)
        workdir = tmp_path / version
        workdir.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), PYTHONPATH=str(ROOT))
        jobs[version] = subprocess.Popen(
            [str(python), str(Path(__file__).parent / "progress_job.py"), broker.service_url, broker.admin_url, topic,
             str(workdir), str(ROOT / "notebooks" / "quickstart.ipynb")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
    for version, job in jobs.items():
        try:
            out, err = job.communicate(timeout=400)
        finally:
            job.kill()
        assert job.returncode == 0, f"PySpark {version}: {err[-4000:]}"
        result = json.loads(out.split("RESULT ", 1)[1])
        assert result["pyspark"].startswith(version), result["pyspark"]
        assert f"Read {2 * ENTRIES} messages in" in result["printed"], (version, result["printed"])
        behind = [r["entriesBehindLatest"] for r in result["reports"]]
        assert behind == sorted(behind, reverse=True) and behind[-1] == 0 and len(behind) >= 3, (version, behind)
        assert all(r["secondsBehindLatest"] > 0 and r["throttle"]["heldBy"] == "topic"
                   for r in result["reports"] if r["entriesBehindLatest"]), (version, result["reports"])
        idle = result["idle"]
        assert (idle["entriesBehindLatest"], idle["secondsBehindLatest"], idle["throttle"]["heldBy"]) == (0, 0.0, None), version
        assert result["idle_batches"] == result["idle_offsets"] == 0, (version, result)
        # The metrics listener reads these lines' events (the report in the end offset) and exports each one's lag.
        pairs = result["metric_pairs"]
        assert pairs and all(reported == exported for reported, exported in pairs), (version, pairs)
        assert pairs[0][0][0] > 0 and pairs[-1][0][0] == 0, (version, pairs)
        shown = json.loads(result["last_progress_json"])["sources"][0]
        assert shown["endOffset"]["progress"] == shown["latestOffset"]["progress"] == idle, (version, shown)
