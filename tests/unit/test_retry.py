"""The one retry policy (pulsar_throttled_source.retry) on a fake clock, and reader opening with it."""

from __future__ import annotations

import logging
import time

import pulsar
import pytest
from fakes import FakeClock

from pulsar_throttled_source.credentials import TokenAuth
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.positions import BEFORE_EARLIEST, EntryPosition
from pulsar_throttled_source.read_task import ClientConfig, PartitionRange
from pulsar_throttled_source.reading import reader_calls, receiver_queue
from pulsar_throttled_source.retry import (
    GaveUp,
    Outage,
    admin_failure_retried,
    call_with_retries,
    client_error_transient,
    http_status_transient,
    ownership_moving,
)


class Flaky:
    """Fails with `errors` in order, then answers "ok"; each attempt takes `takes_s` on the clock."""

    def __init__(self, clock: FakeClock, errors: list[BaseException], takes_s: float = 0.0) -> None:
        self.clock, self.errors, self.takes_s, self.calls = clock, list(errors), takes_s, 0

    def __call__(self) -> str:
        self.calls += 1
        self.clock.now += self.takes_s
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _retry(flaky: Flaky, outage: Outage, retries: list | None = None) -> str:
    def on_retry(error: BaseException, attempt: int, delay: float) -> None:
        if retries is not None:
            retries.append((type(error).__name__, attempt, delay))

    return call_with_retries(flaky, outage, lambda e: isinstance(e, ConnectionError), on_retry, sleep=flaky.clock.sleep)


def test_backoff_doubles_from_half_a_second_up_to_five():
    clock = FakeClock()
    flaky = Flaky(clock, [ConnectionError()] * 7)
    retries: list = []
    assert _retry(flaky, Outage(60, clock=clock), retries) == "ok"
    assert clock.slept == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert retries == [("ConnectionError", n, d) for n, d in enumerate(clock.slept, start=1)]


def test_gives_up_when_the_budget_runs_out_never_sleeping_past_it():
    clock = FakeClock()
    flaky = Flaky(clock, [ConnectionError(f"down {i}") for i in range(100)])
    with pytest.raises(GaveUp) as gave_up:
        _retry(flaky, Outage(10, clock=clock))
    assert clock.slept == [0.5, 1.0, 2.0, 4.0, 2.5]  # the last wait ends at the budget's end
    assert sum(clock.slept) == 10 and flaky.calls == 6
    assert str(gave_up.value.last) == "down 5" and gave_up.value.budget_s == 10


def test_what_is_not_transient_is_raised_at_once():
    clock = FakeClock()
    flaky = Flaky(clock, [ConnectionError(), ValueError("bad input")])
    with pytest.raises(ValueError, match="bad input"):
        _retry(flaky, Outage(60, clock=clock))
    assert flaky.calls == 2 and clock.slept == [0.5]


def test_an_outage_budget_runs_from_its_first_failure_and_is_shared():
    clock = FakeClock()
    outage = Outage(3, clock=clock)
    clock.now += 100  # time before the outage does not count
    assert _retry(Flaky(clock, [ConnectionError()] * 2), outage) == "ok"
    assert clock.slept == [0.5, 1.0]  # the outage goes on (the caller ends it on an answer)
    with pytest.raises(GaveUp):
        _retry(Flaky(clock, [ConnectionError()] * 10), outage)
    assert sum(clock.slept) == 3
    flaky = Flaky(clock, [ConnectionError()])
    with pytest.raises(GaveUp):  # still the same outage: spent
        _retry(flaky, outage)
    assert flaky.calls == 1
    assert outage.ended() == pytest.approx(3)
    assert outage.ended() is None
    assert _retry(Flaky(clock, [ConnectionError()]), outage) == "ok"  # a new outage, a new budget


def test_a_budget_from_now_counts_the_attempts_themselves():
    """Opening a reader waits at most pollTimeoutMs in all, however long each attempt takes."""
    clock = FakeClock()
    flaky = Flaky(clock, [ConnectionError()] * 10, takes_s=2.0)
    with pytest.raises(GaveUp):
        _retry(flaky, Outage(5, from_now=True, clock=clock))
    assert flaky.calls == 3 and clock.slept == [0.5, 0.5]


def test_what_counts_as_transient():
    assert http_status_transient(500, "GET", "") and http_status_transient(503, "GET", "anything")
    assert not http_status_transient(404, "GET", "") and not http_status_transient(401, "HEAD", "")
    assert ownership_moving(412, "GET", "Can't find owner for topic") and ownership_moving(503, "GET", "bundle is being unloaded")
    assert ownership_moving(307, "GET", "Namespace bundle is not served by this broker")
    assert not ownership_moving(412, "GET", "Partitioned topic does not have any partitions")
    assert all(ownership_moving(status, "HEAD", "") for status in (307, 412, 503))  # no body to give a reason
    assert not ownership_moving(409, "HEAD", "")

    # Lookups only; after a first answer, on a URL known good, or on a broker's own answer; never without a budget.
    assert admin_failure_retried("GET", 30, answered=True, from_broker=False)
    assert admin_failure_retried("HEAD", 30, answered=False, from_broker=True)
    assert not admin_failure_retried("GET", 30, answered=False, from_broker=False)
    assert not admin_failure_retried("GET", 0, answered=True, from_broker=True)
    assert not any(admin_failure_retried(m, 30, answered=True, from_broker=True) for m in ("PUT", "POST", "DELETE"))

    assert all(client_error_transient(e) for e in (pulsar.ConnectError("x"), pulsar.Timeout("x"), pulsar.LookupError("x"),
                                                   pulsar.ServiceUnitNotReady("x"), pulsar.NotConnected("x")))
    assert not client_error_transient(pulsar.AuthenticationError("x")) and not client_error_transient(ValueError())


# -- opening a reader --------------------------------------------------------------------------
TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.s1gnature"


class FakeClient:
    def __init__(self, errors: list[BaseException]) -> None:
        self.errors = errors
        self.opened: list[tuple] = []

    def create_reader(self, topic: str, start: object, **kwargs: object) -> str:
        self.opened.append((topic, start, kwargs))
        if self.errors:
            raise self.errors.pop(0)
        return "reader"


@pytest.fixture
def fake_client(monkeypatch):
    client = FakeClient([])
    dropped: list[ClientConfig] = []
    monkeypatch.setattr(reader_calls, "client_for", lambda config: client)
    monkeypatch.setattr(reader_calls, "drop_client", dropped.append)
    return client, dropped


def _part(poll_timeout_ms: int) -> PartitionRange:
    config = ClientConfig("pulsar://broker:6650", (), (("reader_name", "r"),), TokenAuth(token=TOKEN), poll_timeout_ms, 100)
    return PartitionRange("persistent://public/default/t-partition-0", 0, BEFORE_EARLIEST, EntryPosition(1, 2), 3, config)


def test_opening_a_reader_waits_for_a_restarting_broker_on_fresh_clients(fake_client, caplog):
    client, dropped = fake_client
    client.errors = [pulsar.ConnectError("connection refused"), pulsar.ServiceUnitNotReady("not ready")]
    caplog.set_level(logging.WARNING, logger="pulsar_throttled_source.reading.reader_calls")
    part = _part(10_000)
    assert reader_calls.open_reader(part, "earliest") == "reader"
    assert len(client.opened) == 3 and len(dropped) == 2  # every failure drops the client
    assert client.opened[0][2] == {"receiver_queue_size": 3, "reader_name": "r"}  # the range's 3 entries (unthrottled)
    warnings = [r.getMessage() for r in caplog.records]
    assert "(ConnectError); retry 1 in 0.5 s (waiting up to pollTimeoutMs=10000 ms)" in warnings[0]
    assert "retry 2 in 1.0 s" in warnings[1]


def test_opening_a_reader_gives_up_after_poll_timeout(fake_client):
    client, dropped = fake_client
    client.errors = [pulsar.ConnectError(f"connection refused, token {TOKEN}") for _ in range(20)]
    started = time.monotonic()
    with pytest.raises(RuntimeError) as error:
        reader_calls.open_reader(_part(1_200), "earliest")
    assert 1.2 <= time.monotonic() - started < 3
    message = str(error.value)
    assert message.startswith("Cannot open a reader on persistent://public/default/t-partition-0 at pulsar://broker:6650")
    assert "Check option 'service.url'" in message and "Gave up after retrying for 1200 ms (option 'pollTimeoutMs')" in message
    assert TOKEN not in message and "***" in message
    assert len(dropped) == len(client.opened) >= 2


def test_opening_a_reader_fails_at_once_on_what_a_retry_cannot_fix(fake_client):
    client, dropped = fake_client
    client.errors = [pulsar.AuthenticationError(f"bad token {TOKEN}")]
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"bad token \*\*\*\. Check option 'service.url'.*'pulsar.client.authPluginClassName' and 'pulsar.client.authParams'\.$"):
        reader_calls.open_reader(_part(30_000), "earliest")
    assert time.monotonic() - started < 0.5 and len(client.opened) == 1 and len(dropped) == 1


def test_a_throttled_reader_asks_the_broker_for_a_sixteenth_of_its_range_at_a_time():
    """Issue 32: the broker reads as many entries as the reader has permits, ahead of what the task has
    consumed; what it read past the range is read again when the next task misses the parked reader."""
    throttled = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100, read_ahead_share=16)
    unthrottled = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100)

    def part(entries: int, config: ClientConfig) -> PartitionRange:
        return PartitionRange("persistent://public/default/t-partition-0", 0, BEFORE_EARLIEST, EntryPosition(1, 2), entries, config)
    sizes = (0, 1, 32, 33, 500, 160_000, 2_000_000)
    assert [receiver_queue.receiver_queue_for(part(n, throttled)) for n in sizes] == [2, 2, 2, 3, 32, 10_000, 10_000]
    assert [receiver_queue.receiver_queue_for(part(n, unthrottled)) for n in sizes] == [2, 2, 32, 33, 500, 10_000, 10_000]


def test_an_unthrottled_reader_of_a_batched_topic_queues_a_long_range_in_messages():
    """Issue 44: the broker reads min(permits, 100) entries at a time and again only once the reader's messages
    in flight fall below its queue: a queue of a long range's entries, on a batched topic fewer messages than one
    read brings, had each task wait on every read. A range of at most 100 entries comes in one read of exactly
    its entries; under quotas the entries still bound what is read ahead."""
    throttled = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100, read_ahead_share=16)
    unthrottled = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100)

    def part(entries: int, config: ClientConfig, per_entry: float) -> PartitionRange:
        return PartitionRange("persistent://public/default/t-partition-0", 0, BEFORE_EARLIEST, EntryPosition(1, 2),
                              entries, config, msgs_per_entry=per_entry)
    assert [receiver_queue.receiver_queue_for(part(n, unthrottled, 628.0)) for n in (-1, 0, 1, 10, 100, 101, 199)] == \
        [2, 2, 2, 10, 100, 10_000, 10_000]
    assert receiver_queue.receiver_queue_for(part(150, unthrottled, 2.5)) == 375
    assert receiver_queue.receiver_queue_for(part(151, unthrottled, 2.5)) == 378  # 377.5 messages, rounded up
    assert receiver_queue.receiver_queue_for(part(150, unthrottled, 0.5)) == 150  # an estimate below 1 counts as 1
    assert [receiver_queue.receiver_queue_for(part(n, throttled, 628.0)) for n in (1, 199, 500)] == [2, 13, 32]
    # Large messages: the messages in flight stay within 8 MiB, never below a queue of the range's entries.
    def sized(entries: int, per_entry: float, entry_bytes: float) -> int:
        return receiver_queue.receiver_queue_for(PartitionRange(
            "persistent://public/default/t-partition-0", 0, BEFORE_EARLIEST, EntryPosition(1, 2), entries, unthrottled,
            msgs_per_entry=per_entry, entry_bytes=entry_bytes))
    assert sized(199, 628.0, 62_800.0) == 10_000  # 100 B messages: 10,000 of them are ~1 MB
    assert sized(200, 100.0, 1_048_576.0) == 800  # 10 kB messages: 8 MiB of them
    assert sized(200, 10.0, 10_485_760.0) == 200  # 1 MB messages: the range's entries, as before
    # A range carries its estimate through a cut inside its entries (a batch query's batchIndex bounds).
    assert part(10, unthrottled, 628.0).inside_entries(None, None).msgs_per_entry == 628.0


def test_only_a_throttled_query_reads_ahead_by_a_sixteenth():
    def share(**options: str) -> int:
        opts = parse_options({"service.url": "pulsar://b:6650", "admin.url": "http://b:8080", "topic": "t", **options})
        return opts.read_task_config(None).read_ahead_share
    assert share() == 1
    assert share(dispatchThrottlingRatePerTopicInMsg="100") == 16
    assert share(quotaSource="broker") == 16


def test_a_reader_that_may_get_undecrypted_batches_keeps_a_range_deep_queue():
    """An undecrypted batch gives one permit back for its many messages: a shallow queue would stall."""
    config = ClientConfig("pulsar://broker:6650", (), (), None, 1000, 100, crypto_failure_action="consume")

    def part(entries: int) -> PartitionRange:
        return PartitionRange("persistent://public/default/t-partition-0", 0, BEFORE_EARLIEST, EntryPosition(1, 2), entries, config)
    assert [receiver_queue.receiver_queue_for(part(n)) for n in (0, 64, 500, 2_000_000)] == [64, 64, 500, 10_000]
