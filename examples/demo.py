"""The throttled demo behind `make demo`.

Starts a real Pulsar broker (LocalBroker, in a temp dir), fills a 4-partition topic with a
backlog, and reads it with a throttled streaming query: batch mode, a topic quota of
--quota entries per second on each partition, a 1-second processing-time trigger. One line
per micro-batch shows what was delivered against the quota (the rest of the output, Spark's and the source's
planner log, goes to out/demo.log, named by one line); at the end the package's plots helper
(pulsar_throttled_source.plots) draws the query's progress (rows per micro-batch against the quota, each
quota level's share of its window, lag in entries and seconds) into out/demo-throttling.png.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python examples/demo.py [--quota 25] [--duration 90]

Everything it starts (query, Spark, broker) is stopped in `finally`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pulsar
import requests

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.query_progress import source_report

TOPIC = "persistent://public/default/demo-orders"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=40_000, help="backlog size in messages (default 40000)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the demo topic (default 4)")
    p.add_argument("--per-entry", type=int, default=10, help="messages the producer batches into one entry (default 10)")
    p.add_argument("--payload-bytes", type=int, default=100, help="bytes per message (default 100)")
    p.add_argument("--quota", type=int, default=25, help="topic quota: entries per second per partition (default 25)")
    p.add_argument("--duration", type=float, default=90,
                   help="stop the query this many seconds after its first micro-batch if the backlog is not read by then (default 90)")
    p.add_argument("--out", default="out/demo-throttling.png", help="where to save the plot")
    p.add_argument("--log", default="out/demo.log", help="where Spark's and the source's log lines go (default %(default)s)")
    return p.parse_args(argv)


def produce_backlog(service_url: str, admin_url: str, args: argparse.Namespace) -> None:
    """Create the partitioned topic and send the backlog, `per_entry` messages per entry."""
    name = TOPIC.removeprefix("persistent://")
    requests.put(f"{admin_url}/admin/v2/persistent/{name}/partitions", json=args.partitions, timeout=30).raise_for_status()
    quiet = logging.getLogger("demo.pulsar-client")
    quiet.setLevel(logging.WARNING)
    client = pulsar.Client(service_url, logger=quiet)
    try:
        counter = itertools.count()
        producer = client.create_producer(
            TOPIC, batching_enabled=True, batching_max_messages=args.per_entry, batching_max_publish_delay_ms=50,
            block_if_queue_full=True, message_router=lambda msg, n: next(counter) % n)  # even spread
        failures: list[object] = []

        def done(result: pulsar.Result, _msg_id: object) -> None:
            if result != pulsar.Result.Ok:
                failures.append(result)

        for i in range(args.messages):
            body = f"order-{i:06d} ".encode().ljust(args.payload_bytes, b".")
            producer.send_async(body, done)
        producer.flush()
        producer.close()
        if failures:
            raise RuntimeError(f"{len(failures)} sends failed, e.g. {failures[0]}")
    finally:
        client.close()


def entry_of(message_id: bytes) -> tuple[int, int, int]:
    """(partition, ledger, entry) of a serialized message id: the entry that carried it."""
    mid = pulsar.MessageId.deserialize(bytes(message_id))
    return mid.partition(), mid.ledger_id(), mid.entry_id()


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def save_plot(progress: list[str], args: argparse.Namespace) -> Path:
    """The query's progress drawn by the package's plots helper (rows per micro-batch against the topic
    quota in rows, each level's share of its window, lag in entries and seconds), saved as a PNG."""
    from pulsar_throttled_source.plots import plot_progress

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Batch mode counts entries: the quota admits quota x partitions entries of per_entry messages a window.
    quota_rows = args.quota * args.partitions * args.per_entry
    fig = plot_progress(progress, quotas={f"topic quota: {args.partitions} partitions x {args.quota} entries x "
                                          f"{args.per_entry} msgs": quota_rows},
                        title=f"pulsar-throttled: {args.messages:,} messages ({args.per_entry} per entry) read at a "
                              f"quota (batch mode, trigger 1 s)")
    fig.savefig(out, dpi=110)
    return out


@contextlib.contextmanager
def stderr_to(log: Path) -> Iterator[None]:
    """Everything written to stderr meanwhile, by this process and by those it starts (Spark's JVM, and through it
    the planner process whose INFO lines would bury the table), goes to `log`; the table stays on stdout."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    kept = os.dup(2)
    with open(log, "wb") as f:  # this run's lines only
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(kept, 2)
        os.close(kept)


def run(args: argparse.Namespace, work: Path) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.monotonic()
    with LocalBroker(data_dir=work / "broker") as broker:
        print(f"Broker up at {broker.service_url} / {broker.admin_url} ({time.monotonic() - started:.0f} s)", flush=True)
        produce_backlog(broker.service_url, broker.admin_url, args)
        entries_total = args.partitions * -(-args.messages // args.partitions // args.per_entry)
        print(f"Produced {args.messages:,} messages of {args.payload_bytes} bytes on {TOPIC} "
              f"({args.partitions} partitions, ~{entries_total:,} entries)", flush=True)

        log = Path(args.log)
        print(f"Spark's and the source's log lines: {log.resolve()}", flush=True)
        with stderr_to(log):
            rows, progress = run_query(args, work, broker)
    if not rows:
        raise SystemExit(f"No micro-batch completed; see {log.resolve()}.")
    quota_per_period = args.quota * args.partitions
    png = save_plot(progress, args)
    over = [r["batch"] for r in rows if r["entries"] > quota_per_period]
    print(f"\n{sum(r['rows'] for r in rows):,} messages in {sum(r['entries'] for r in rows):,} entries over "
          f"{len(rows)} micro-batches; max per micro-batch {max(r['entries'] for r in rows)} entries "
          f"(quota {quota_per_period}); over quota: {over or 'none'}.")
    print(f"Total run time {time.monotonic() - started:.0f} s. Plot: {png.resolve()}")


def run_query(args: argparse.Namespace, work: Path, broker: LocalBroker) -> tuple[list[dict], list[str]]:
    """The throttled query on the demo topic: the table's rows (one per micro-batch) and the query's progress."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").appName("pulsar-throttled-demo")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.numRecentProgressUpdates", "1000").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")  # keep the table readable ("batch is falling behind" etc.)
    from pulsar_throttled_source import PulsarThrottledDataSource

    spark.dataSource.register(PulsarThrottledDataSource)  # also works from an editable install run elsewhere
    query = None
    progress: list[str] = []
    try:
        df = (spark.readStream.format("pulsar-throttled")
              .option("service.url", broker.service_url).option("admin.url", broker.admin_url)
              .option("topic", TOPIC).option("startingOffsets", "earliest")
              .option("throttlingMode", "batch")
              .option("dispatchThrottlingRatePerTopicInMsg", str(args.quota))
              .option("quotaStatePath", str(work / "quota.sqlite"))
              .load())
        counted: dict[int, tuple[int, int, int]] = {}

        def count_batch(batch, batch_id: int) -> None:
            rows = batch.select("messageId", F.length("value").alias("n")).collect()
            entries = {entry_of(r.messageId) for r in rows}
            counted[batch_id] = (len(rows), len(entries), sum(r.n for r in rows))

        query = (df.writeStream.foreachBatch(count_batch).trigger(processingTime="1 second")
                 .option("checkpointLocation", str(work / "checkpoint")).start())
        quota_per_period = args.quota * args.partitions
        print(f"Query started: topic quota {args.quota} entries/s per partition = {quota_per_period} entries "
              f"per 1 s window for the topic.", flush=True)
        print(f"{'batch':>5} {'t(s)':>6} {'rows':>6} {'entries':>7} {'bytes':>9} {'quota':>6} {'backlog':>8}", flush=True)
        rows = poll_progress(query, counted, quota_per_period, args.duration)
    finally:
        if query is not None:
            progress = [p.json for p in query.recentProgress]  # JSON: readable after Spark stops
            query.stop()
        spark.stop()
    return rows, progress


def poll_progress(query, counted: dict, quota_per_period: int, duration: float) -> list[dict]:
    """Print one line per finished micro-batch until the backlog is read or time is up.

    The time limit counts from the first micro-batch, which also starts Spark's Python workers.
    """
    rows: list[dict] = []
    first_ts: float | None = None
    deadline = time.monotonic() + duration + 120  # generous until the first micro-batch is done
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"The query failed: {query.exception()}")
        for p in query.recentProgress:
            batch_id = p["batchId"]
            if (rows and batch_id <= rows[-1]["batch"]) or batch_id not in counted or not p["sources"]:
                continue
            report = source_report(p) or {}
            backlog = report.get("entriesBehindLatest", 0)
            ts = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            if first_ts is None:
                first_ts, deadline = ts, time.monotonic() + duration
            n_rows, entries, nbytes = counted[batch_id]
            rows.append({"batch": batch_id, "t": ts - first_ts, "rows": n_rows, "entries": entries,
                         "bytes": nbytes, "backlog": backlog})
            print(f"{batch_id:>5} {ts - first_ts:>6.1f} {n_rows:>6} {entries:>7} {human_bytes(nbytes):>9} "
                  f"{quota_per_period:>6} {backlog:>8}", flush=True)
        if rows and rows[-1]["backlog"] == 0:
            break
        time.sleep(0.5)
    return rows


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pulsar-throttled-demo-") as work:
        run(args, Path(work))


if __name__ == "__main__":
    main()
