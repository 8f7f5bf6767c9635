"""Topic names: every legal Pulsar name reaches the admin REST API intact."""

from __future__ import annotations

import pytest

from pulsar_throttled_source.topics import TopicName


@pytest.mark.parametrize("local, encoded", [
    ("orders", "orders"),
    ("hash#tag", "hash%23tag"),
    ("q?x=1", "q%3Fx%3D1"),
    ("pct%41", "pct%2541"),
    ("sp ace", "sp%20ace"),
])
def test_rest_path_percent_encodes_each_name(local: str, encoded: str) -> None:
    topic = TopicName.parse(f"persistent://ten#ant/n?s/{local}")
    assert topic.rest_path == f"persistent/ten%23ant/n%3Fs/{encoded}"
    assert str(topic) == f"persistent://ten#ant/n?s/{local}"  # the name itself is never changed


def test_partition_of_a_special_name_keeps_its_index() -> None:
    part = TopicName.parse("hash#tag").partition(3)
    assert part.partition_index == 3 and part.base == TopicName.parse("hash#tag")
    assert part.rest_path.endswith("/hash%23tag-partition-3")
