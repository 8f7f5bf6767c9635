"""How exactly the throttled source meets its quota, window by window and in the long run.

Starts its own LocalBroker, produces the backlogs the chosen scenarios read, then runs each
scenario's throttled Spark query for `--seconds` (default 60) with a processing-time trigger equal
to the period (1 s). Quotas are topic quotas, per window and partition:

- `batch`: batch mode on a backlog batched 10 messages per entry, quota 50: one entry counts as one
  message, so delivered *entries* per window and partition are compared with 50;
- `precise`: precise mode on the same backlog, quota 500: delivered *messages* vs 500 (the planner
  counts the messages of the entries it admits from their metadata);
- `precise-variable`: precise mode on entries of 8..12 messages: the planner looks up the first 16
  entries a window admits and samples the rest, so some spread remains past the 16th entry;
- `precise-rebatched`: precise mode on a topic whose batching changed (10 per entry, unbatched, 10);
- `precise-idle-gaps`: precise mode, quota 500, tailing a live 2-partition topic written in three
  bursts of 0.2 x `--seconds` at 1.6 x the quota (batched 10, then unbatched, then batched by time),
  each started 5 s after the reader caught up with the last (idle windows): windows that still had
  backlog after them (saturated) are judged within 5 %, and the first windows after an idle
  stretch must not exceed the quota (no saved-up quota);
- `large-entries-bytes` (batch mode, 12,500 bytes) and `large-entries-precise` (precise mode, 100
  messages): 4 partitions of entries of 400 messages of 100 B (~43.6 KB stored), larger than one
  window's quota: only the long run is judged (within 1 %), in stored bytes (see
  accuracy/stored_bytes.py) or messages;
- `shared-redis` (batch, 50 entries) and `shared-redis-precise` (precise, 500 messages): this
  session and a second Spark application (a subprocess) read one topic under one topic quota kept
  in a real redis-server (quotaStore): both together per window, over the windows where both ran.

Each micro-batch is attributed to the quota window it was planned in: from the query progress in
the four older scenarios' tables, from the source's own bucket charges (polled while the query
runs) elsewhere. Every scenario prints its per-window table and summary, its long-run error
(delivered over the measured span vs quota x the windows in it: raw, without the debt at the
span's ends, and against the quota of the windows in which a trigger planned) and its target; a
plot goes to bench/out/throttle_accuracy.png. Exits 1 when a target is missed.

    .venv/bin/python bench/throttle_accuracy.py [--seconds 60] [--scenarios NAME ...]

The pieces live in bench/accuracy/ (see its __init__).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pulsar

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

# Topic management (creating the benchmark's topics) is test support code, not part of the source;
# so is the tests' redis-server launcher the shared-redis scenarios use.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from accuracy.backlogs import entries_in, entries_needed, produce_backlog, quiet_logger  # noqa: E402
from accuracy.drain import run_drain  # noqa: E402
from accuracy.idle_gaps import run_idle_gaps  # noqa: E402
from accuracy.plot import plot  # noqa: E402
from accuracy.query import session  # noqa: E402
from accuracy.report import report  # noqa: E402
from accuracy.result import Bench, Result  # noqa: E402
from accuracy.scenarios import SCENARIOS, Scenario  # noqa: E402
from accuracy.shared import run_shared  # noqa: E402
from accuracy.targets import final_order, verdict  # noqa: E402
from topic_admin import TopicAdmin  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
RUNNERS: dict[str, Callable[[Bench, Scenario, str], Result]] = {
    "drain": run_drain, "idle-gaps": run_idle_gaps, "shared": run_shared}


def make_topics(admin: TopicAdmin, client: pulsar.Client, scenarios: list[Scenario], seconds: float) -> dict[tuple[str, int], str]:
    """One topic per backlog (and partition count) the scenarios read; live topics start empty, one per scenario."""
    topics: dict[tuple[str, int], str] = {}
    for kind, partitions in sorted({(s.data, s.partitions) for s in scenarios if s.data != "live"}):
        topic = TopicName.parse(f"bench-accuracy-{kind}-{time.time_ns()}")
        admin.create_partitioned_topic(topic, partitions)
        t0 = time.time()
        counts = produce_backlog(client, str(topic), partitions, entries_needed(kind, seconds), kind)
        entries_made = sum(entries_in(admin, topic).values())
        print(f"backlog {kind}: {entries_made} entries, {sum(counts.values())} messages "
              f"({sum(counts.values()) / entries_made:.2f} per entry), produced in {time.time() - t0:.1f} s", file=sys.stderr)
        topics[(kind, partitions)] = str(topic)
    return topics


def run_all(scenarios: list[Scenario], seconds: float, work: Path) -> tuple[list[Result], list[str]]:
    results: list[Result] = []
    failed: list[str] = []
    print(f"starting a local Pulsar broker in {work} ...", file=sys.stderr)
    with LocalBroker(data_dir=work / "broker", max_entries_per_ledger=500) as broker:
        admin = TopicAdmin(broker.admin_url)
        client = pulsar.Client(broker.service_url, logger=quiet_logger())
        try:
            topics = make_topics(admin, client, scenarios, seconds)
            spark = session("throttle-accuracy")
            bench = Bench(spark, broker.service_url, broker.admin_url, admin, client, work, seconds)
            try:
                for s in scenarios:
                    topic = topics.get((s.data, s.partitions))
                    if topic is None:  # a live topic: empty, written by the scenario itself
                        name = TopicName.parse(f"bench-accuracy-{s.name}-{time.time_ns()}")
                        admin.create_partitioned_topic(name, s.partitions)
                        topic = str(name)
                    print(f"running {s.name} ...", file=sys.stderr)
                    try:
                        results.append(RUNNERS[s.runner](bench, s, topic))
                    except Exception as e:  # one broken scenario must not cost the others' figures
                        print(f"scenario {s.name} failed: {e!r}", file=sys.stderr)
                        failed.append(s.name)
            finally:
                spark.stop()
        finally:
            client.close()
            admin.close()
    return results, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each throttled run")
    parser.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS), help="which to run")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    work = Path(tempfile.mkdtemp(prefix="bench-accuracy-"))
    results, failed = run_all([SCENARIOS[name] for name in dict.fromkeys(args.scenarios)], args.seconds, work)

    verdicts: dict[str, tuple[bool | None, str]] = {}
    for r in results:
        summary = report(r)
        verdicts[r.scenario.name] = verdict(r, summary)
        if r.scenario.name not in ("batch", "precise", "precise-variable", "precise-rebatched"):
            print(verdicts[r.scenario.name][1])  # the older scenarios print theirs at the end only, as always
    if results:
        path = OUT / "throttle_accuracy.png"
        plot(results, path)
        print(f"\nplot: {path}")
    for name in final_order(list(verdicts)):
        print(verdicts[name][1])
    for name in failed:
        print(f"target: {name}: NOT met (the scenario failed; see the error above)")
    return 0 if not failed and all(met is not False for met, _ in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
