"""The size of the source's query progress report at 1,000 partitions (issue 39): bytes per progress event,
with and without progressPerPartition, on both places Spark shows it.

Drives the real readers (AdmissionControlStreamReader for 4.2+, LatestOffsetStreamReader for 4.0/4.1) as
Spark does, over a fake catalog of one topic with --partitions partitions (each with a backlog beyond a
topic, subscription and source-wide quota, so every level takes part and holds partitions back) and publish
times known for every partition: the broker is faked (no Spark, no broker), since what is measured is the
serialised report. For each trigger it prints, in compact JSON as Spark's JVM writes progress (event log,
Scala listeners; PySpark's `progress.json` adds a space after each separator):

- report: the source's report alone (planning/progress.py);
- in event: the bytes the report adds to one progress event's source entry: on 4.2+ once (latestOffset);
  on 4.0/4.1 three times (endOffset and latestOffset carry this plan's, startOffset the last one's);
- baseline: startOffset + endOffset without any report, which every event holds anyway (one position per
  partition), and the report's bytes in the event against it.
Each reader plans triggers a second apart first, with per-partition detail until every partition's time lag is known.

    .venv/bin/python bench/progress_size.py [--partitions 1000]   # ~1 min
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("PULSAR_THROTTLED_LOG_LEVEL", "WARNING")  # no planner line per trigger
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit"))
import logging  # noqa: E402

from builders import layout, on_catalog, unlimited  # noqa: E402
from fakes import FakeCatalog, FakeClock  # noqa: E402

from pulsar_throttled_source.offsets import PROGRESS  # noqa: E402
from pulsar_throttled_source.options import parse_options  # noqa: E402
from pulsar_throttled_source.stream_spark40 import LatestOffsetStreamReader  # noqa: E402
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader  # noqa: E402

TOPIC = "persistent://public/default/orders"
BACKLOG = 200  # entries per partition: more than the warm-up's triggers admit at the quotas below
NOW = 1_800_000_000.25
# Triggers planned first: publish times are looked up 32 partitions a plan (metadata/publish_times.py), so with
# per-partition detail every partition's own time lag is known after 32; the summary needs 3 (the first
# batch's end also carries where the query started, which later offsets do not).
WARM_UP = {True: 34, False: 3}


def compact(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def make_reader(kind: type, partitions: int, per_partition: bool, work: Path, clock: FakeClock):
    names = [f"{TOPIC}-partition-{i}" for i in range(partitions)]
    catalog = FakeCatalog(*[layout(name, [(10_000 + i, BACKLOG // 2), (20_000 + i, BACKLOG // 2)]) for i, name in enumerate(names)])
    raw = {"service.url": "pulsar://fake:6650", "admin.url": "http://fake:8080",  # the fake catalog answers: never reached
           "topic": TOPIC, "startingOffsets": "earliest", "quotaStatePath": str(work / f"{kind.__name__}-{per_partition}.sqlite"),
           "throttlingMode": "batch",  # entry quotas: the engine needs no entry lookups (none are faked)
           "dispatchThrottlingRatePerTopicInMsg": "5",  # entries per partition and window
           "dispatchThrottlingRatePerSubscriptionInMsg": "8",
           "dispatchThrottlingRateInMsg": str(4 * partitions),  # source-wide, the lowest: it holds partitions back
           "progressPerPartition": str(per_partition).lower()}
    reader = kind(parse_options({k.lower(): v for k, v in raw.items()}), clock)
    # Every partition's entries were published 30 s before the first trigger: the time lag is known for all.
    published = datetime.fromtimestamp(NOW - 30, tz=timezone.utc).isoformat()  # as the admin API's header gives it
    return on_catalog(reader, catalog, dict.fromkeys(names, published)), catalog


def without_report(offset: dict) -> dict:
    return {k: v for k, v in offset.items() if k != PROGRESS}


def measure(kind: type, partitions: int, per_partition: bool, work: Path) -> dict:
    clock = FakeClock(NOW)
    reader, catalog = make_reader(kind, partitions, per_partition, work, clock)
    spark40 = kind is LatestOffsetStreamReader
    start = reader.initialOffset()
    ends = []
    for _ in range(WARM_UP[per_partition]):  # a trigger a second, until every partition's time lag is known
        ends.append(reader.latestOffset() if spark40 else reader.latestOffset(ends[-1] if ends else start, unlimited()))
        clock.now += 1
    previous, end = ends[-2:]
    report = end[PROGRESS] if spark40 else reader.reportLatestOffset()
    assert report["partitions"] == partitions and report["partitionsBehind"] == partitions, report
    assert report["throttle"]["heldBy"] == "sourceWide", report["throttle"]
    if per_partition:
        assert all(p["secondsBehind"] is not None for p in report["perPartition"].values()), "time lag not known for all yet"
    copies = ([previous[PROGRESS], end[PROGRESS], end[PROGRESS]] if spark40 else [report])
    baseline = compact(without_report(previous)) + compact(without_report(end))

    reader.stop()
    return {"report": compact(report), "in_event": sum(compact(c) for c in copies), "copies": len(copies),
            "baseline": baseline}


def human(n: float) -> str:
    return f"{n:,.0f} B" if n < 10_000 else f"{n / 1000:,.1f} KB"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=1000)
    args = p.parse_args(argv)
    logging.getLogger("pulsar_throttled_source.stream_spark40").setLevel(logging.ERROR)  # its AvailableNow WARN
    print(f"Query progress report, one topic of {args.partitions:,} partitions, every partition behind and held back "
          "(compact JSON bytes)")
    print(f"{'Spark line':<10} {'progressPerPartition':<20} {'report':>10} {'in event':>16} {'baseline: offsets':>18} "
          f"{'in event/offsets':>16}")
    with tempfile.TemporaryDirectory(prefix="progress-size-") as work:
        for kind, line in ((AdmissionControlStreamReader, "4.2+"), (LatestOffsetStreamReader, "4.0/4.1")):
            for per_partition in (False, True):
                m = measure(kind, args.partitions, per_partition, Path(work))
                print(f"{line:<10} {str(per_partition).lower():<20} {human(m['report']):>10} "
                      f"{human(m['in_event']) + ' (' + str(m['copies']) + 'x)':>16} {human(m['baseline']):>18} "
                      f"{m['in_event'] / m['baseline']:>16.3f}", flush=True)


if __name__ == "__main__":
    main()
