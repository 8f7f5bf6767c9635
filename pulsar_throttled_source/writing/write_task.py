"""Executor side: one write task (a Spark partition of one batch write or micro-batch) sends its rows and
returns once the broker has confirmed every one of them (or fails with the first error).

Rows (a row writer's) or Arrow record batches (an Arrow writer's, writing.arrow_messages) become messages
(message_columns), their payloads made with their topic's schema where it has one (payload_encoding), each routed
to a partition (routing) and sent asynchronously on the worker's producer for that partition (producers), all by
one sending core (send_messages). Before write() returns its commit message, every producer the task used is
flushed and every send confirmed: a task that returns has all its rows persisted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from ..credentials import scrub
from ..reading.client_cache import client_for
from ..topics import TopicName
from .arrow_messages import batch_messages
from .batch_cuts import TaskCuts
from .confirmations import Confirmations
from .effectively_once import ProducerIdentity, check_deduplication, task_identity
from .message_columns import Message, WriteColumns
from .payload_encoding import TopicPayloads
from .producers import Key, done_with, partition_names, producer_for, sender
from .routing import Router
from .write_congestion import permits_for
from .write_options import WriteOptions


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: its Spark partition and the messages confirmed per partition topic."""

    task: int
    messages: dict[str, int] = field(default_factory=dict)
    skipped: int = 0  # effectivelyOnce: rows an earlier attempt had persisted

    @property
    def total(self) -> int:
        return sum(self.messages.values())


class TaskProducers:
    """The producers one task sends on: the worker's, kept for the next tasks (atLeastOnce), or the task's own, named
    for effectivelyOnce (writing.effectively_once) and closed when it ends, since the next run of this Spark partition
    may be in another worker and the broker connects a name once per topic."""

    def __init__(self, options: WriteOptions, identity: ProducerIdentity | None) -> None:
        self.options = options
        self.identity = identity
        self.open: dict[str, tuple[Key, Any, int]] = {}  # destination -> (cache key, producer, last persisted sequence id)

    def get(self, destination: str, schema: Any = None) -> tuple[Any, int]:
        """The producer on `destination`; `schema`: the topic's, which it declares (writing.payload_encoding)."""
        found = self.open.get(destination)
        if found is None:
            found = self.open[destination] = self._create(destination, schema)
        return found[1], found[2]

    def _create(self, destination: str, schema: Any) -> tuple[Key, Any, int]:
        o = self.options
        kwargs = o.producer.kwargs if schema is None else (*o.producer.kwargs, ("schema", schema))
        try:
            if self.identity is None:
                key, producer = producer_for(o.client, destination, kwargs)
                return key, producer, -1
            producer = client_for(o.client).create_producer(destination, producer_name=self.identity.name, **dict(kwargs))
            return (), producer, producer.last_sequence_id()
        except Exception as e:
            raise producer_error(destination, o, e) from None

    def flush(self) -> None:
        for _, producer, _ in self.open.values():
            producer.flush()

    def finish(self, failed: bool) -> None:
        if self.identity is None:
            done_with([key for key, _, _ in self.open.values()], failed)
            return
        for _, producer, _ in self.open.values():
            try:
                producer.close()
            except Exception:  # a broken producer may fail to close; its connection goes with it
                pass


def write_rows(rows: Iterable[Any], options: WriteOptions, columns: WriteColumns, task: int) -> SinkCommitMessage:
    """A row writer's task (Spark Rows: PySpark 4.0's stream writer)."""
    payloads = TopicPayloads(columns, options.topic, options.admin)
    messages = map(columns.message, rows) if payloads.raw else _encoded(rows, columns, payloads)
    return send_messages(messages, options, columns, task, payloads)


def write_batches(batches: Iterable[Any], options: WriteOptions, columns: WriteColumns, task: int) -> SinkCommitMessage:
    """An Arrow writer's task (pyarrow.RecordBatch: the Arrow writers, where PySpark has them): by the native sender
    where it can send the write (writing.native_write; option sendPath: the `topic` option's topic, its payloads the
    `value` column as it is, no schema to declare), else message by message here."""
    from .native_write import send_batches_natively, uses_native_sender

    payloads = TopicPayloads(columns, options.topic, options.admin)
    if (options.topic is not None and payloads.raw and payloads.of(options.topic).schema is None
            and uses_native_sender(options, columns)):
        return send_batches_natively(batches, options, columns, task)
    return send_messages(batch_messages(batches, columns, payloads), options, columns, task, payloads)


def _encoded(rows: Iterable[Any], columns: WriteColumns, payloads: TopicPayloads) -> Iterator[Message]:
    """Rows' messages with payloads made with their topic's schema (checked before the topic's first row is sent)."""
    for row in rows:
        m = columns.message(row)
        payload = payloads.named(m.topic)
        yield m if payload is None or payload.encoding.how == "raw" else m._replace(value=payload.encode(row))


def send_messages(messages: Iterable[Message], options: WriteOptions, columns: WriteColumns, task: int,
                  payloads: TopicPayloads | None = None, first_position: int = 0,
                  first_partition: int | None = None) -> SinkCommitMessage:
    """Send every message, flush, and wait until the broker confirmed each one; raise the first failure. Under
    effectivelyOnce, batches are cut at fixed rows and the rows of those the broker holds from an earlier attempt
    skipped (writing.batch_cuts). `payloads`: the feeder's, which made the messages' payloads; the producers
    declare their topics' schemas from it. `first_position` and `first_partition` (the round robin's next): where the
    native sender left a task it handed over (writing.native_write)."""
    cuts = TaskCuts(options.producer.cuts) if options.effectively_once and options.producer.cuts else None
    identity = task_identity(options.sink_id, task, cuts.rule.tag if cuts else "") if options.effectively_once else None
    single = options.producer.routing_mode == "UseSinglePartition"
    routes: dict[str | None, tuple[Router, Any]] = {}  # topic column value (None: the option's) -> (router, schema)
    producers = TaskProducers(options, identity)
    lanes: dict[str, tuple[Any, Any, Any, Any]] = {}  # destination -> (send, its batch cuts, callback, flush)
    answers = Confirmations(options.producer.send_timeout_s, held=cuts)
    payloads = payloads or TopicPayloads(columns, options.topic, options.admin)
    topic_column = columns.names[columns.topic] if columns.topic >= 0 else "topic"
    partition_column = columns.names[columns.partition] if columns.partition >= 0 else "partition"
    permits = permits_for(options)
    by_option = options.topic is not None  # the option's topic, under None, else each row's topic column
    skipped = 0
    failed = True
    try:
        for position, m in enumerate(messages, first_position):
            route = routes.get(None if by_option else m.topic)
            if route is None:
                topic = options.topic or _row_topic(m.topic, topic_column)
                if identity is not None and not by_option:  # the option's topic was checked at the start
                    check_deduplication(options.admin, [topic])
                schema = payloads.of(topic).schema  # a topic's schema is checked before its first row is sent
                start = task if first_partition is None else first_partition
                route = routes[None if by_option else m.topic] = (Router(topic, partition_count(options, topic), start, single), schema)
            router, schema = route
            destination = router.destination(m.key, m.partition, partition_column)
            lane = lanes.get(destination)
            if lane is None:
                producer, last = producers.get(destination, schema)
                lane = lanes[destination] = (sender(producer), cuts.lane(last) if cuts else None, answers.callback(destination),
                                             cut_batch(producer))
            send, lane_cuts, callback, flush = lane
            sequence_id = identity.sequence_id(position) if identity is not None else None
            cut = False
            if lane_cuts is not None and sequence_id is not None:
                skip, cut = lane_cuts.place(sequence_id, len(m.value or b""))
                if skip:
                    skipped += 1  # persisted by an earlier attempt of this task
                    continue
            if permits is not None:
                permits.take(destination, len(m.value or b""))  # waits while the partition's window is spent
            answers.sending()
            try:
                send(m, sequence_id, callback)
                if lane_cuts is not None:
                    lane_cuts.sent()
                if cut:
                    flush()  # effectivelyOnce: the batch ends at this row (writing.batch_cuts)
            except Exception as e:
                callback(_result_of(e), None)
            if answers.error:
                break  # nothing after a failed send: a later one persisted would hide it from deduplication on the retry
        if answers.error is None:
            try:
                producers.flush()
            except Exception:  # a send that failed fails the flush too; its callback names it (SendFailed below)
                pass
        answers.wait(options.producer.confirmation_wait_s)
        if answers.error is not None:
            raise SendFailed(options, *answers.error)
        if answers.pending:
            raise RuntimeError(f"{answers.pending} sends were still unconfirmed after the producers' flush; "
                               "raise 'pulsar.producer.sendTimeoutMillis' or check the broker's health.")
        failed = False
        return SinkCommitMessage(task, dict(answers.confirmed), skipped)
    finally:
        producers.finish(failed)


def cut_batch(producer: Any) -> Any:
    """How the sender ends `producer`'s open batch without waiting: pulsar-client's flush_async (its pybind11 producer),
    else the waiting flush."""
    inner = getattr(producer, "_producer", None)
    if inner is not None and hasattr(inner, "flush_async"):
        return lambda: inner.flush_async(_ignore)
    return producer.flush


def _ignore(_result: Any) -> None:
    """A cut's flush answer: each message's own callback reports its send."""


def _row_topic(value: str | None, column: str) -> TopicName:
    if value is None:
        raise ValueError(f"Column '{column}' is null in a row and option 'topic' is not set: every row needs a topic.")
    try:
        return TopicName.parse(value, column)
    except ValueError as e:
        raise ValueError(f"Column '{column}': {e}".replace(f"Option '{column}': ", "")) from None


def partition_count(options: WriteOptions, topic: TopicName) -> int:
    """The topic's partition count (0: not partitioned, or a partition named itself); effectivelyOnce's `topic`: as pinned."""
    if options.pinned_partitions is not None and topic == options.topic:
        return options.pinned_partitions
    try:
        names = partition_names(options.client, str(topic))
    except Exception as e:
        raise RuntimeError(f"Cannot look up topic {topic} at {options.service_url}: {scrub(str(e), options.credentials)}. "
                           f"Check option 'service.url' and the authentication options (pulsar.client.authPluginClassName, "
                           "pulsar.client.authParams).") from None
    return 0 if names == [str(topic)] else len(names)


def _result_of(error: Exception) -> Any:
    """A send that raised at once (e.g. a full queue with blockIfQueueFull=false), as the result a callback gets."""
    return getattr(error, "result", None) or type(error).__name__


# What to look at for each failure of a send (pulsar.Result's names): the option that matters, or the broker setting.
HINTS = {
    "Timeout": "the broker did not confirm in time: raise 'pulsar.producer.sendTimeoutMillis' (0: wait without limit) or check the broker's health",
    "ProducerQueueIsFull": "the producer's queue was full: leave 'pulsar.producer.blockIfQueueFull' at true (the sink's default) so a task waits",
    "MessageTooBig": "a payload is over the broker's maxMessageSize: 'pulsar.producer.chunkingEnabled=true' (with batchingEnabled=false) splits it",
    "AuthorizationError": "the role of the write's credentials may not produce: pulsar-admin namespaces grant-permission --role <role> --actions produce <tenant>/<namespace>",
    "AuthenticationError": "check 'pulsar.client.authPluginClassName' and 'pulsar.client.authParams'",
    "TopicNotFound": "the topic does not exist and the broker does not create topics on first use (allowAutoTopicCreation): create it, or check option 'topic'",
    "TopicTerminated": "the topic is terminated and takes no more messages",
    "ProducerBlockedQuotaExceededError": "the namespace's backlog quota is exceeded (its policy holds or refuses producers)",
    "ProducerBlockedQuotaExceededException": "the namespace's backlog quota is exceeded (its policy holds or refuses producers)",
    "ProducerFenced": "another producer took the topic: check 'pulsar.producer.accessMode'",
    "ProducerBusy": "a producer of this name is connected already (deliveryGuarantee=effectivelyOnce: another attempt of "
                    "this task is still running, and Spark retries this one) or another producer holds the topic "
                    "exclusively ('pulsar.producer.accessMode')",
}


def producer_error(destination: str, options: WriteOptions, error: Exception | str) -> RuntimeError:
    """Why no producer could be created on `destination`, worded alike by both senders: pulsar-client's exception, or
    the native sender's error (libpulsar's result name), scrubbed of the write's secrets, and what to check."""
    name = error if isinstance(error, str) else type(error).__name__
    text = name if isinstance(error, str) else f"{name}: {error}"
    hint = HINTS.get(name, "check option 'service.url', the authentication options and the pulsar.producer.* settings")
    return RuntimeError(f"Cannot create a producer on {destination} at {options.service_url}: "
                        f"{scrub(text, options.credentials)} ({hint}).")


class SendFailed(RuntimeError):
    def __init__(self, options: WriteOptions, destination: str, result: Any) -> None:
        name = str(result).rsplit(".", 1)[-1]
        hint = HINTS.get(name, "check option 'service.url' and the broker's health")
        super().__init__(f"Sending to {destination} at {options.service_url} failed: {scrub(name, options.credentials)} ({hint}). "
                         "The task fails; the messages it sent before stay written (deliveryGuarantee=atLeastOnce: Spark's "
                         "retry sends them again; effectivelyOnce: the retry skips them).")
