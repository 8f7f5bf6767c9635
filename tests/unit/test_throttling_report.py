"""Unit tests of the messages of known entries (backlog_values) and of the report wording (throttling/report.py)."""

from __future__ import annotations

import math

import pytest

from pulsar_throttled_source.backlog_values import BacklogValues
from pulsar_throttled_source.throttling.buckets import Bucket, BucketSpec
from pulsar_throttled_source.throttling.demands import SOURCE_LEVEL, SUBSCRIPTION_LEVEL, TOPIC_LEVEL
from pulsar_throttled_source.throttling.report import human_bytes, level_reports, listing, number


def test_entry_messages_are_exact_for_known_entries_and_priced_by_their_neighbours_beyond() -> None:
    known = BacklogValues((10, 10, 1, 3))
    assert [known.total(k) for k in range(5)] == [0, 10, 20, 21, 24]
    assert known.per_entry == 6.0 and known.total(6) == 24 + 2 * 6.0
    assert BacklogValues().per_entry is None and BacklogValues().total(3) == 3.0
    assert BacklogValues((0, 0)).per_entry == 1.0  # markers only: an entry still counts as one
    sampled = BacklogValues((10, 10), ((4, 20), (6, 20), (9, 1)))  # entries looked up further on
    assert [sampled.total(k) for k in (3, 5, 7, 9, 10)] == [35, 70, 110, 131, 132]  # equal neighbours: theirs; else the mean
    assert sampled.total(12) == 134  # past the last one: the last stretch's count, not the mean of all
    assert BacklogValues((), ((0, 7.5),)).total(2) == 15 and BacklogValues((), ((0, 7.5),)).per_entry == 7.5


@pytest.mark.parametrize(
    ("value", "text"),
    [(20.0, "20"), (2.4999999, "2.5"), (2.5, "2.5"), (1 / 3, "0.3"), (math.inf, "unlimited")],
)
def test_number(value: float, text: str) -> None:
    assert number(value) == text


def test_human_bytes_and_listing() -> None:
    assert human_bytes(500) == "500 B"
    assert human_bytes(2048) == "2.0 KiB"
    assert human_bytes(3 * 1024**3) == "3.0 GiB"
    assert human_bytes(5 * 1024**4) == "5120.0 GiB"
    assert listing(["a", "b"]) == "a, b"
    assert listing([str(i) for i in range(10)], limit=3) == "0, 1, 2, and 7 more"


def test_level_reports_group_by_label_in_level_order() -> None:
    def bucket(level: str, label: str, charged: float) -> Bucket:
        b = Bucket(BucketSpec(f"{label}:{charged}", level, label, 1, 100.0, math.inf), 1000, 0.0, 0.0)
        b.charge(charged, 10 * charged)
        return b

    reports = level_reports(
        [
            bucket(SUBSCRIPTION_LEVEL, "subscription", 1),
            bucket(TOPIC_LEVEL, "broker topic", 2),
            bucket(TOPIC_LEVEL, "topic", 3),
            bucket(TOPIC_LEVEL, "topic", 4),
            bucket(SOURCE_LEVEL, SOURCE_LEVEL, 5),
        ]
    )
    assert [(r.label, r.buckets, r.charged_msgs, r.charged_bytes) for r in reports] == [
        (SOURCE_LEVEL, 1, 5.0, 50.0),
        ("topic", 2, 7.0, 70.0),
        ("broker topic", 1, 2.0, 20.0),
        ("subscription", 1, 1.0, 10.0),
    ]
    assert reports[1].quota_msgs == 200.0
