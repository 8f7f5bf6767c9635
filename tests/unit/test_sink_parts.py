"""Issue 53, the sink's pure parts: a write's options, its columns made into messages, the partition of a message
(the Java client's key hashing), and the worker's producer cache with its idle expiry (a fake clock)."""

from __future__ import annotations

import datetime as dt

import pulsar
import pytest
from builders import URLS, columns
from fakes import FakeClock
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    Row,
    StringType,
    StructField,
    StructType,
)

from pulsar_throttled_source.schemas.columns import RAW_ARROW_SCHEMA
from pulsar_throttled_source.topics import TopicName
from pulsar_throttled_source.writing.batch_cuts import CutRule
from pulsar_throttled_source.writing.effectively_once import ProducerIdentity, task_identity
from pulsar_throttled_source.writing.message_columns import Message, write_columns
from pulsar_throttled_source.writing.producer_settings import BYTES_NEVER_CUT_BY_CLIENT
from pulsar_throttled_source.writing.producers import ProducerCache
from pulsar_throttled_source.writing.routing import Router, java_string_hash, key_partition
from pulsar_throttled_source.writing.write_options import parse_write_options, refuse_write_options


# -- options -----------------------------------------------------------------------------------------------------
def test_a_write_takes_the_connection_options_and_passes_producer_settings_through():
    o = parse_write_options(URLS | {"topic": "orders", "pulsar.producer.compressionType": "lz4", "pulsar.producer.batching_enabled": "false",
                                    "pulsar.producer.sendTimeoutMillis": "5000", "pulsar.client.operationTimeoutSeconds": "20"})
    assert str(o.topic) == "persistent://public/default/orders"
    kwargs = dict(o.producer.kwargs)
    assert kwargs["compression_type"] == pulsar.CompressionType.LZ4
    assert kwargs["batching_enabled"] is False  # given: never replaced by the sink's default
    assert kwargs["send_timeout_millis"] == 5000 and kwargs["block_if_queue_full"] is True  # the sink's default where not given
    assert ("operation_timeout_seconds", 20) in o.client_kwargs and o.client.service_url == URLS["service.url"]
    assert parse_write_options(URLS).topic is None  # a topic column then


def test_the_send_timeout_and_the_wait_for_confirmations_are_read_from_the_producer_settings():
    def producer(extra: dict[str, str]):
        return parse_write_options(URLS | {"topic": "t"} | extra).producer

    assert (producer({}).send_timeout_s, producer({}).confirmation_wait_s) == (30.0, 60.0)  # pulsar-client's default, + 30 s
    given = producer({"pulsar.producer.sendTimeoutMillis": "5000"})
    assert (given.send_timeout_s, given.confirmation_wait_s) == (5.0, 35.0)
    never = producer({"pulsar.producer.sendTimeoutMillis": "0"})
    assert (never.send_timeout_s, never.confirmation_wait_s) == (0.0, None)  # sends never time out: waits without limit


@pytest.mark.parametrize("extra,expected", [
    ({"startingOffsets": "earliest"}, "Option(s) 'startingOffsets' apply to reads (spark.read, spark.readStream) only"),
    ({"topicsPattern": "a.*"}, "'topicsPattern' apply to reads"),
    ({"pulsar.reader.receiverQueueSize": "10"}, "'pulsar.reader.receiverqueuesize' apply to reads"),
    ({"deliveryGuaranty": "x"}, "Unknown option(s) 'deliveryguaranty' for a write"),
    ({"pulsar.producer.batchingEnabledd": "true"}, "'pulsar.producer.batchingenabledd' is not a setting of pulsar-client's producer; allowed: "),
    ({"pulsar.producer.compressionType": "LZ5"}, "'pulsar.producer.compressiontype': 'LZ5' is not allowed; expected one of NONE, LZ4"),
    ({"pulsar.producer.producerName": "p"}, "'pulsar.producer.producername' cannot be set: every task writes with a producer of its own"),
    ({"pulsar.producer.messageRoutingMode": "CustomPartition"}, "expected RoundRobinDistribution or UseSinglePartition"),
    ({"pulsar.producer.sendTimeoutMillis": "soon"}, "'pulsar.producer.sendtimeoutmillis': 'soon' is not an integer"),
    ({"service.url": "http://x:1"}, "Option 'service.url'"),
    ({"deliveryGuarantee": "exactlyOnce"}, "'deliveryGuarantee': 'exactlyOnce' is not allowed; expected atLeastOnce or effectivelyOnce"),
    ({"deliveryGuarantee": "effectivelyOnce", "pulsar.producer.batchingMaxPublishDelayMs": "5"},
     "'pulsar.producer.batchingMaxPublishDelayMs' cannot be used with deliveryGuarantee=effectivelyOnce: it cuts batches by time"),
    ({"deliveryGuarantee": "effectivelyOnce", "pulsar.producer.batchingType": "KeyBased"}, "'pulsar.producer.batchingType' cannot be KeyBased"),
    ({"deliveryGuarantee": "effectivelyOnce", "pulsar.producer.blockIfQueueFull": "false"},
     "'pulsar.producer.blockIfQueueFull'=false cannot be used with deliveryGuarantee=effectivelyOnce"),
    ({"deliveryGuarantee": "effectivelyOnce", "pulsar.producer.maxPendingMessages": "100"},
     "'pulsar.producer.maxPendingMessages'=100 is below the batch size (1000, option 'pulsar.producer.batchingMaxMessages')"),
    ({"deliveryGuarantee": "effectivelyOnce", "pulsar.producer.batchingMaxMessages": "0"}, "'pulsar.producer.batchingMaxMessages' must be at least 1"),
    ({"sinkId": "a b"}, "Option 'sinkId': 'a b' is not allowed"),
])
def test_bad_write_options_name_the_option_and_what_is_allowed(extra, expected):
    with pytest.raises(ValueError) as err:
        parse_write_options({k.lower(): v for k, v in (URLS | extra).items()})
    assert expected in str(err.value)


def test_effectively_once_cuts_batches_at_fixed_rows_and_names_producers_by_sink_partition_and_cuts():
    o = parse_write_options(URLS | {"deliveryguarantee": "EFFECTIVELYONCE", "sinkid": "orders-backfill"})
    kwargs = dict(o.producer.kwargs)
    assert o.effectively_once and o.sink_id == "orders-backfill" and o.producer.cuts == CutRule(1000, 128 * 1024)
    # Batches on; the client cuts by count only (its byte cut and its publish delay off: the sender cuts by bytes).
    assert kwargs["batching_enabled"] is True and kwargs["batching_max_messages"] == 1000
    assert kwargs["batching_max_allowed_size_in_bytes"] == BYTES_NEVER_CUT_BY_CLIENT and kwargs["batching_max_publish_delay_ms"] >= 86_400_000
    given = parse_write_options(URLS | {"deliveryGuarantee": "effectivelyOnce", "pulsar.producer.batchingMaxMessages": "50",
                                        "pulsar.producer.batchingMaxAllowedSizeInBytes": "4096", "pulsar.producer.maxPendingMessages": "50"})
    assert given.producer.cuts == CutRule(50, 4096)  # given settings honoured as the cuts
    for unbatched in ({"pulsar.producer.batchingenabled": "false"}, {"pulsar.producer.chunkingEnabled": "true"}):
        u = parse_write_options(URLS | {"deliveryGuarantee": "effectivelyOnce"} | unbatched).producer
        assert dict(u.kwargs)["batching_enabled"] is False and u.cuts == CutRule(1, 1) and not u.cuts.batched
    assert dict(parse_write_options(URLS).producer.kwargs)["batching_enabled"] is True  # atLeastOnce batches (Java's default)
    assert parse_write_options(URLS).producer.cuts is None  # atLeastOnce: the client's own cuts (time included)
    identity = task_identity("orders-backfill", 3)  # outside a task: batch 0, as a batch write
    assert identity == ProducerIdentity("orders-backfill-3", 0)
    assert task_identity("orders-backfill", 3, CutRule(1000, 131072).tag).name == "orders-backfill-3-b1000x131072"
    assert CutRule(1, 1).tag == ""  # unbatched: the names of the sends before batching
    ids = [ProducerIdentity("s-0", b).sequence_id(p) for b, p in ((0, 0), (0, 1), (0, 2**32 - 1), (1, 0), (7, 5))]
    assert ids == sorted(ids) and ids[0] > 0 and len(set(ids)) == 5  # increasing across batches; never 0 (the client drops 0)
    with pytest.raises(ValueError, match="needs option 'sinkId' for a batch write"):
        task_identity(None, 0)


def test_a_read_refuses_a_writes_own_options():
    refuse_write_options(URLS | {"topic": "t"})
    with pytest.raises(ValueError, match=r"'deliveryGuarantee' apply to writes"):
        refuse_write_options(URLS | {"deliveryGuarantee": "effectivelyOnce"})
    with pytest.raises(ValueError, match=r"'pulsar.producer.batchingEnabled' apply to writes \(df.write, df.writeStream\) only"):
        refuse_write_options(URLS | {"pulsar.producer.batchingEnabled": "true"})


def test_the_routing_mode_is_the_sinks_own_not_a_producer_argument():
    o = parse_write_options(URLS | {"pulsar.producer.messageRoutingMode": "SinglePartition"})
    assert o.producer.routing_mode == "UseSinglePartition" and "message_routing_mode" not in dict(o.producer.kwargs)


# -- columns -----------------------------------------------------------------------------------------------------
def test_the_readers_own_columns_in_either_layout_write_back_and_read_only_ones_are_ignored():
    from pulsar_throttled_source.schemas.avro_types import spark_type

    raw = StructType([StructField(f.name, spark_type(f.type), True) for f in RAW_ARROW_SCHEMA])
    written = write_columns(raw, topic_option=False)
    t = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    row = Row(key="k", value=bytearray(b"v"), topic="persistent://public/default/a-partition-1", partition=1, messageId=b"id",
              publishTime=t, eventTime=t.astimezone().replace(tzinfo=None), properties={"a": "1"}, orderingKey="o", producerName="p")
    assert written.message(row) == Message("persistent://public/default/a-partition-1", 1, b"v", "k", {"a": "1"}, 1767323045678, "o")

    decoded = columns(("value", StringType()), ("__key", StringType()), ("__eventTime", LongType()), ("__messageId", BinaryType()),
                      ("__messageProperties", MapType(StringType(), StringType())), ("__orderingKey", StringType()))
    written = write_columns(decoded, topic_option=True)
    assert written.message(("é", "k", 1767323045678, b"id", {}, None)) == Message(None, None, "é".encode(), "k", None, 1767323045678, None)
    assert written.message((None, "k", None, None, None, None)).value is None  # a message without payload (a tombstone)


@pytest.mark.parametrize("fields,topic_option,expected", [
    ((("value", BinaryType()), ("extra", StringType()), ("more", IntegerType())), True, "Column(s) 'extra', 'more' cannot be written to Pulsar"),
    ((("key", StringType()),), True, "A write needs a 'value' column"),
    ((("value", BinaryType()),), False, "A write needs option 'topic' or a 'topic' (or '__topic') column"),
    ((("value", IntegerType()),), True, "Column 'value' is int; the message's value takes binary or string"),
    ((("value", BinaryType()), ("key", BinaryType())), True, "Column 'key' is binary; the message's key takes string. Pulsar keys are strings"),
    ((("value", BinaryType()), ("key", StringType()), ("__key", StringType())), True, "Columns 'key' and '__key' both give the message's key"),
    ((("value", BinaryType()), ("properties", MapType(StringType(), IntegerType()))), True, "takes map<string,string>"),
    ((("value", BinaryType()), ("eventTime", StringType())), True, "Column 'eventTime' is string; the message's eventTime takes timestamp or bigint"),
])
def test_columns_a_write_cannot_take_are_named(fields, topic_option, expected):
    with pytest.raises(ValueError) as err:
        write_columns(columns(*fields), topic_option)
    assert expected in str(err.value)


def test_a_null_property_value_is_an_error_naming_the_column():
    written = write_columns(columns(("value", BinaryType()), ("__messageProperties", MapType(StringType(), StringType()))), True)
    with pytest.raises(ValueError, match=r"Column '__messageProperties': a message property cannot be null \(key\(s\) 'a'\)"):
        written.message((b"v", {"a": None}))


# -- routing -----------------------------------------------------------------------------------------------------
def test_keys_hash_as_java_strings_do():
    # java.lang.String.hashCode() of each (jshell): UTF-16 units, so a character outside the BMP counts as two.
    assert [java_string_hash(s) for s in ("", "hello", "k1", "\U0001F600", "polygenelubricants")] == [0, 99162322, 3366, 1772899, -2147483648]
    assert key_partition("polygenelubricants", 3) == 1  # Java: -2147483648 % 3 = -2, made sign-safe: 1


def test_a_router_honours_a_partition_column_routes_keys_and_spreads_the_rest():
    topic = TopicName.parse("t")
    r = Router(topic, 4, task_partition=2, single_partition=False)
    assert r.destination(None, 3, "partition").endswith("t-partition-3")
    assert r.destination("hello", None, "partition").endswith(f"t-partition-{99162322 % 4}")
    assert r.destination("hello", -1, "partition") == r.destination("hello", None, "partition")
    assert [r.destination(None, None, "p")[-1] for _ in range(5)] == ["2", "3", "0", "1", "2"]  # from the task's own partition
    single = Router(topic, 4, task_partition=5, single_partition=True)
    assert {single.destination(None, None, "p") for _ in range(3)} == {"persistent://public/default/t-partition-1"}
    with pytest.raises(ValueError, match="Column '__partition' is 4 but topic persistent://public/default/t has 4 partitions"):
        r.destination(None, 4, "__partition")
    plain = Router(topic, 0, task_partition=0, single_partition=False)
    assert plain.destination("k", -1, "partition") == "persistent://public/default/t"
    with pytest.raises(ValueError, match="is not partitioned"):
        plain.destination(None, 0, "partition")
    named = Router(TopicName.parse("t-partition-2"), 0, task_partition=0, single_partition=False)
    assert named.destination("k", 2, "partition") == "persistent://public/default/t-partition-2"  # as the reader's columns give it
    with pytest.raises(ValueError, match="is partition 2 of persistent://public/default/t"):
        named.destination("k", 1, "partition")


# -- the producer cache ------------------------------------------------------------------------------------------
class FakeProducer:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


def test_producers_are_kept_across_tasks_and_closed_after_an_idle_while_or_a_failure():
    clock = FakeClock()
    cache = ProducerCache(clock=clock, idle_s=60)
    a = cache.producer(("a",), lambda: FakeProducer("a"))
    assert cache.producer(("a",), lambda: FakeProducer("a2")) is a  # the next task reuses it
    b = cache.producer(("b",), lambda: FakeProducer("b"))
    clock.advance(30)
    cache.touch([("b",)])
    clock.advance(31)  # a idle 61 s, b 31 s
    c = cache.producer(("c",), lambda: FakeProducer("c"))
    assert a.closed and not b.closed and not c.closed and len(cache) == 2
    cache.drop([("b",)])  # a task that failed: its producers closed and forgotten
    assert b.closed and cache.producer(("b",), lambda: FakeProducer("b2")).name == "b2"
    cache.close_all()
    assert c.closed and len(cache) == 0


# -- write quotas ------------------------------------------------------------------------------------------------
def test_write_quotas_hold_per_partition_and_window_across_tasks():
    from memory_quota_store import MemoryQuotaStore

    from pulsar_throttled_source.writing.write_quota import PublishPermits, WriteQuota

    clock, store = FakeClock(now=1000.0), MemoryQuotaStore()
    quota = WriteQuota(msgs=20, bytes=-1, period_s=1)
    tasks = [PublishPermits(quota, store, clock=clock, sleep=clock.sleep) for _ in range(2)]
    sent: dict[int, int] = {}
    for i in range(100):  # the two tasks take turns, as two tasks of one write on one partition do
        tasks[i % 2].take("persistent://public/default/t-partition-0", 10)
        window = int(clock())
        sent[window] = sent.get(window, 0) + 1
    assert sum(sent.values()) == 100 and max(sent.values()) <= 20 and len(sent) >= 5
    # Another partition has a bucket of its own; a byte quota holds too.
    tasks[0].take("persistent://public/default/t-partition-1", 10)
    by_bytes = PublishPermits(WriteQuota(msgs=-1, bytes=100, period_s=1), store, clock=clock, sleep=clock.sleep)
    start = int(clock())
    for _ in range(30):
        by_bytes.take("persistent://public/default/u", 10)
    assert int(clock()) - start >= 2  # 300 bytes at 100 a window: three windows


def test_write_quota_options():
    o = parse_write_options(URLS | {"publishThrottlingRateInMsg": "50", "ratePeriodInSecond": "2", "quotaStatePath": "/tmp/q.sqlite"})
    assert (o.quota.msgs, o.quota.bytes, o.quota.period_s, o.quota.sqlite_path) == (50, -1, 2, "/tmp/q.sqlite") and o.quota.limited
    assert not parse_write_options(URLS).quota.limited
    with pytest.raises(ValueError, match="'publishThrottlingRateInByte': '0' is not allowed; expected a positive integer, or -1"):
        parse_write_options(URLS | {"publishthrottlingrateinbyte": "0"})
    with pytest.raises(ValueError, match="'publishThrottlingRateInMsg' apply to writes"):
        refuse_write_options({"publishThrottlingRateInMsg": "5"})


# -- a write task over fake producers ------------------------------------------------------------------------------
class RecordingProducer:
    """Confirms each send at once, except the payloads in `refuse`, which it answers MessageTooBig."""

    def __init__(self, refuse: set[bytes]) -> None:
        self.sent: list[bytes] = []
        self.refuse = refuse
        self.flushed = 0

    def send_async(self, value, callback, **_kwargs) -> None:
        if value in self.refuse:
            callback(pulsar.Result.MessageTooBig, None)
            return
        self.sent.append(value)
        callback(pulsar.Result.Ok, None)

    def flush(self) -> None:
        self.flushed += 1

    def close(self) -> None:
        pass


def test_a_task_stops_at_its_first_failed_send_and_names_the_topic_the_error_and_the_option(monkeypatch):
    from pulsar_throttled_source.writing import write_task

    producer = RecordingProducer({b"v3"})
    monkeypatch.setattr(write_task, "partition_names", lambda config, topic: [topic])
    monkeypatch.setattr(write_task, "producer_for", lambda config, destination, kwargs: (("k", destination), producer))
    monkeypatch.setattr(write_task, "done_with", lambda keys, failed: None)
    options = parse_write_options(URLS | {"topic": "t"})
    written = write_columns(columns(("value", BinaryType())), topic_option=True)
    ok = write_task.write_rows([(b"a",), (b"b",)], options, written, task=0)
    assert ok.messages == {"persistent://public/default/t": 2} and producer.flushed == 1
    producer.sent.clear()
    with pytest.raises(write_task.SendFailed) as err:
        write_task.write_rows([(f"v{i}".encode(),) for i in range(6)], options, written, task=0)
    assert producer.sent == [b"v0", b"v1", b"v2"]  # nothing after the failed send (a later one would hide it from deduplication)
    assert "Sending to persistent://public/default/t at pulsar://localhost:6650 failed: MessageTooBig" in str(err.value)
    assert "'pulsar.producer.chunkingEnabled=true'" in str(err.value)


def test_a_producer_that_cannot_be_created_is_worded_alike_by_both_senders_without_the_secret():
    from pulsar.exceptions import AuthorizationError

    from pulsar_throttled_source.writing.write_task import producer_error

    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3cml0ZXIifQ.c2lnbmF0dXJl"
    o = parse_write_options(URLS | {"topic": "t", "pulsar.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                                    "pulsar.client.authParams": f"token:{jwt}"})
    destination = "persistent://public/default/t-partition-1"
    by_python = str(producer_error(destination, o, AuthorizationError(f"token:{jwt} may not produce")))
    by_native = str(producer_error(destination, o, "AuthorizationError"))  # libpulsar's result name
    for text in (by_python, by_native):
        assert text.startswith(f"Cannot create a producer on {destination} at pulsar://localhost:6650: AuthorizationError")
        assert "pulsar-admin namespaces grant-permission" in text and jwt not in text
    assert "may not produce" in by_python
    other = str(producer_error(destination, o, "unsupported producer setting: x"))
    assert other.endswith("(check option 'service.url', the authentication options and the pulsar.producer.* settings).")


def test_a_writes_options_show_no_secret():
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3cml0ZXIifQ.c2lnbmF0dXJl"
    o = parse_write_options(URLS | {"topic": "t", "pulsar.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                                    "pulsar.client.authParams": f"token:{jwt}", "quotaStore": "redis://localhost:6379/0",
                                    "quotaStorePassword": "hunter2"})
    assert o.credentials is not None and o.credentials.client_params() == f"token:{jwt}"
    shown = repr(o) + repr(o.client) + str(o.quota)
    assert jwt not in shown and "hunter2" not in shown


def test_what_spark_adds_to_a_writers_options_is_not_refused():
    """save(path), checkpointLocation and a stream's queryName reach the sink as options (examples/enrich_topic.py names its query)."""
    o = parse_write_options(URLS | {"topic": "t", "path": "p", "checkpointLocation": "/chk", "queryName": "enrich"})
    assert str(o.topic) == "persistent://public/default/t"
