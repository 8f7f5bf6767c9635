"""Executor side: an Arrow writer's task sent by the native sender (native_sender; option sendPath), where it can.

Per batch, the library routes every row (a partition column, a key hashed as a Java producer does, round robin:
routing.Router's rules, in C) and sends each with pulsar_producer_send_async; its C callback counts the broker's
answers, so no Python runs per message. Python opens the producers a batch needs (on the worker's native client,
the native read path's, with the write's credentials and TLS settings), gives the library each one's last
persisted sequence id (effectivelyOnce's skip), flushes, waits and words the errors as the Python sender does.

A batch the library does not encode as the Python sender would (sendPath_problem lists what a write needs; a
batch: a key with a NUL character, an event time before 1970, several topics in a topic column...) ends the
native part of the task: what it sent is flushed and confirmed (and its named producers closed), and the rest of
the task goes through the Python sender, from the same row position and round robin, so a retry routes and
numbers every row as before.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..reading.client_cache import drop_native_client, native_client_for
from ..reading.native_reader import unsupported_settings
from ..topics import TopicName
from .arrow_messages import batch_messages
from .confirmations import MIN_IN_FLIGHT
from .effectively_once import ProducerIdentity, task_identity
from .message_columns import WriteColumns
from .native_sender import (
    ROUTE_BAD_PARTITION,
    ROUTE_NEEDS_PYTHON,
    ROUTE_OK,
    BatchColumns,
    NativeSender,
    TaskState,
    Unencodable,
    batch_columns,
    native_sender,
    setting_text,
)
from .producers import ProducerCache
from .routing import Router
from .write_options import WriteOptions
from .write_quota import PublishPermits, store_for
from .write_task import SendFailed, SinkCommitMessage, _partitions, producer_error, send_messages

log = logging.getLogger(__name__)

_WARNED: set[str] = set()
_PRODUCERS = ProducerCache()  # atLeastOnce: the worker's native producers, kept across tasks as the Python sender's
atexit.register(_PRODUCERS.close_all)


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


class NativeProducer:
    """A producer of the native library (closed like a pulsar.Producer)."""

    def __init__(self, lib: Any, handle: int) -> None:
        self._lib = lib
        self.handle: int | None = handle

    def close(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            self._lib.pns_producer_close(handle)


def _producer_kwargs(options: WriteOptions) -> dict[str, Any]:
    """create_producer's arguments the Python sender's producer gets: its defaults (libpulsar's differ: batching on),
    then the write's settings."""
    import inspect

    import pulsar

    defaults = {p.name: p.default for p in inspect.signature(pulsar.Client.create_producer).parameters.values()
                if p.default is not inspect.Parameter.empty and p.default is not None}
    return {**defaults, **dict(options.producer.kwargs)}


def _open_producer(sender: NativeSender, options: WriteOptions, destination: str, name: str | None) -> NativeProducer:
    import pulsar

    lib: Any = sender.lib
    kwargs = {k: v for k, v in _producer_kwargs(options).items() if k in sender.producer_settings}
    if name is not None:
        kwargs["producer_name"] = name
    names = (ctypes.c_char_p * max(len(kwargs), 1))(*[k.encode() for k in kwargs])
    values = (ctypes.c_char_p * max(len(kwargs), 1))(*[setting_text(v) for v in kwargs.values()])
    result, err = ctypes.c_int(0), ctypes.create_string_buffer(512)
    client = native_client_for(options.client)
    handle = lib.pns_producer_create(client.handle, destination.encode(), names, values, len(kwargs), ctypes.byref(result), err,
                                     len(err))
    if not handle:
        try:
            error = pulsar.Result(result.value).name if result.value else err.value.decode(errors="replace")
        except ValueError:
            error = f"result {result.value}"
        raise producer_error(destination, options, error)
    return NativeProducer(lib, handle)


class NativeTask:
    """One task's state in the library (destinations, round robin, answers) and its producers."""

    def __init__(self, sender: NativeSender, options: WriteOptions, identity: ProducerIdentity | None, topic: TopicName,
                 partitions: int, first_partition: int) -> None:
        assert sender.lib is not None, "the native sender was chosen without its library"
        self.sender, self.options, self.identity = sender, options, identity
        self.lib: Any = sender.lib
        self.names = [str(topic.partition(i)) for i in range(partitions)] or [str(topic)]
        single = int(options.producer.routing_mode == "UseSinglePartition")
        self.handle = self.lib.pns_task_create(partitions, topic.partition_index, first_partition, single)
        if not self.handle:
            raise MemoryError("the native sender could not allocate a task")
        # As the Python sender (writing.confirmations): in flight, no more than the broker confirmed in the last quarter
        # of the send timeout, so a send waits in the task rather than time out in the producer's queue.
        window_ms = int(options.producer.send_timeout_s * 1000 / 4)
        self.lib.pns_task_pace(self.handle, window_ms, MIN_IN_FLIGHT)
        self.open: dict[int, tuple[Any, NativeProducer]] = {}  # lane -> (cache key or None, producer)
        self.last: dict[int, int] = {}  # lane -> its producer's last persisted sequence id
        self._dest = (ctypes.c_int32 * 0)()
        self._used = (ctypes.c_uint8 * len(self.names))()

    def route(self, view: BatchColumns) -> tuple[int, int, str]:
        if len(self._dest) < view.rows:
            self._dest = (ctypes.c_int32 * max(view.rows, 1024))()
        row, why = ctypes.c_int64(-1), ctypes.c_char_p()
        status = self.lib.pns_route(self.handle, ctypes.byref(view), self._dest, ctypes.sizeof(self._dest), self._used,
                                    len(self._used), ctypes.byref(row), ctypes.byref(why))
        return status, row.value, (why.value or b"").decode()

    def open_lanes(self) -> None:
        """A producer for every destination the routed batch needs and the task has not opened."""
        for lane in (i for i, used in enumerate(self._used) if used and i not in self.open):
            destination = self.names[lane]
            if self.identity is None:
                key = ("native", self.options.client.cache_key(), destination, self.options.producer.kwargs)
                producer = _PRODUCERS.producer(key, self._opener(destination))
                last = -1
            else:
                key, producer = None, _open_producer(self.sender, self.options, destination, self.identity.name)
                last = self.lib.pns_producer_last_sequence_id(producer.handle)
            self.open[lane] = (key, producer)
            self.last[lane] = last
            self.lib.pns_task_set_producer(self.handle, lane, producer.handle, last)

    def _opener(self, destination: str) -> Callable[[], NativeProducer]:
        return lambda: _open_producer(self.sender, self.options, destination, None)

    def send(self, view: BatchColumns, first: int, end: int, sequence_base: int) -> int:
        """Send rows [first, end) of the routed batch; the rows skipped as already persisted (effectivelyOnce)."""
        skipped = ctypes.c_int64(0)
        handed = self.lib.pns_send(self.handle, ctypes.byref(view), self._dest, ctypes.sizeof(self._dest), first, end,
                                   sequence_base, ctypes.byref(skipped))
        if handed < 0:
            raise RuntimeError("the native sender refused a routed batch (a destination without producer)")
        return int(skipped.value)

    def send_admitted(self, view: BatchColumns, sizes: list[int], permits: PublishPermits, pause: _Pause,
                      sequence_base: int) -> int:
        """Send the batch under a write quota: a permit per row (its value's bytes) from `permits`, as the Python sender
        takes them; the rows admitted so far are sent before each wait for the next window (`pause`)."""
        names, dest, last = self.names, self._dest, self.last
        skipped = start = 0

        def send_admitted_rows(end: int) -> None:
            nonlocal skipped, start
            if end > start:
                skipped += self.send(view, start, end, sequence_base)
                start = end

        pause.before = send_admitted_rows
        for row, size in enumerate(sizes):
            lane = dest[row]
            if sequence_base >= 0 and sequence_base + row <= last[lane]:
                continue  # persisted by an earlier attempt: no permit (the library skips it)
            pause.row = row
            permits.take(names[lane], size)
        send_admitted_rows(len(sizes))
        return skipped

    def state(self, timeout_s: float | None) -> TaskState:
        state = TaskState()
        self.lib.pns_wait(self.handle, -1 if timeout_s is None else int(timeout_s * 1000), ctypes.byref(state))
        return state

    def finish_sending(self) -> dict[str, int]:
        """Flush every producer, wait for every answer; the confirmed messages per destination, or the first error."""
        if self.state(0).error == 0:
            for _, producer in self.open.values():
                self.lib.pns_producer_flush(producer.handle)
        state = self.state(self.options.producer.confirmation_wait_s)
        if state.error:
            import pulsar

            try:
                result: Any = pulsar.Result(state.error)
            except ValueError:
                result = f"result {state.error}"
            raise SendFailed(self.options, self.names[state.error_lane], result)
        if state.answered < state.sent:
            raise RuntimeError(f"{state.sent - state.answered} sends were still unconfirmed after the producers' flush; "
                               "raise 'pulsar.producer.sendTimeoutMillis' or check the broker's health.")
        confirmed = {self.names[lane]: int(self.lib.pns_confirmed(self.handle, lane)) for lane in self.open}
        return {name: n for name, n in confirmed.items() if n}

    def next_partition(self) -> int:
        return int(self.lib.pns_task_next_partition(self.handle))

    def close(self, failed: bool) -> None:
        """The task's end: named producers closed; the worker's kept (or, after a failure, closed and forgotten)."""
        cached = [key for key, _ in self.open.values() if key is not None]
        (_PRODUCERS.drop if failed else _PRODUCERS.touch)(cached)
        for key, producer in self.open.values():
            if key is None:
                producer.close()
        self.open.clear()
        if failed:
            drop_native_client(self.options.client)
        handle, self.handle = self.handle, None
        self.lib.pns_task_free(handle)


def send_batches_natively(batches: Iterable[Any], options: WriteOptions, columns: WriteColumns, task: int) -> SinkCommitMessage:
    """write_task.send_messages for Arrow batches, in the native library (module docstring)."""
    sender = native_sender()
    identity = task_identity(options.sink_id, task) if options.effectively_once else None
    assert options.topic is not None, "a topic column is sent by the Python sender"
    topic = options.topic
    partitions = _partitions(options, topic)
    partition_column = columns.names[columns.partition] if columns.partition >= 0 else "partition"
    native = NativeTask(sender, options, identity, topic, partitions, task)
    pause = _Pause()
    permits = PublishPermits(options.quota, store_for(options.quota), sleep=pause) if options.quota.limited else None
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


class _Pause:
    """PublishPermits' sleep under the native sender: the rows admitted before the waiting one are sent first."""

    def __init__(self) -> None:
        self.before: Callable[[int], None] = lambda row: None
        self.row = 0

    def __call__(self, seconds: float) -> None:
        self.before(self.row)
        time.sleep(seconds)


def _raise_bad_partition(batch: pa.RecordBatch, columns: WriteColumns, row: int, topic: TopicName, partitions: int,
                         column: str) -> None:
    """The Python router's own error for the row the library found out of range."""
    value = pc.cast(batch.column(columns.partition), pa.int64())[row].as_py()
    Router(topic, partitions, 0, False).destination(None, value, column)
    raise AssertionError(f"row {row}: partition {value} was refused by the library but not by the router")
