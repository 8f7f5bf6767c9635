"""Copy Pulsar topics into Parquet under a quota: a spark-submit job.

    spark-submit --master 'local[2]' examples/throttled_ingest.py \\
        --service-url pulsar://localhost:6650 --admin-url http://localhost:8080 \\
        --topic persistent://public/default/orders --starting-offsets earliest \\
        --mode batch --topic-rate-msgs 100 --trigger availableNow \\
        --checkpoint /data/chk/orders --output /data/parquet/orders

--trigger availableNow reads the backlog under the quotas and stops once caught up: Spark's
Trigger.AvailableNow on PySpark 4.2+, and on 4.0/4.1 (which give Python sources no admission
control) a processing-time trigger stopped when its progress says nothing is left
(pulsar_throttled_source.catch_up). The checkpoint holds the query's progress: run the same
command again and it continues where it stopped, writing each message once (Spark's file sink commits every micro-batch
atomically through its _spark_metadata log). Any source option that has no flag here can
be passed as --option NAME=VALUE; docs/reference/options.md lists them all.
"""

from __future__ import annotations

import argparse
import re
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="throttled_ingest.py", description=__doc__.split("\n\n")[0],
                                epilog="Quotas are per period (--period seconds); topic and subscription quotas apply to each partition.")
    p.add_argument("--service-url", required=True, help="Pulsar service URL, e.g. pulsar://host:6650 (pulsar+ssl://host:6651 with TLS)")
    p.add_argument("--admin-url", required=True, help="Pulsar admin URL, e.g. http://host:8080 (https://host:8443 with TLS)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--topic", help="one topic, partitioned or not")
    what.add_argument("--topics", help="comma-separated topics")
    what.add_argument("--topics-pattern", help="regex over one namespace's topics, e.g. persistent://public/default/orders-.*")
    p.add_argument("--subscription", help="subscription name the query reads as (subscription quotas are keyed on it)")
    p.add_argument("--starting-offsets", default="earliest", help="earliest, latest or a JSON position map (default %(default)s)")

    q = p.add_argument_group("quotas (-1 or absent: no limit at that level)")
    q.add_argument("--mode", choices=("batch", "precise"), default="precise",
                   help="batch: one entry counts as one message; precise: messages estimated per entry (default %(default)s)")
    q.add_argument("--period", type=int, default=1, help="quota window in seconds (default %(default)s)")
    for flag, option, meaning in QUOTA_FLAGS:
        q.add_argument(flag, type=int, metavar="N", dest=option, help=meaning)
    q.add_argument("--relative-to-publish-rate", action="store_true", help="add each quota to the partition's publish rate (PIP-52)")
    q.add_argument("--quota-source", choices=("options", "broker", "both"), default="options",
                   help="options (the flags above), broker (the broker's dispatch-rate policies) or both (default %(default)s)")
    q.add_argument("--max-entries-per-trigger", type=int, metavar="N", help="cap on entries per micro-batch, on top of quotas")

    o = p.add_argument_group("output")
    o.add_argument("--output", required=True, help="Parquet output directory")
    o.add_argument("--checkpoint", required=True, help="checkpoint directory (one per query; keep it to resume)")
    o.add_argument("--trigger", default="availableNow", type=parse_trigger,
                   help="availableNow (read what is there, throttled, then stop: on PySpark 4.0/4.1 a processing-time "
                        "trigger stopped once caught up), processingTime=<interval> "
                        "(e.g. processingTime='10 seconds', runs until stopped) or once (one unthrottled batch) "
                        "(default %(default)s)")
    o.add_argument("--timeout", type=float,
                   help="stop the query after this many seconds, caught up or not (default: no limit; a processingTime query runs until killed)")
    o.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", type=parse_option,
                   help="any other source option, repeatable (e.g. --option failOnDataLoss=false)")
    return p


# flag, source option, help
QUOTA_FLAGS = (
    ("--topic-rate-msgs", "dispatchThrottlingRatePerTopicInMsg", "topic quota: messages per period per partition"),
    ("--topic-rate-bytes", "dispatchThrottlingRatePerTopicInByte", "topic quota: bytes per period per partition"),
    ("--subscription-rate-msgs", "dispatchThrottlingRatePerSubscriptionInMsg", "subscription quota: messages per period per partition"),
    ("--subscription-rate-bytes", "dispatchThrottlingRatePerSubscriptionInByte", "subscription quota: bytes per period per partition"),
    ("--source-rate-msgs", "dispatchThrottlingRateInMsg", "source-wide quota: messages per period for the whole query"),
    ("--source-rate-bytes", "dispatchThrottlingRateInByte", "source-wide quota: bytes per period for the whole query"),
)


def parse_trigger(text: str) -> dict:
    """'availableNow' | 'once' | 'processingTime=<interval>' -> keyword arguments of DataStreamWriter.trigger."""
    t = text.strip()
    if t.lower() in ("availablenow", "available-now"):
        return {"availableNow": True}
    if t.lower() == "once":
        return {"once": True}
    m = re.fullmatch(r"(?i)processingtime\s*=\s*(.+)", t)
    if m:
        interval = m.group(1).strip()
        if re.fullmatch(r"\d+", interval):
            interval += " seconds"
        return {"processingTime": interval}
    raise argparse.ArgumentTypeError(f"'{text}' is not a trigger; expected availableNow, once or processingTime=<interval>")


def parse_option(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=VALUE")
    return name.strip(), value


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The source options the flags stand for (strings, as Spark passes them on)."""
    opts = {"service.url": args.service_url, "admin.url": args.admin_url, "startingOffsets": args.starting_offsets,
            "throttlingMode": args.mode, "ratePeriodInSecond": str(args.period), "quotaSource": args.quota_source}
    for key in ("topic", "topics", "topics_pattern"):
        if getattr(args, key):
            opts["topicsPattern" if key == "topics_pattern" else key] = getattr(args, key)
    if args.subscription:
        opts["subscription"] = args.subscription
    for _flag, option, _help in QUOTA_FLAGS:
        if getattr(args, option) is not None:
            opts[option] = str(getattr(args, option))
    if args.relative_to_publish_rate:
        opts["relativeToPublishRate"] = "true"
    if args.max_entries_per_trigger:
        opts["maxEntriesPerTrigger"] = str(args.max_entries_per_trigger)
    opts.update(dict(args.option))
    return opts


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pyspark.sql import SparkSession

    from pulsar_throttled_source import PulsarThrottledDataSource

    spark = SparkSession.builder.appName("pulsar-throttled-ingest").getOrCreate()
    try:
        register(spark, PulsarThrottledDataSource)
        reader = spark.readStream.format("pulsar-throttled")
        for key, value in source_options(args).items():
            reader = reader.option(key, value)
        writer = (reader.load().writeStream.format("parquet").option("path", args.output)
                  .option("checkpointLocation", args.checkpoint).queryName("pulsar_throttled_ingest"))
        print(f"Ingesting into {args.output} (checkpoint {args.checkpoint}, trigger {args.trigger})", flush=True)
        if args.trigger.get("availableNow"):
            rows, batches = catch_up_backlog(writer, args.timeout)
        else:
            rows, batches = run_until_stopped(writer.trigger(**args.trigger).start(), args.timeout)
        print(f"Done: {rows} messages in {batches} micro-batches written to {args.output}", flush=True)
    finally:
        spark.stop()
    return 0


def register(spark, source) -> None:
    """An installed package registers "pulsar-throttled" by itself; registering explicitly also covers
    editable installs and notebook-scoped environments, where the discovery misses it. PySpark 4.0
    refuses to register a name twice: there it is already registered."""
    try:
        spark.dataSource.register(source)
    except Exception as error:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(error):
            raise


def catch_up_backlog(writer, timeout: float | None) -> tuple[int, int]:
    """Trigger.AvailableNow where PySpark has admission control for Python sources (4.2+), else a
    processing-time trigger stopped once caught up: the same call on every Spark line."""
    from pulsar_throttled_source.catch_up import CatchUpTimeout, catch_up

    try:
        result = catch_up(writer, timeout_s=timeout)
    except CatchUpTimeout as stopped:
        print(f"Stopped after --timeout {timeout:g} s, not caught up.", flush=True)
        result = stopped.result
    else:
        print(f"Caught up ({result.trigger} trigger) in {result.seconds:.1f} s.", flush=True)
    return result.rows, result.batches


def run_until_stopped(query, timeout: float | None) -> tuple[int, int]:
    try:
        finished = query.awaitTermination(timeout) if timeout else query.awaitTermination()
    finally:
        if query.isActive:
            query.stop()
    if finished is False:
        print(f"Stopped after --timeout {timeout:g} s.", flush=True)
    progress = query.recentProgress
    return sum(p["numInputRows"] for p in progress), len(progress)


if __name__ == "__main__":
    sys.exit(main())
