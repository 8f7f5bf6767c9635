"""The sink's broker checks on the driver: Spark asks for a stream's writer at every micro-batch, once to plan it
(that writer is pickled into the batch's tasks) and once to commit it. Deduplication and the topic's schema are read when
a micro-batch is planned and then trusted for a while (a fake clock), the `topic` option's partition count is pinned
for every micro-batch, and a commit asks the broker nothing."""

from __future__ import annotations

import pickle

import pulsar
import pytest
from builders import URLS
from fakes import FakeClock
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from pulsar_throttled_source.admin_endpoint import AdminEndpoint
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName
from pulsar_throttled_source.writing import effectively_once, payload_schema
from pulsar_throttled_source.writing.effectively_once import DEDUP_RECHECK_S, check_deduplication
from pulsar_throttled_source.writing.recent_answers import RecentAnswers
from pulsar_throttled_source.writing.write_options import parse_write_options
from pulsar_throttled_source.writing.writers import PulsarStreamWriter, write_plan

VALUE = StructType([StructField("value", BinaryType(), True)])
TOPIC = "persistent://public/default/t"


class Broker:
    """The admin answers the checks need, and every question asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.partitions = 3
        self.deduplicating = True

    def at(self, endpoint, retry_timeout_s: float = 0.0, known_good: bool = False) -> Broker:
        return self

    def deduplication_enabled(self, topic: TopicName) -> bool:
        self.asked.append(f"deduplication {topic}")
        return self.deduplicating

    def partition_count(self, topic: TopicName) -> int:
        self.asked.append(f"partitions {topic}")
        return self.partitions

    def topic_schema(self, topic: TopicName) -> None:
        self.asked.append(f"schema {topic}")
        return None  # a topic without a schema

    def close(self) -> None:
        pass


@pytest.fixture
def broker(monkeypatch) -> Broker:
    b = Broker()
    monkeypatch.setattr(PulsarAdmin, "at", b.at)
    monkeypatch.setattr(effectively_once, "_CHECKED", RecentAnswers())
    monkeypatch.setattr(payload_schema, "_READ", RecentAnswers())
    return b


def planned(options: dict[str, str], schema: StructType = VALUE) -> PulsarStreamWriter:
    """A micro-batch's plan as Spark makes it: streamWriter(), then the writer pickled (twice: into the tasks' function
    and on its own) and unpickled by a task."""
    writer = PulsarStreamWriter(*write_plan(options, schema, overwrite=False, stream=True))
    shipped = pickle.dumps(writer)
    pickle.dumps(writer)
    return pickle.loads(shipped)


def test_a_stream_checks_deduplication_once_and_pins_partitions_per_micro_batch_and_a_commit_asks_nothing(broker):
    options = URLS | {"topic": "t", "deliveryGuarantee": "effectivelyOnce"}
    first = planned(options)
    assert first.options.pinned_partitions == 3
    # streamWriter() checks the columns against the topic's schema; pickled for the tasks, the writer checks and pins
    assert broker.asked == [f"schema {TOPIC}", f"deduplication {TOPIC}", f"partitions {TOPIC}"]
    committer = PulsarStreamWriter(*write_plan(options, VALUE, overwrite=False, stream=True))  # the commit's writer
    committer.commit([], 0)
    assert broker.asked[3:] == []  # the commit's writer and the commit ask nothing: the plan's schema serves
    broker.partitions = 4  # partitions added between micro-batches: the next batch routes over 4
    second = planned(options)
    assert second.options.pinned_partitions == 4 and first.options.pinned_partitions == 3
    assert broker.asked[3:] == [f"partitions {TOPIC}"]  # deduplication and the schema: trusted from the first batch


def test_a_streams_topic_schema_is_read_again_once_its_reuse_time_is_over(broker):
    clock, topic, admin = FakeClock(0.0), TopicName.parse("t"), AdminEndpoint(URLS["admin.url"])
    for _ in range(2):
        payload_schema.planned_columns(VALUE, topic, admin, reuse_for_s=payload_schema.STREAM_SCHEMA_REUSE_S, clock=clock)
    assert broker.asked == [f"schema {TOPIC}"]
    clock.advance(payload_schema.STREAM_SCHEMA_REUSE_S)
    payload_schema.planned_columns(VALUE, topic, admin, reuse_for_s=payload_schema.STREAM_SCHEMA_REUSE_S, clock=clock)
    payload_schema.planned_columns(VALUE, topic, admin)  # a batch write (no reuse) always reads it
    assert broker.asked == [f"schema {TOPIC}"] * 3


def test_at_least_once_asks_the_driver_only_the_topics_schema_and_a_topic_column_nothing(broker):
    planned(URLS | {"topic": "t"})
    write_plan(URLS | {"topic": "t"}, VALUE, overwrite=False, stream=False)
    assert broker.asked == [f"schema {TOPIC}"] * 2  # the `topic` option's schema, checked against the columns: no more
    # (a batch write reads the schema again: it does not reuse the stream's)
    broker.asked.clear()
    planned(URLS | {"deliveryGuarantee": "effectivelyOnce"}, StructType([*VALUE.fields, StructField("topic", StringType(), True)]))  # a topic column's topics: checked by the tasks
    assert broker.asked == []


def test_a_batch_write_checks_and_pins_when_it_starts(broker):
    options, _ = write_plan(URLS | {"topic": "t", "deliveryGuarantee": "effectivelyOnce", "sinkId": "s"}, VALUE, overwrite=False,
                            stream=False)
    assert options.pinned_partitions == 3 and broker.asked == [f"schema {TOPIC}", f"deduplication {TOPIC}", f"partitions {TOPIC}"]


def test_deduplication_found_on_is_asked_again_after_a_while_and_found_off_is_an_error(broker):
    endpoint = parse_write_options(URLS).admin
    topic, clock = TopicName.parse("t"), FakeClock()
    check_deduplication(endpoint, [topic], clock)
    clock.advance(DEDUP_RECHECK_S - 1)
    check_deduplication(endpoint, [topic], clock)
    assert broker.asked == [f"deduplication {TOPIC}"]
    broker.deduplicating = False  # turned off while the query runs: seen once the last answer is old
    clock.advance(1)
    with pytest.raises(ValueError, match=f"needs message deduplication on topic {TOPIC}, and it is off"):
        check_deduplication(endpoint, [topic], clock)
    with pytest.raises(ValueError):  # and not trusted from then on
        check_deduplication(endpoint, [topic], clock)


def test_a_stream_whose_topic_does_not_deduplicate_fails_when_its_first_micro_batch_is_planned(broker):
    broker.deduplicating = False
    writer = PulsarStreamWriter(*write_plan(URLS | {"topic": "t", "deliveryGuarantee": "effectivelyOnce"}, VALUE, overwrite=False,
                                            stream=True))
    with pytest.raises(ValueError, match="pulsar-admin topics set-deduplication --enable"):
        pickle.dumps(writer)


def test_a_task_keeps_in_flight_what_the_broker_confirmed_in_the_last_quarter_of_the_send_timeout():
    import threading

    from pulsar_throttled_source.writing.confirmations import MIN_IN_FLIGHT, Confirmations

    clock = FakeClock()
    answers = Confirmations(send_timeout_s=4.0, clock=clock)  # a window of 1 s
    for _ in range(MIN_IN_FLIGHT):
        answers.sending()  # a fresh task may always have MIN_IN_FLIGHT in flight
    third = threading.Thread(target=answers.sending)
    third.start()
    third.join(0.2)
    assert third.is_alive() and answers.pending == MIN_IN_FLIGHT  # waits in the task, not in the producer's queue
    answers.callback("t")(pulsar.Result.Ok, None)
    third.join(10)
    assert not third.is_alive() and answers.pending == MIN_IN_FLIGHT
    for _ in range(MIN_IN_FLIGHT):
        answers.callback("t")(pulsar.Result.Ok, None)
    for _ in range(15):  # a fast broker: 26 confirmed within the window
        answers.sending()
        answers.callback("t")(pulsar.Result.Ok, None)
    assert answers.in_flight_allowed() == 26
    clock.advance(1.01)  # none confirmed in the last second (a throttled broker): back to the floor
    assert answers.in_flight_allowed() == MIN_IN_FLIGHT
    answers.callback("t")(pulsar.Result.Timeout, None)
    answers.sent = answers.answered + 2 * MIN_IN_FLIGHT  # over the floor, with a send failed
    answers.sending()  # a failed send lets the task go on (to stop and report it)
    assert Confirmations(send_timeout_s=0.0).in_flight_allowed() == MIN_IN_FLIGHT  # no timeout: sending() never waits


def test_a_task_checks_the_pace_without_the_lock_only_while_the_bound_it_took_holds():
    """The task's thread takes the lock only when its sends reach a bound on the pace or the bound's time runs out
    (an eighth of the window): a broker that stops confirming still holds the task back once the window has passed."""
    import threading

    from pulsar_throttled_source.writing.confirmations import MIN_IN_FLIGHT, Confirmations

    clock = FakeClock()
    answers = Confirmations(send_timeout_s=4.0, clock=clock)  # a window of 1 s
    for _ in range(30):  # a fast broker: 30 confirmed at once
        answers.sending()
        answers.callback("t")(pulsar.Result.Ok, None)
    for _ in range(20):  # the bound taken at 10 in flight: 30, the confirmations within the window
        answers.sending()
    clock.advance(0.2)  # past the bound's time: taken again, the same 30 still within the window
    answers.sending()
    assert answers.pending == 21
    clock.advance(0.81)  # the window has passed with nothing confirmed: the floor, below the 21 in flight; the send waits
    blocked = threading.Thread(target=answers.sending)
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive() and answers.in_flight_allowed() == MIN_IN_FLIGHT
    for _ in range(11):  # the broker answers again: the send goes once fewer are in flight than it confirmed lately
        answers.callback("t")(pulsar.Result.Ok, None)
    blocked.join(10)
    assert not blocked.is_alive() and answers.pending == 21 - 11 + 1


def test_a_named_streams_query_name_is_spark_s_not_an_unknown_option(broker):
    """DataStreamWriter.queryName("...") reaches the sink among its options, as checkpointLocation does."""
    options = URLS | {"topic": "t", "queryName": "enrich-orders", "checkpointLocation": "/tmp/cp"}
    assert str(parse_write_options(options).topic) == TOPIC
    planned(options)


def test_a_send_timing_out_in_the_flush_is_reported_naming_the_topic_and_the_option(monkeypatch):
    from pulsar_throttled_source.writing import write_task
    from pulsar_throttled_source.writing.message_columns import write_columns

    class TimingOut:
        """Sends wait in the queue; the flush gives up, as pulsar-client's does when the send timeout passes."""

        def __init__(self) -> None:
            self.callbacks: list = []

        def send_async(self, value, callback, **_kwargs) -> None:
            self.callbacks.append(callback)

        def flush(self) -> None:
            for callback in self.callbacks:
                callback(pulsar.Result.Timeout, None)
            raise pulsar.Timeout("Pulsar error: TimeOut")

    producer = TimingOut()
    monkeypatch.setattr(write_task, "partition_names", lambda config, topic: [topic])
    monkeypatch.setattr(write_task, "producer_for", lambda config, destination, kwargs: (("k", destination), producer))
    monkeypatch.setattr(write_task, "done_with", lambda keys, failed: None)
    with pytest.raises(write_task.SendFailed, match=f"Sending to {TOPIC} .* failed: Timeout .*'pulsar.producer.sendTimeoutMillis'"):
        write_task.write_rows([(b"a",), (b"b",)], parse_write_options(URLS | {"topic": "t"}), write_columns(VALUE, topic_option=True), task=0)
