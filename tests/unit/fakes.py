"""The fakes the unit tests share: one clock, one admin API, one client message and reader, one
partition catalog and a lookup pool a test can wait on. Each stands in for one collaborator the way
the real one answers; a test sets what it should report and reads what it was asked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from typing import Any

import pulsar

from pulsar_throttled_source.metadata.admin_http import TopicNotFound, TransactionsDisabled
from pulsar_throttled_source.metadata.catalog import CatalogSnapshot
from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.protobuf_wire import varint
from pulsar_throttled_source.topics import TopicName

SAFETY_S = 10.0  # what a test waits for a thread at most: far beyond any answer, never reached when all is well
NAMESPACE = "persistent://public/default"


class FakeClock:
    """Time that moves only when the test moves it. Called, it tells the time (the `clock` every
    component takes). advance() moves it; sleep() moves it too and records the sleep (a retry's
    `sleep`). wait_until() is BackgroundRefresh's waiter: the calling thread waits until advance()
    reaches its deadline, so nothing waits in real time. wait() is the entry lookups' waiter: waiting on
    an unanswered lookup takes the whole time it was allowed (the broker answers no sooner)."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        self.slept: list[float] = []
        self._changed = threading.Condition()  # guards the fields below; notified when a thread starts waiting
        self._sleepers: dict[threading.Thread, tuple[float, threading.Condition]] = {}
        self.condition: threading.Condition | None = None  # the condition the last waiting thread waits on

    def __call__(self) -> float:
        return self.now

    # A pickled component (a reader shipped to a task) carries its clock: the time, not the waiting threads.
    def __getstate__(self) -> dict[str, Any]:
        return {"now": self.now, "slept": list(self.slept)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["now"])  # type: ignore[misc]
        self.slept = state["slept"]

    def advance(self, seconds: float) -> None:
        with self._changed:
            self.now += seconds
            due = [thread for thread, (deadline, _) in self._sleepers.items() if deadline <= self.now]
            woken = [self._sleepers.pop(thread)[1] for thread in due]  # not sleeping from now on
        for condition in woken:
            with condition:
                condition.notify_all()

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)

    def wait_until(self, condition: threading.Condition, deadline: float) -> None:
        """Called holding `condition`; returns once advance() reaches `deadline` or `condition` is notified."""
        me = threading.current_thread()
        with self._changed:
            if self.now >= deadline:
                return
            self._sleepers[me] = (deadline, condition)
            self.condition = condition
            self._changed.notify_all()
        condition.notify_all()  # a test waiting on the condition sees the thread wait
        condition.wait()  # until advance() reaches the deadline, or the waiter's owner notifies
        with self._changed:
            self._sleepers.pop(me, None)

    @property
    def sleeping(self) -> bool:
        with self._changed:
            return bool(self._sleepers)

    def wait_for_sleeper(self) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self._sleepers, timeout=SAFETY_S), "the thread never waited"

    def wait(self, future: Future, timeout: float | None) -> bool:
        if not future.done():
            if timeout is None:  # no deadline: the lookup's pool thread answers a fake at once, once it runs (late under load)
                wait([future], timeout=SAFETY_S)
                assert future.done(), "a plan that waits for all its lookups waited on one never answered"
            else:
                self.advance(timeout)
        return future.done()


def internal_stats(ledger: int, entries: int) -> dict:
    """The admin API's internal stats of a partition whose one (open) ledger holds `entries`."""
    return {"ledgers": [{"ledgerId": ledger, "entries": 0, "size": 0}], "currentLedgerEntries": entries,
            "currentLedgerSize": entries * 10, "lastConfirmedEntry": f"{ledger}:{entries - 1}", "entriesAddedCounter": entries}


class FakeAdmin:
    """Answers like the admin API (PulsarAdmin) and records what it was asked.
    Topics: `partitions` (base topic -> partition count, 0: non-partitioned), `entries` (partition ->
    entries in ledger 7), open transactions, rate policies; every call is in `calls`.
    Entries: ledger 5's entry e holds `counts[e]` messages (stored in `sizes[e]` bytes, like a batch,
    when given), entries from `gone_from` on are deleted; without counts an entry is a message
    published at `publish_time`. Partitions in `slow` answer after `slow_s`. Lookups are in `header_lookups`.
    Schemas: `schemas` (topic's local name -> schema info, None: no schema); asked ones in `schemas_asked`."""

    def __init__(self, counts: list[int] | None = None, gone_from: int | None = None, sizes: list[int] | None = None,
                 schemas: Mapping[str, dict | None] | None = None) -> None:
        self.partitions: dict[str, int] = {}
        self.entries: dict[str, int] = {}
        self.max_read: dict[str, str | None] = {}  # partition -> max read position while a transaction is open
        self.transactions = True
        self.reports_open_transactions = True  # brokers before ongoingTxnCount in topic stats: False
        self.policies: dict[str, dict | None] = {}
        self.calls: list[str] = []
        self.counts = counts
        self.sizes = sizes
        self.gone_from = gone_from
        self.publish_time = "2024-01-01T00:00:00.000Z"
        self.slow: set[str] = set()
        self.slow_s = 2.0
        self.header_lookups: list[tuple[str, int, int]] = []
        self.schemas = dict(schemas or {})
        self.schemas_asked: list[str] = []

    # --- topics, their stats and policies

    def _need(self, topic: str) -> None:
        if topic not in self.partitions:
            raise TopicNotFound(f"Topic {topic} does not exist")

    def partition_count(self, topic: TopicName) -> int:
        self.calls.append(f"partition_count {topic}")
        self._need(str(topic))
        return self.partitions[str(topic)]

    def list_topics(self, namespace: str) -> list[str]:
        self.calls.append(f"list_topics {namespace}")
        out = []
        for base, n in self.partitions.items():
            out += [f"{base}-partition-{i}" for i in range(n)] if n else [base]
        return out + [f"{NAMESPACE}/__change_events", f"{NAMESPACE}/__transaction_buffer_snapshot"]

    def partitioned_internal_stats(self, topic: TopicName) -> dict[str, dict]:
        self.calls.append(f"partitioned_internal_stats {topic}")
        self._need(str(topic))
        return {f"{topic}-partition-{i}": internal_stats(7, self.entries.get(f"{topic}-partition-{i}", 1))
                for i in range(self.partitions[str(topic)])}

    def _stats(self, partition: str) -> dict:
        s = {"msgInCounter": 10 * self.entries.get(partition, 1)}
        if self.reports_open_transactions:
            s["ongoingTxnCount"] = 1 if self.transactions and self.max_read.get(partition) else 0
        return s

    def partitioned_stats(self, topic: TopicName) -> dict[str, dict]:
        self.calls.append(f"partitioned_stats {topic}")
        self._need(str(topic))
        return {f"{topic}-partition-{i}": self._stats(f"{topic}-partition-{i}") for i in range(self.partitions[str(topic)])}

    def stats(self, topic: TopicName) -> dict:
        self.calls.append(f"stats {topic}")
        self._need(str(topic))
        return self._stats(str(topic))

    def internal_stats(self, topic: TopicName) -> dict:
        self.calls.append(f"internal_stats {topic}")
        self._need(str(topic))
        return internal_stats(7, self.entries.get(str(topic), 1))

    def max_read_position(self, partition: TopicName) -> str | None:
        self.calls.append(f"max_read_position {partition}")
        if not self.transactions:
            raise TransactionsDisabled("not configured with transactionCoordinatorEnabled=true")
        return self.max_read.get(str(partition))

    def dispatch_rate(self, topic: TopicName, applied: bool = True) -> dict | None:
        self.calls.append(f"dispatch_rate {topic}")
        return self.policies.get(f"topic {topic}")

    def subscription_dispatch_rate(self, topic: TopicName, applied: bool = True) -> dict | None:
        self.calls.append(f"subscription_dispatch_rate {topic}")
        return self.policies.get(f"subscription {topic}")

    # --- entries (their headers)

    def entry_headers(self, partition: Any, ledger_id: int, entry_id: int) -> dict[str, str] | None:
        self.header_lookups.append((str(partition), ledger_id, entry_id))
        if str(partition) in self.slow:
            time.sleep(self.slow_s)  # a broker that answers late: the caller's timeout is what is tested
        if self.counts is None:
            return {"X-Pulsar-Publish-Time": self.publish_time}
        if self.gone_from is not None and entry_id >= self.gone_from:
            return None
        n = self.counts[entry_id]
        if self.sizes is not None:  # a batch's metadata here is its message count: 2 bytes
            return {"X-Pulsar-num-batch-message": str(n), "X-Pulsar-batch-size": str(self.sizes[entry_id] - 2)}
        return {"X-Pulsar-num-batch-message": str(n)} if n > 1 else {"X-Pulsar-publish-time": "1"}

    @property
    def lookups(self) -> list[tuple[int, int]]:
        """The (ledger, entry) of every entry lookup, in the order asked."""
        return [(ledger, entry) for _, ledger, entry in self.header_lookups]

    # --- schemas

    def topic_schema(self, topic: TopicName, version: int | None = None) -> dict | None:
        self.schemas_asked.append(topic.base.local)
        return self.schemas[topic.base.local]


class StandInId:
    """A message id for shapes a real pulsar.MessageId never has here: `serialized` gives the bytes its
    serialize() returns (None: the read loop must splice this id from its entry's first, never serialize it);
    `sized` builds a batched message's id that carries its entry's batch size, as the client's ids do."""

    def __init__(self, ledger: int, entry: int, index: int, serialized: bytes | None) -> None:
        self._ledger, self._entry, self._index, self._serialized = ledger, entry, index, serialized

    @classmethod
    def sized(cls, ledger: int, entry: int, index: int, size: int) -> StandInId:
        # MessageIdData: ledger, entry, partition 0, batch index, batch size
        return cls(ledger, entry, index, b"\x08" + varint(ledger) + b"\x10" + varint(entry) + b"\x18\x00\x20"
                   + varint(index) + b"\x30" + varint(size))

    def ledger_id(self) -> int:
        return self._ledger

    def entry_id(self) -> int:
        return self._entry

    def batch_index(self) -> int:
        return self._index

    def serialize(self) -> bytes:
        assert self._serialized is not None, f"index {self._index}: the read loop should have spliced this id"
        return self._serialized


class FakeMessage:
    """A pulsar.Message as the client delivers it; `mid` is a real pulsar.MessageId or a StandInId."""

    def __init__(self, mid: Any = None, key: str = "", value: bytes | None = b"v", event_ms: int = 0,
                 props: dict[str, str] | None = None, publish_ms: int = 1_700_000_000_000, producer: str = "p",
                 schema_version: int = 1, ordering_key: str = "") -> None:
        self._id = mid if mid is not None else pulsar.MessageId(0, 5, 7, 2)
        self._key, self._value, self._event, self._props = key, value, event_ms, props or {}
        self._publish, self._producer, self._version, self._ordering_key = publish_ms, producer, schema_version, ordering_key

    @classmethod
    def at(cls, ledger: int, entry: int, index: int = -1) -> FakeMessage:
        """The message at (ledger, entry, index), its value naming that position: b"ledger:entry:index"."""
        return cls(pulsar.MessageId(0, ledger, entry, index), value=f"{ledger}:{entry}:{index}".encode())

    def message_id(self) -> Any:
        return self._id

    def partition_key(self) -> str:
        return self._key

    def data(self) -> bytes:
        return self._value or b""  # a null value reads as b"", as from the client

    def has_null_value(self) -> bool:
        return self._value is None

    def event_timestamp(self) -> int:
        return self._event

    def properties(self) -> dict[str, str]:
        return self._props

    def ordering_key(self) -> str:
        return self._ordering_key

    def publish_timestamp(self) -> int:
        return self._publish

    def producer_name(self) -> str:
        return self._producer

    def int_schema_version(self) -> int:
        return self._version


class FakeReader:
    """A pulsar.Reader that delivers the given messages in order, then times out like the client does;
    counts its reads and knows whether it was closed."""

    def __init__(self, messages: list[FakeMessage | None] | tuple[()] = ()) -> None:
        self.queue = list(messages)  # None: a read that times out there
        self.reads = 0
        self.closed = False

    def read_next(self, timeout_ms: int) -> FakeMessage:
        self.reads += 1
        message = self.queue.pop(0) if self.queue else None
        if message is None:
            raise pulsar.Timeout()
        return message

    def has_message_available(self) -> bool:
        return any(m is not None for m in self.queue)

    def close(self) -> None:
        self.closed = True


class FakeCatalog:
    """Stands in for PartitionCatalog: the test sets what the admin API would report."""

    def __init__(self, *layouts: PartitionLayout, max_read: dict[str, EntryPosition] | None = None) -> None:
        self.set(*layouts, max_read=max_read)

    def set(self, *layouts: PartitionLayout, max_read: dict[str, EntryPosition] | None = None) -> None:
        self.snap = CatalogSnapshot(0.0, {l.partition: l for l in layouts}, {}, max_read or {})

    def snapshot(self, force: bool = False) -> CatalogSnapshot:
        return self.snap

    def close(self) -> None:
        pass  # a PartitionCatalog stops its refresh thread


class LookupPools:
    """The `pool` factory the entry lookups take: real thread pools whose every future is kept, so that a
    test can wait for the lookups under way (settle) where a query would run its batch meanwhile."""

    def __init__(self) -> None:
        self.futures: list[Future] = []

    def __call__(self) -> Executor:
        futures = self.futures

        class Kept(ThreadPoolExecutor):
            def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
                future = super().submit(fn, *args, **kwargs)
                futures.append(future)
                return future

        return Kept(4, thread_name_prefix="test-entry-lookups")

    def settle(self) -> list[Future]:
        """Every lookup started so far, once each has been answered (or has failed, or was cancelled)."""
        while running := [f for f in self.futures if not f.done()]:
            assert not wait(running, timeout=SAFETY_S).not_done, "a lookup never ended"
        return list(self.futures)
