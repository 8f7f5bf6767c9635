"""A named topic that does not exist fails at load() (schemas/topic_schema.value_schema_for, the one admin session
load() opens), decided as planning decides it: partitioned metadata asked with auto-creation off, and for 0
partitions (Pulsar's answer for a missing topic too) the topic's own ledgers; a 404 is never retried. Against the
scripted admin API of tests/unit/scripted_admin.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from builders import URLS
from scripted_admin import Scripted, scripted_admin_api, url_of

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.metadata.catalog import check_topics_exist
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.schemas.topic_schema import value_schema_for
from pulsar_throttled_source.topics import TopicName

NO_SUCH_TOPIC = (404, b'{"reason": "Topic not found"}')


@pytest.fixture
def api() -> Iterator[ThreadingHTTPServer]:
    """The scripted admin API (tests/unit/scripted_admin.py), fresh per test."""
    with scripted_admin_api() as server:
        yield server


def _check(server, *names: str) -> list[str]:
    """check_topics_exist on `names` with a retry budget (which a 404 must not use): the paths asked."""
    Scripted.seen = []
    admin = PulsarAdmin(url_of(server), timeout_s=2, retry_timeout_s=30)
    try:
        check_topics_exist(admin, [TopicName.parse(n) for n in names])
    finally:
        admin.close()
    return [path for _, path in Scripted.seen]


def test_partitioned_and_non_partitioned_topics_exist(api):
    Scripted.statuses = [(200, b'{"partitions": 3}')]
    assert _check(api, "orders") == ["/admin/v2/persistent/public/default/orders/partitions?checkAllowAutoCreation=false"]
    Scripted.statuses = [(200, b'{"partitions": 0}'), (200, b'{"ledgers": []}')]  # 0 partitions: is it stored?
    assert _check(api, "orders") == ["/admin/v2/persistent/public/default/orders/partitions?checkAllowAutoCreation=false",
                                                "/admin/v2/persistent/public/default/orders/internalStats"]


@pytest.mark.parametrize("answers", [[(200, b'{"partitions": 0}'), NO_SUCH_TOPIC], [NO_SUCH_TOPIC]],
                         ids=["0-partitions-and-no-ledgers", "404"])
def test_a_missing_topic_fails_at_once_naming_it_and_its_namespace(api, answers):
    Scripted.statuses = list(answers)
    started = time.monotonic()
    with pytest.raises(ValueError) as e:
        _check(api, "persistent://acme/orders/no-such-topic")
    message = str(e.value)
    assert message.startswith(f"Topic persistent://acme/orders/no-such-topic does not exist in namespace acme/orders on {url_of(api)}")
    assert "neither partitioned nor non-partitioned" in message and "never creates topics" in message
    assert len(Scripted.seen) == len(answers) and time.monotonic() - started < 2  # no retries for a 404


def test_only_the_missing_topics_are_named(api):
    Scripted.statuses = [(200, b'{"partitions": 2}'), (200, b'{"partitions": 0}'), NO_SUCH_TOPIC, NO_SUCH_TOPIC]
    with pytest.raises(ValueError, match=r"^Topics persistent://public/default/b, persistent://acme/x/c do not exist in "
                                         r"namespace\(s\) public/default, acme/x on "):
        _check(api, "a", "b", "persistent://acme/x/c")


def test_load_checks_named_topics_even_without_schema_decoding_but_not_a_pattern(api):
    urls = {**URLS, "admin.url": url_of(api)}
    Scripted.statuses = [NO_SUCH_TOPIC]
    with pytest.raises(ValueError, match="Topic persistent://public/default/gone does not exist in namespace public/default"):
        value_schema_for(parse_options({**urls, "topic": "gone", "decodeschema": "false"}))
    Scripted.statuses, Scripted.seen = [(200, b'{"partitions": 2}')], []
    assert value_schema_for(parse_options({**urls, "topic": "there", "decodeschema": "false"})) is None
    assert len(Scripted.seen) == 1  # the existence check only: no schema asked
    # A pattern names no topic: a namespace with no match yet is a query waiting for its topics.
    Scripted.statuses, Scripted.seen = [(200, b"[]")], []
    assert value_schema_for(parse_options({**urls, "topicspattern": "persistent://public/default/x-.*"})) is None
    assert [path for _, path in Scripted.seen] == ["/admin/v2/persistent/public/default"]
