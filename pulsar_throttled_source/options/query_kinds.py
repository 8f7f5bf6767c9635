"""Which options each kind of query takes, checked in one place per query kind and Spark line (as Spark's
KafkaSourceProvider does): a stream (spark.readStream) and a batch query (spark.read) refuse what only the
other uses, and PySpark 4.0/4.1, without admission control, refuse what they cannot express. Each check names
the option and what to do instead."""

from __future__ import annotations

from .source_options import SourceOptions


def check_spark_line(o: SourceOptions, admission_control: bool) -> None:
    """What a Spark line without admission control (PySpark 4.0/4.1) cannot express: checked at load()."""
    if o.min_entries_per_trigger is not None and not admission_control:
        import pyspark

        # Held back here, Trigger.AvailableNow and Trigger.Once (one latestOffset() call, then stop, and
        # indistinguishable from a processing-time trigger) would read nothing at all.
        raise ValueError(f"Option 'minEntriesPerTrigger' needs PySpark 4.2 or newer: PySpark {pyspark.__version__} has no "
                         "admission control for Python streaming sources, so the source cannot tell a "
                         "processing-time trigger from Trigger.AvailableNow or Trigger.Once, which would read "
                         "nothing while under the floor. Remove minEntriesPerTrigger and maxTriggerDelay here.")


def check_stream_options(o: SourceOptions, admission_control: bool) -> None:
    """A stream on a Spark line with or without admission control."""
    check_spark_line(o, admission_control)
    if o.end.given:
        raise ValueError(f"Option '{o.end.option}' applies to batch queries (spark.read) only; a stream reads on as "
                         "messages arrive. Remove it, or read with spark.read to stop at the given positions.")
    inside = list(o.start.inside_entries())
    if inside:
        # A stream's offsets (its batches' ends, a restart's start) are entries: a start inside one is not kept.
        raise ValueError(f"Option 'startingOffsets' for partition {inside[0]}: a \"batchIndex\" (a position inside an "
                         "entry) applies to batch queries (spark.read) only; a stream starts at an entry: remove "
                         "batchIndex to start at the entry's first message.")


def check_batch_options(o: SourceOptions) -> None:
    """A batch query refuses what only throttles a stream, naming it."""
    if o.max_tasks_per_trigger > 0:
        raise ValueError("Option 'maxTasksPerTrigger' applies to streams (spark.readStream) only: a batch query (spark.read) "
                         "reads each partition (or each maxEntriesPerTask piece) in a task of its own. Remove it.")
    throttling = "quotas (dispatchThrottlingRate*, quotaSource=broker)" if o.throttled else ""
    trigger = "maxEntriesPerTrigger" if o.max_entries_per_trigger is not None else ""
    messages = "maxMessagesPerTrigger" if o.max_messages_per_trigger is not None else ""
    floor = "minEntriesPerTrigger" if o.min_entries_per_trigger is not None else ""
    given = [name for name in (throttling, trigger, messages, floor) if name]
    if given:
        raise ValueError(f"Options {' and '.join(given)} throttle a stream's micro-batches; a batch query (spark.read) reads "
                         "its whole range in one batch. Remove them, or read with spark.readStream and "
                         "trigger(availableNow=True) for a throttled backfill that stops at the end.")
