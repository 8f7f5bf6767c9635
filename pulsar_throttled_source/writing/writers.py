"""The Spark-facing writers: a batch write (df.write) and a stream's (df.writeStream). They answer Spark's calls and
delegate: write() on the executors to write_task,
commit/abort on the driver only log what was written (the messages are persisted when write() returns;
deliveryGuarantee atLeastOnce: a failed and retried task, or a micro-batch run again after a restart,
sends its rows again).

Each is an Arrow writer where the running PySpark has one (DataSourceArrowWriter: every supported line;
DataSourceStreamArrowWriter: 4.1+), so write() gets the Arrow record batches PySpark reads from Spark, and else
a row writer (a stream on 4.0), whose write() gets Rows made from those batches; both feed write_task's one
sending core.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamWriterBase
except ImportError:  # PySpark 4.0: a stream writer gets rows
    from pyspark.sql.datasource import DataSourceStreamWriter as StreamWriterBase  # type: ignore[assignment]

from ..metadata.admin import PulsarAdmin
from .effectively_once import check_deduplication
from .message_columns import WriteColumns
from .payload_schema import STREAM_SCHEMA_REUSE_S, planned_columns
from .write_options import WriteOptions, parse_write_options
from .write_task import SinkCommitMessage, write_batches, write_rows

log = logging.getLogger(__name__)


def write_plan(raw_options: Any, schema: Any, overwrite: bool, stream: bool) -> tuple[WriteOptions, WriteColumns]:
    """A write's options and columns, checked on the driver before any task runs (writer(), streamWriter()); a batch
    write's broker checks too (for_batch). A stream's broker checks run when its writer is pickled for a micro-batch's
    tasks (PulsarStreamWriter.__getstate__), since Spark asks for a stream's writer at every micro-batch twice: to
    plan it and to commit it."""
    if overwrite:
        raise ValueError("A write to Pulsar appends (a topic cannot be overwritten): use mode(\"append\"), or "
                         "outputMode(\"append\") for a stream.")
    options = parse_write_options(raw_options)
    # The topic's schema, checked against the columns; a stream's, read for its micro-batch's plan, serves its commit too.
    columns = planned_columns(schema, options.topic, options.admin, reuse_for_s=STREAM_SCHEMA_REUSE_S if stream else 0.0)
    if options.effectively_once:
        if not stream and options.sink_id is None:
            raise ValueError("Option 'deliveryGuarantee'=effectivelyOnce needs option 'sinkId' for a batch write (df.write): "
                             "a name of this write's own, the same when it is run again (it names the producers whose "
                             "sequence ids the broker deduplicates). A stream uses its query's id unless sinkId is set.")
    elif options.sink_id is not None:
        raise ValueError("Option 'sinkId' applies with deliveryGuarantee=effectivelyOnce only; set that, or remove sinkId.")
    return (options if stream else for_batch(options)), columns


def for_batch(options: WriteOptions) -> WriteOptions:
    """What the tasks of one batch write or micro-batch take from the broker, asked on the driver: under effectivelyOnce,
    deduplication on the `topic` option's topic (a topic column's: checked by the tasks; a topic found deduplicating is
    trusted for a while, effectively_once.check_deduplication) and its partition count, pinned for every task and retry."""
    if not options.effectively_once or options.topic is None:
        return options
    check_deduplication(options.admin, [options.topic])
    return replace(options, pinned_partitions=pinned_partitions(options))


def pinned_partitions(options: WriteOptions) -> int:
    """The `topic` option's partition count for one batch write or micro-batch: 0 when not partitioned."""
    assert options.topic is not None
    admin = PulsarAdmin.at(options.admin)
    try:
        return 0 if options.topic.partition_index >= 0 else admin.partition_count(options.topic)
    finally:
        admin.close()


def write_input(writer: Any, iterator: Iterator[Any], options: WriteOptions, columns: WriteColumns) -> SinkCommitMessage:
    """One task's write: Arrow record batches for an Arrow writer (what PySpark hands it), else rows."""
    write = write_batches if is_arrow_writer(writer) else write_rows
    return write(iterator, options, columns, _task_partition())


def is_arrow_writer(writer: Any) -> bool:
    """Whether PySpark hands `writer.write()` Arrow record batches (it checks these classes the same way)."""
    return isinstance(writer, ARROW_WRITERS)


ARROW_WRITERS: tuple[type, ...] = tuple(c for c in (DataSourceArrowWriter, StreamWriterBase) if c.__name__.endswith("ArrowWriter"))


def _task_partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _written(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    """(messages confirmed, tasks that reported) over the tasks' commit messages; rows skipped as already written, logged."""
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    skipped = sum(m.skipped for m in done)
    if skipped:
        log.info("%d rows were already in Pulsar from an earlier attempt of their task (deliveryGuarantee=effectivelyOnce): "
                 "skipped.", skipped)
    return sum(m.total for m in done), len(done)


class PulsarBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_input(self, iterator, self.options, self.columns)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, tasks = _written(messages)
        log.info("Wrote %d messages to Pulsar in %d tasks.", total, tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total, tasks = _written(messages)
        log.warning("The write failed; %d messages of %d finished tasks are already in Pulsar (Pulsar has no transactions "
                    "here: a rerun of the write sends them again).", total, tasks)


class PulsarStreamWriter(StreamWriterBase):
    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        self.planned = False  # for_batch applied: done once, when Spark first pickles this writer for a micro-batch's tasks

    def __getstate__(self) -> dict[str, Any]:
        """Spark pickles the writer it asked for to plan a micro-batch into the batch's tasks; the one it asks for to
        commit the batch is never pickled. So the broker checks and the partition pins run once per micro-batch, here."""
        if not self.planned:
            self.options = for_batch(self.options)
            self.planned = True
        return self.__dict__

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_input(self, iterator, self.options, self.columns)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        total, tasks = _written(messages)
        log.info("Micro-batch %d: wrote %d messages to Pulsar in %d tasks.", batchId, total, tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        total, tasks = _written(messages)
        log.warning("Micro-batch %d failed; %d messages of %d finished tasks are already in Pulsar (deliveryGuarantee="
                    "atLeastOnce: the batch's retry sends them again; effectivelyOnce: it skips them).", batchId, total, tasks)
