"""The reader for PySpark 4.0/4.1 (no admission control: latestOffset() takes no start), driven
through the call sequences those Spark versions make (measured on 4.0.5 and 4.1.4): a fresh query,
a restart after a finished batch (partitions(end, end) first), a restart that re-runs an
unfinished batch. Each batch must start where the last one ended and stay inside the quota."""

from __future__ import annotations

import logging

from builders import P0, P1, layout, positions
from builders import reader40 as reader
from fakes import FakeCatalog, FakeClock


def test_a_fresh_query_starts_at_the_initial_offset_and_each_batch_follows_the_last(tmp_path, caplog):
    clock = FakeClock(3_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock)
    with caplog.at_level(logging.WARNING, logger="pulsar_throttled_source"):
        first = r.latestOffset()  # Spark 4.0/4.1 ask for it before initialOffset()
    assert "Trigger.AvailableNow and Trigger.Once read one throttled micro-batch" in caplog.text
    assert r.initialOffset() == r.initialOffset()
    assert positions(first) == {P0: (5, 9)}
    assert r.partitions(r.initialOffset(), first)
    assert r.latestOffset() == first  # same window: quota spent, no new batch
    clock.now = 3_001.0
    second = r.latestOffset()
    assert positions(second) == {P0: (5, 19)}
    clock.now = 3_002.0
    assert positions(r.latestOffset()) == {P0: (5, 24)}


def test_a_restart_continues_from_the_offset_spark_last_saw(tmp_path):
    clock = FakeClock(4_000.1)
    catalog = FakeCatalog(layout(P0, [(5, 30)]), layout(P1, [(6, 30)]))
    first = reader(tmp_path, catalog, clock, dispatchThrottlingRatePerTopicInMsg=8)
    end = first.latestOffset()
    clock.now = 4_001.0
    restarted = reader(tmp_path, catalog, clock, dispatchThrottlingRatePerTopicInMsg=8)
    assert restarted.partitions(end, end) == []  # Spark's setLatestSeenOffset: no tasks
    following = restarted.latestOffset()
    assert positions(end) == {P0: (5, 7), P1: (6, 7)}  # the topic quota holds for each partition
    assert positions(following) == {P0: (5, 15), P1: (6, 15)}


def test_a_restart_that_re_runs_an_unfinished_batch_continues_after_it(tmp_path):
    clock = FakeClock(5_000.1)
    catalog = FakeCatalog(layout(P0, [(5, 30)]))
    first = reader(tmp_path, catalog, clock)
    start = first.initialOffset()
    end = first.latestOffset()
    clock.now = 5_001.0
    restarted = reader(tmp_path, catalog, clock)
    restarted.partitions(end, end)
    (task,) = restarted.partitions(start, end)  # the batch Spark re-runs
    assert task.entries == 10
    assert positions(restarted.latestOffset()) == {P0: (5, 19)}


def test_max_entries_per_trigger_caps_each_batch(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 30)])), FakeClock(6_000.1),
               dispatchThrottlingRatePerTopicInMsg=-1, maxEntriesPerTrigger=4)
    assert positions(r.latestOffset()) == {P0: (5, 3)}
    assert positions(r.latestOffset()) == {P0: (5, 7)}
