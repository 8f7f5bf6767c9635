"""The second Spark application of the shared-redis scenarios, run by shared.py as a subprocess
(`python -m accuracy.shared_job SPEC`, with bench/ on PYTHONPATH): its own driver, reading the same
topic under the same Redis-held topic quota as the bench's session.

SPEC is JSON: the query's options, a work dir and a timeout. It touches `started` in the work dir
once its query is started, `ready` once its first data batch ran, reads until `stop` appears there, then writes its run record (plans and
deliveries, recorder.RunRecord) to `result.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .query import session, start_query, stop_cleanly, wait_for
from .recorder import Recorder


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    workdir = Path(spec["workdir"])
    spark = session("throttle-accuracy-second-application")
    rec = Recorder()
    query = start_query(spark, spec["options"], rec, workdir / "cp")
    (workdir / "started").touch()  # the bench starts its own query now: the two start-ups overlap
    try:
        wait_for(lambda: rec.data_batches() > 0, 180, "its first data batch", query)
        (workdir / "ready").touch()
        wait_for(lambda: (workdir / "stop").exists(), float(spec["timeout_s"]), "the bench's stop signal", query)
        record = stop_cleanly(query, rec, workdir / "progress-second.json")
        (workdir / "result.json").write_text(record.to_json())
    finally:
        if query.isActive:
            query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
