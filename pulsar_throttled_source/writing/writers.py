"""The Spark-facing writers: a batch write (df.write, DataSourceWriter) and a stream's (df.writeStream,
DataSourceStreamWriter). They answer Spark's calls and delegate: write() on the executors to write_task,
commit/abort on the driver only log what was written (the messages are persisted when write() returns;
deliveryGuarantee atLeastOnce: a failed and retried task, or a micro-batch run again after a restart,
sends its rows again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from .message_columns import WriteColumns
from .write_options import WriteOptions
from .write_task import SinkCommitMessage, write_rows

log = logging.getLogger(__name__)


def _task_partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _written(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    """(messages confirmed, tasks that reported) over the tasks' commit messages."""
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    return sum(m.total for m in done), len(done)


class PulsarBatchWriter(DataSourceWriter):
    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_rows(iterator, self.options, self.columns, _task_partition())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, tasks = _written(messages)
        log.info("Wrote %d messages to Pulsar in %d tasks.", total, tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total, tasks = _written(messages)
        log.warning("The write failed; %d messages of %d finished tasks are already in Pulsar (Pulsar has no transactions "
                    "here: a rerun of the write sends them again).", total, tasks)


class PulsarStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_rows(iterator, self.options, self.columns, _task_partition())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        total, tasks = _written(messages)
        log.info("Micro-batch %d: wrote %d messages to Pulsar in %d tasks.", batchId, total, tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        total, tasks = _written(messages)
        log.warning("Micro-batch %d failed; %d messages of %d finished tasks are already in Pulsar (deliveryGuarantee "
                    "atLeastOnce: the batch's retry sends them again).", batchId, total, tasks)
