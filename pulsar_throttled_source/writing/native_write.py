"""Executor side: which sender a write task takes (option sendPath), and an Arrow writer's task sent by the native
sender (native_sender; its task and producers: native_task) where it can.

Per batch, the library routes every row (a partition column, a key hashed as a Java producer does, round robin:
routing.Router's rules, in C) and sends each with pulsar_producer_send_async, paced to the broker's confirmations;
its C callback counts the broker's answers, so no Python runs per message. Python opens the producers a batch needs,
gives the library each one's last persisted sequence id (effectivelyOnce's skip), takes a write quota's permits,
flushes, waits and words the errors as the Python sender does.

A batch the library does not encode as the Python sender would (sendPath_problem lists what a write needs; a
batch: a key with a NUL character, an event time before 1970, several topics in a topic column...) ends the
native part of the task: what it sent is flushed and confirmed (and its named producers closed), and the rest of
the task goes through the Python sender, from the same row position and round robin, so a retry routes and
numbers every row as before.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..reading.native_reader import unsupported_settings
from ..topics import TopicName
from .arrow_messages import batch_messages
from .effectively_once import task_identity
from .message_columns import WriteColumns
from .native_sender import (
    ROUTE_BAD_PARTITION,
    ROUTE_NEEDS_PYTHON,
    ROUTE_OK,
    NativeSender,
    Unencodable,
    batch_columns,
    native_sender,
)
from .native_task import NativeTask, Pause
from .routing import Router
from .write_congestion import permits_for
from .write_options import WriteOptions
from .write_task import SinkCommitMessage, partition_count, send_messages

log = logging.getLogger(__name__)

_WARNED: set[str] = set()


class NativeSendPathUnavailable(RuntimeError):
    """sendPath=native where the native sender cannot send this write."""


def send_path_problem(sender: NativeSender, options: WriteOptions, columns: WriteColumns) -> str:
    """Why the native sender cannot send this write ('' when it can)."""
    if not sender.available:
        return sender.reason
    unsupported = unsupported_settings(sender.loaded, options.client.client_kwargs, ())
    unsupported += [f"pulsar.producer.{name}" for name, _ in options.producer.kwargs if name not in sender.producer_settings]
    if unsupported:
        return f"the native sender cannot apply {', '.join(unsupported)}"
    kwargs = dict(options.producer.kwargs)
    if kwargs.get("batching_enabled") and kwargs.get("chunking_enabled"):
        return "batching and chunking are both on (the Python sender's producer refuses that, naming them)"
    return ""


def uses_native_sender(options: WriteOptions, columns: WriteColumns) -> bool:
    """Whether this task sends natively: sendPath=python never; native always (else it fails, saying why); auto
    where the library loads and can send the write, else the Python sender with one WARN per process and reason."""
    if options.send_path == "python":
        return False
    problem = send_path_problem(native_sender(), options, columns)
    if not problem:
        return True
    if options.send_path == "native":
        raise NativeSendPathUnavailable(
            f"Option 'sendPath' is 'native' but the native sender cannot send this write: {problem}. Install "
            "pulsar-throttled-source-native for this platform, or set sendPath to 'auto' or 'python'.")
    if problem not in _WARNED:
        _WARNED.add(problem)
        log.warning("Writing with the Python sender (sendPath=auto): %s.", problem)
    return False


def send_batches_natively(batches: Iterable[Any], options: WriteOptions, columns: WriteColumns, task: int) -> SinkCommitMessage:
    """write_task.send_messages for Arrow batches, in the native library (module docstring)."""
    sender = native_sender()
    rule = options.producer.cuts if options.effectively_once else None
    identity = task_identity(options.sink_id, task, rule.tag if rule else "") if options.effectively_once else None
    assert options.topic is not None, "a topic column is sent by the Python sender"
    topic = options.topic
    partitions = partition_count(options, topic)
    partition_column = columns.names[columns.partition] if columns.partition >= 0 else "partition"
    native = NativeTask(sender, options, identity, topic, partitions, task)
    pause = Pause()
    permits = permits_for(options, sleep=pause)
    position = skipped = 0
    failed = True
    rest: Iterator[Any] | None = None
    try:
        remaining = iter(batches)
        for batch in remaining:
            if batch.num_rows == 0:
                continue
            try:
                view, keep = batch_columns(batch, columns)
                status, row, why = native.route(view)
            except Unencodable as e:
                status, row, why = ROUTE_NEEDS_PYTHON, 0, str(e)
            if status == ROUTE_BAD_PARTITION:
                _raise_bad_partition(batch, columns, row, topic, partitions, partition_column)
            if status == ROUTE_NEEDS_PYTHON:
                log.info("The rest of write task %d goes to the Python sender: its batch holds %s.", task, why)
                rest = itertools.chain([batch], remaining)
                break
            if status != ROUTE_OK:
                raise RuntimeError(f"the native sender refused a batch's buffers (status {status})")
            native.open_lanes()
            base = identity.sequence_id(position) if identity is not None else -1
            if permits is None:
                skipped += native.send(view, 0, batch.num_rows, base)
            else:
                sizes = pc.fill_null(pc.binary_length(batch.column(columns.value)), 0).to_pylist()
                skipped += native.send_admitted(view, sizes, permits, pause, base)
            del keep
            position += batch.num_rows
            if native.state(0).error:
                break  # nothing after a failed send (as the Python sender)
        confirmed = native.finish_sending()
        first_partition = native.next_partition()
        failed = False
    finally:
        native.close(failed)
    if rest is None:
        return SinkCommitMessage(task, confirmed, skipped)
    python = send_messages(batch_messages(rest, columns), options, columns, task, first_position=position,
                           first_partition=first_partition)
    for name, n in confirmed.items():
        python.messages[name] = python.messages.get(name, 0) + n
    python.skipped += skipped
    return python


def _raise_bad_partition(batch: pa.RecordBatch, columns: WriteColumns, row: int, topic: TopicName, partitions: int,
                         column: str) -> None:
    """The Python router's own error for the row the library found out of range."""
    value = pc.cast(batch.column(columns.partition), pa.int64())[row].as_py()
    Router(topic, partitions, 0, False).destination(None, value, column)
    raise AssertionError(f"row {row}: partition {value} was refused by the library but not by the router")
