"""Pulsar to a transform to Pulsar, throttled on both sides: a spark-submit job.

    spark-submit --master 'local[2]' examples/enrich_topic.py \\
        --service-url pulsar://localhost:6650 --admin-url http://localhost:8080 \\
        --source persistent://public/default/orders --target persistent://public/default/orders-upper \\
        --read-rate-msgs 1000 --write-rate-msgs 500 --delivery-guarantee effectivelyOnce \\
        --checkpoint /data/chk/orders-upper --trigger availableNow

It reads `--source` under a read quota (--read-rate-msgs: dispatchThrottlingRatePerTopicInMsg, per partition and
period), upper-cases each payload and tags it with a property, and writes the result to `--target` under a write
quota (--write-rate-msgs: publishThrottlingRateInMsg, per partition and period). The columns are the source's own,
so key, properties, event time and partition pass through unchanged (the sink ignores the read-only ones).

--delivery-guarantee effectivelyOnce (the target's namespace or topic must deduplicate: pulsar-admin namespaces
set-deduplication --enable ...) writes each message once across task retries and restarts from the checkpoint; the
map keeps each task's row order, which is what it needs. --trigger availableNow drains the backlog and stops (on
PySpark 4.0/4.1 a processing-time trigger stopped once caught up); processingTime=<interval> runs until stopped. Run
the same command again and it continues where the checkpoint stopped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its helpers: throttled_ingest.py beside it (--py-files in cluster mode)
from throttled_ingest import catch_up_backlog, parse_option, parse_trigger, register, run_until_stopped  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="enrich_topic.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--service-url", required=True, help="Pulsar service URL, e.g. pulsar://host:6650")
    p.add_argument("--admin-url", required=True, help="Pulsar admin URL, e.g. http://host:8080")
    p.add_argument("--source", required=True, help="the topic read")
    p.add_argument("--target", required=True, help="the topic written (it must exist, partitioned or not)")
    p.add_argument("--starting-offsets", default="earliest", help="earliest or latest (default %(default)s)")
    p.add_argument("--period", type=int, default=1, help="quota window in seconds, both sides (default %(default)s)")
    p.add_argument("--read-rate-msgs", type=int, metavar="N", help="read quota: messages per period per source partition")
    p.add_argument("--write-rate-msgs", type=int, metavar="N", help="write quota: messages per period per target partition")
    p.add_argument("--write-rate-bytes", type=int, metavar="N", help="write quota: bytes per period per target partition")
    p.add_argument("--delivery-guarantee", choices=("atLeastOnce", "effectivelyOnce"), default="atLeastOnce")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (one per query; keep it to resume)")
    p.add_argument("--trigger", default="availableNow", type=parse_trigger,
                   help="availableNow (drain, then stop) or processingTime=<interval> (default %(default)s)")
    p.add_argument("--timeout", type=float, help="stop after this many seconds, caught up or not")
    p.add_argument("--read-option", action="append", default=[], metavar="NAME=VALUE", type=parse_option,
                   help="any other source option, repeatable")
    p.add_argument("--write-option", action="append", default=[], metavar="NAME=VALUE", type=parse_option,
                   help="any other sink option, repeatable (e.g. pulsar.producer.compressionType=LZ4)")
    return p


def read_options(args: argparse.Namespace) -> dict[str, str]:
    opts = {"service.url": args.service_url, "admin.url": args.admin_url, "topic": args.source,
            "startingOffsets": args.starting_offsets, "ratePeriodInSecond": str(args.period)}
    if args.read_rate_msgs is not None:
        opts["dispatchThrottlingRatePerTopicInMsg"] = str(args.read_rate_msgs)
    return opts | dict(args.read_option)


def write_options(args: argparse.Namespace) -> dict[str, str]:
    opts = {"service.url": args.service_url, "admin.url": args.admin_url, "topic": args.target,
            "ratePeriodInSecond": str(args.period), "deliveryGuarantee": args.delivery_guarantee}
    if args.write_rate_msgs is not None:
        opts["publishThrottlingRateInMsg"] = str(args.write_rate_msgs)
    if args.write_rate_bytes is not None:
        opts["publishThrottlingRateInByte"] = str(args.write_rate_bytes)
    return opts | dict(args.write_option)


def transform(df):  # noqa: ANN001, ANN201 (a DataFrame in, a DataFrame out)
    """The enrichment: the payload upper-cased, a property saying so; every other column as read."""
    from pyspark.sql import functions as F

    tag = F.create_map(F.lit("enrichedBy"), F.lit("enrich_topic"))
    return (df.withColumn("value", F.upper(F.col("value").cast("string")).cast("binary"))
              .withColumn("properties", F.map_concat(F.coalesce("properties", F.create_map().cast("map<string,string>")), tag)))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pyspark.sql import SparkSession

    from pulsar_throttled_source import PulsarThrottledDataSource

    spark = SparkSession.builder.appName("pulsar-throttled-enrich").getOrCreate()
    try:
        register(spark, PulsarThrottledDataSource)
        source = spark.readStream.format("pulsar-throttled").options(**read_options(args)).load()
        writer = (transform(source).writeStream.format("pulsar-throttled").options(**write_options(args))
                  .option("checkpointLocation", args.checkpoint).queryName("pulsar_throttled_enrich"))
        print(f"Enriching {args.source} into {args.target} (checkpoint {args.checkpoint}, trigger {args.trigger})", flush=True)
        if args.trigger.get("availableNow"):
            rows, batches = catch_up_backlog(writer, args.timeout)
        else:
            rows, batches = run_until_stopped(writer.trigger(**args.trigger).start(), args.timeout)
        print(f"Done: {rows} messages in {batches} micro-batches written to {args.target}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
