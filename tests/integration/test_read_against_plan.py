"""Issue 12 (item 7): a read task checks what it reads against its plan. Entries deleted between
planning and reading follow failOnDataLoss at once (no pollTimeoutMs wait), and a task never
opens a reader on a partition that was deleted (the broker's auto-creation would bring it back).

Planning and reading are driven directly (the driver's reader, then the executor's read_range in
this process) so that the deletion lands exactly between the two."""

from __future__ import annotations

import logging
import time

import pytest
from helpers import create_topic, produce, trim_everything
from pyspark.sql.streaming.datasource import ReadAllAvailable
from streaming import source_options

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.reading.read import read_ranges
from pulsar_throttled_source.reading.read_errors import DataLossError
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName


def plan(broker, topic: str, **extra):
    opts = source_options(broker, topic, startingOffsets="earliest", **extra)
    reader = AdmissionControlStreamReader(parse_options({k.lower(): str(v) for k, v in opts.items()}))
    start = reader.initialOffset()
    return reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))


def read_all(parts) -> list[bytes]:
    return [row["value"] for part in parts for batch in read_ranges(part) for row in batch.to_pylist()]


def test_entries_deleted_between_planning_and_reading(broker, admin, pulsar_client, unique, caplog):
    topic = create_topic(admin, f"plan-trim-{unique}", 0)
    produce(pulsar_client, topic, 120)  # 3 ledgers
    strict, lenient = plan(broker, topic), plan(broker, topic, failOnDataLoss="false")
    assert read_all(plan(broker, topic))  # the plan reads while the data is there
    trim_everything(admin, topic)
    started = time.monotonic()
    with pytest.raises(DataLossError, match=rf"120 planned entries of {topic} \(.*\) are no longer stored.*failOnDataLoss=false"):
        read_all(strict)
    caplog.set_level(logging.WARNING, logger="pulsar_throttled_source.reading.read_errors")
    assert read_all(lenient) == []
    assert any("continuing without them" in r.getMessage() for r in caplog.records)
    assert time.monotonic() - started < 30  # pollTimeoutMs is 120 s: nothing waited for the deleted entries


def test_partition_deleted_between_planning_and_reading_is_not_recreated(broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"plan-deleted-{unique}", 2)
    produce(pulsar_client, topic, 40)
    parts = plan(broker, topic)
    assert len(parts) == 2
    admin.delete_topic(TopicName.parse(topic), partitioned=True)
    for part in parts:
        with pytest.raises(DataLossError, match=rf"{part.partition} .* no longer stored \(the partition was deleted after planning\)"):
            read_all([part])
    assert not [t for t in admin.list_topics("public/default") if t.startswith(topic)], "a read task re-created the topic"


def test_batch_replayed_after_a_restart_whose_ledgers_were_deleted(broker, admin, pulsar_client, unique):
    """A restart re-runs the batch Spark had not committed, with its checkpointed range: ledgers deleted
    since then are reported when the batch's tasks are planned, not silently left out."""
    topic = create_topic(admin, f"plan-replay-{unique}", 0)
    produce(pulsar_client, topic, 120)
    opts = {k.lower(): str(v) for k, v in source_options(broker, topic, startingOffsets="earliest").items()}
    first_run = AdmissionControlStreamReader(parse_options(opts))
    start = first_run.initialOffset()
    end = first_run.latestOffset(start, ReadAllAvailable())
    trim_everything(admin, topic)
    with pytest.raises(DataLossError, match=rf"Data loss in {topic}: the entries after \d+:-1 and before \d+:\d+"):
        AdmissionControlStreamReader(parse_options(opts)).partitions(start, end)
