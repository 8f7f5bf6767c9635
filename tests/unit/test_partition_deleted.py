"""Issue 32: a call to the broker that a deleted topic keeps from answering ends as PartitionDeleted
once the range's entries are all gone, instead of after the client's timeouts and pollTimeoutMs."""

from __future__ import annotations

import threading

import pulsar
import pytest
from fakes import FakeReader

from pulsar_throttled_source.reading import watch
from pulsar_throttled_source.reading.read_errors import PartitionDeleted


def test_a_watched_call_ends_once_the_range_is_gone_and_what_it_opens_later_is_closed(monkeypatch):
    monkeypatch.setattr(watch, "GONE_CHECK_S", 0.01)
    release, reader = threading.Event(), FakeReader()
    checks = []

    def slow_open() -> FakeReader:  # the client retrying "topic temporarily unavailable" by itself
        release.wait(10)
        return reader

    def gone() -> bool:
        checks.append(1)
        return len(checks) >= 3

    with pytest.raises(PartitionDeleted, match="deleted while it was read"):
        watch.unless_gone(slow_open, gone)()
    assert len(checks) == 3  # asked while the call was still waiting, not after it
    release.set()
    for _ in range(500):
        if reader.closed:
            break
        threading.Event().wait(0.01)
    assert reader.closed


def test_a_failure_ends_as_partition_deleted_only_when_the_range_is_gone():
    def failing() -> None:
        raise pulsar.Timeout("lookup timed out")

    with pytest.raises(PartitionDeleted):
        watch.unless_gone(failing, lambda: True, watch=False)()
    with pytest.raises(pulsar.Timeout):
        watch.unless_gone(failing, lambda: False, watch=False)()
    with pytest.raises(pulsar.Timeout):  # watched the same way
        watch.unless_gone(failing, lambda: False)()
    assert watch.unless_gone(lambda: 7, lambda: True)() == 7  # an answer is an answer


def test_a_non_transient_failure_is_not_asked_about():
    asked = []

    def broken() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        watch.unless_gone(broken, lambda: asked.append(1) or True, watch=False)()
    assert asked == []


def test_an_admin_api_that_cannot_answer_is_not_taken_for_a_deletion(monkeypatch):
    monkeypatch.setattr(watch, "GONE_CHECK_S", 0.01)

    def unreachable() -> bool:
        raise ConnectionError("admin API down too (a broker restart)")

    def failing() -> None:
        raise pulsar.ConnectError("broker restarting")

    with pytest.raises(pulsar.ConnectError):  # left to the retry policy, as before
        watch.unless_gone(failing, unreachable, watch=False)()
    release = threading.Event()
    threading.Timer(0.1, release.set).start()
    assert watch.unless_gone(lambda: release.wait(5) and "opened", unreachable)() == "opened"


def test_topic_not_found_opening_a_reader_is_a_deletion_once_the_range_is_gone():
    """A reader opened once the partitioned topic's metadata is gone fails with TopicNotFound at once:
    reported as the deletion (failOnDataLoss decides), not as an error that fails the query either way."""
    def opening() -> None:
        raise pulsar.TopicNotFound("Cannot open a reader on orders-partition-1")

    with pytest.raises(PartitionDeleted):
        watch.unless_gone(opening, lambda: True)()
    with pytest.raises(pulsar.TopicNotFound):
        watch.unless_gone(opening, lambda: False)()
