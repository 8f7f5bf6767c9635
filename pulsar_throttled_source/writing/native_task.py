"""Executor side: one write task's state in the native sender's library (native_sender) and the producers it sends
on: the worker's, kept across tasks (atLeastOnce, as the Python sender's), or the task's own, named for effectivelyOnce
and closed when it ends. Opened on the worker's native client (the native read path's, with the write's credentials
and TLS settings); the library routes a batch's rows, sends them paced to the broker's confirmations (as the Python
sender, writing.confirmations) and counts the answers; Python flushes, waits and words the errors as the Python
sender does (writing.write_task). writing.native_write decides which sender a task takes and hands a task over.
"""

from __future__ import annotations

import atexit
import ctypes
import time
from collections.abc import Callable
from typing import Any

from ..reading.client_cache import drop_native_client, native_client_for
from ..topics import TopicName
from .batch_cuts import LaneCuts, TaskCuts
from .confirmations import MIN_IN_FLIGHT
from .effectively_once import ProducerIdentity
from .native_sender import BatchColumns, NativeSender, TaskState, setting_text
from .producers import ProducerCache
from .write_options import WriteOptions
from .write_quota import PublishPermits
from .write_task import SendFailed, producer_error

_PRODUCERS = ProducerCache()  # atLeastOnce: the worker's native producers, kept across tasks as the Python sender's
atexit.register(_PRODUCERS.close_all)


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
        # effectivelyOnce: the library cuts each producer's batches (writing.batch_cuts); this model of its cuts tells
        # send_admitted which rows it skips.
        rule = options.producer.cuts if identity is not None else None
        self.cuts = TaskCuts(rule) if rule is not None else None
        if rule is not None and self.lib.pns_task_cuts(self.handle, rule.max_messages, rule.max_bytes) != 0:
            raise ValueError(f"the native sender refused the batch cuts {rule}")
        self.lane_cuts: dict[int, LaneCuts] = {}
        self.open: dict[int, tuple[Any, NativeProducer]] = {}  # lane -> (cache key or None, producer)
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
            if self.cuts is not None:
                self.lane_cuts[lane] = self.cuts.lane(last)
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

    def send_admitted(self, view: BatchColumns, sizes: list[int], permits: PublishPermits, pause: Pause,
                      sequence_base: int) -> int:
        """Send the batch under a write quota: a permit per row (its value's bytes) from `permits`, as the Python sender
        takes them; the rows admitted so far are sent before each wait for the next window (`pause`)."""
        names, dest, lane_cuts = self.names, self._dest, self.lane_cuts
        skipped = start = 0

        def send_admitted_rows(end: int) -> None:
            nonlocal skipped, start
            if end > start:
                skipped += self.send(view, start, end, sequence_base)
                start = end

        pause.before = send_admitted_rows
        for row, size in enumerate(sizes):
            lane = dest[row]
            if sequence_base >= 0 and lane_cuts[lane].place(sequence_base + row, size)[0]:
                continue  # persisted by an earlier attempt: no permit (the library skips it, by the same rule)
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


class Pause:
    """PublishPermits' sleep under the native sender: the rows admitted before the waiting one are sent first."""

    def __init__(self) -> None:
        self.before: Callable[[int], None] = lambda row: None
        self.row = 0

    def __call__(self, seconds: float) -> None:
        self.before(self.row)
        time.sleep(seconds)
