"""The driver-side planner (the 4.2+ AdmissionControlStreamReader) on fake layouts and a fake clock: offsets per
micro-batch, read limits, quotas, transactions, AvailableNow, deleted topics, task splitting.
Against a real broker the same paths run in tests/integration; here each rule is pinned alone."""

from __future__ import annotations

import itertools
import json

import pytest
from builders import P0, P1, PLANNER_START, TOPIC, layout, positions, reader, unlimited
from fakes import FakeCatalog, FakeClock
from pyspark.sql.streaming.datasource import ReadMaxRows

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.offsets import LEDGER_ENDS, QUERY_ID, QUERY_START
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.reading.read_errors import DataLossError


def test_earliest_then_everything_available_without_quotas(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 10), (7, 3)]), layout(P1, [(6, 4)])))
    start = r.initialOffset()
    assert positions(start) == {P0: (5, -1), P1: (6, -1)}
    assert positions(r.latestOffset(start, unlimited())) == {P0: (7, 2), P1: (6, 3)}


def test_max_entries_per_trigger_splits_in_proportion_to_backlog(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 30)]), layout(P1, [(6, 10)])))
    end = r.latestOffset(r.initialOffset(), ReadMaxRows(20))
    assert positions(end) == {P0: (5, 14), P1: (6, 4)}  # 15 + 5 entries


def test_batch_quota_per_window_with_a_fake_clock(tmp_path):
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock, throttlingMode="batch",
               dispatchThrottlingRatePerTopicInMsg=10)
    first = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(first) == {P0: (5, 9)}
    clock.now = 2_000.9  # same window: the quota is spent, the offsets stay
    assert r.latestOffset(first, unlimited()) == first
    clock.now = 2_001.0  # next window
    assert positions(r.latestOffset(first, unlimited())) == {P0: (5, 19)}


def test_an_open_transaction_holds_planning_before_its_first_entry(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]), max_read={P0: EntryPosition(5, 3)})
    r = reader(tmp_path, catalog)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(end) == {P0: (5, 3)}
    catalog.set(layout(P0, [(5, 10)]))  # committed: the cap is gone
    assert positions(r.latestOffset(end, unlimited())) == {P0: (5, 9)}


def test_available_now_stops_at_what_was_there_when_the_query_started(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    r = reader(tmp_path, catalog)
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    catalog.set(layout(P0, [(5, 10), (8, 50)]))  # written after the query started
    end = r.latestOffset(start, unlimited())
    assert positions(end) == {P0: (8, -1)}  # all of ledger 5 (which ledger 8 follows), nothing of 8
    assert r.latestOffset(end, unlimited()) == end


def test_available_now_waits_out_an_exhausted_quota_window_instead_of_planning_no_batch(tmp_path):
    """Spark ends a Trigger.AvailableNow query at the first trigger that plans no data: with the window's quota
    spent and the target not reached, the planner sleeps (its injected sleeper) to the next window and plans."""
    clock = FakeClock(PLANNER_START)
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 25)])), clock, throttlingMode="batch", dispatchThrottlingRateInMsg=10)
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    first = r.latestOffset(start, unlimited())
    assert positions(first) == {P0: (5, 9)} and clock.slept == []
    second = r.latestOffset(first, unlimited())  # the same window: its 10 messages are spent
    assert positions(second) == {P0: (5, 19)}
    assert clock.slept == [pytest.approx(0.76)] and clock.now == pytest.approx(PLANNER_START + 0.76)  # to 1001.01


def test_a_stream_with_nothing_new_hands_spark_its_start_back(tmp_path):
    """Unchanged, not a new offset: Spark runs no batch for the very offset it gave."""
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 10)])))
    end = r.latestOffset(r.initialOffset(), unlimited())
    same = dict(end)  # equal, not the same object: what Spark hands back from its offset log
    assert r.latestOffset(same, unlimited()) is same


def test_a_deleted_topic_fails_the_query_naming_it(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]), layout(P1, [(6, 4)]))
    r = reader(tmp_path, catalog)
    end = r.latestOffset(r.initialOffset(), unlimited())
    catalog.set(layout(P0, [(5, 10)]))
    with pytest.raises(DataLossError, match=rf"{TOPIC} were deleted.*{P1}.*failOnDataLoss=false"):
        r.latestOffset(end, unlimited())


def test_a_deleted_topic_is_left_out_with_fail_on_data_loss_false(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]), layout(P1, [(6, 4)]))
    r = reader(tmp_path, catalog, failOnDataLoss="false")
    end = r.latestOffset(r.initialOffset(), unlimited())
    catalog.set(layout(P0, [(5, 12)]))
    assert positions(r.latestOffset(end, unlimited())) == {P0: (5, 11)}


def test_retention_past_the_offset_is_data_loss(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10), (7, 10)]))
    r = reader(tmp_path, catalog)
    start = json.loads(json.dumps(r.initialOffset()))
    catalog.set(layout(P0, [(7, 10)]))  # ledger 5 deleted before anything was read
    with pytest.raises(DataLossError, match=r"entries after 5:-1 and before 7:0"):
        r.latestOffset(start, unlimited())


def test_tasks_of_at_most_max_entries_per_task_cover_the_range_exactly(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 7), (7, 6)]), layout(P1, [(6, 2)])), maxEntriesPerTask=5,
               smallBatchTasks=0)
    start = r.initialOffset()
    tasks = r.partitions(start, r.latestOffset(start, unlimited()))
    by_partition: dict[str, list] = {}
    for t in tasks:
        by_partition.setdefault(t.partition, []).append(t)
    assert [t.entries for t in by_partition[P0]] == [5, 5, 3]
    assert [t.entries for t in by_partition[P1]] == [2]
    chain = by_partition[P0]
    assert chain[0].start == EntryPosition(5, -1) and chain[-1].end == EntryPosition(7, 5)
    assert all(a.end == b.start for a, b in itertools.pairwise(chain))  # contiguous, no overlap
    assert chain[1].runs == ((5, 5, 2), (7, 0, 3))


def test_a_batch_that_ends_a_closed_ledger_ends_before_the_next_and_survives_its_deletion(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10), (7, 3)]))
    r = reader(tmp_path, catalog)
    end = r.latestOffset(r.initialOffset(), ReadMaxRows(10))
    assert positions(end) == {P0: (7, -1)}  # not (5, 9): the offset no longer names ledger 5
    assert [t.entries for t in r.partitions(r.initialOffset(), end)] == [10]
    catalog.set(layout(P0, [(7, 3)]))  # retention deleted the fully read ledger 5
    assert positions(r.latestOffset(end, unlimited())) == {P0: (7, 2)}
    # Mid-ledger, and at the end of the newest ledger (it may still grow), the offset is kept as is.
    r2 = reader(tmp_path, FakeCatalog(layout(P0, [(5, 10), (7, 3)])))
    assert positions(r2.latestOffset(r2.initialOffset(), ReadMaxRows(4))) == {P0: (5, 3)}
    assert positions(r2.latestOffset(r2.initialOffset(), unlimited())) == {P0: (7, 2)}


def test_a_batch_that_ends_the_last_closed_ledger_keeps_its_offset_while_the_open_ledger_is_empty(tmp_path):
    # The broker rolled over: ledger 5 is full and closed, ledger 9 is open and still empty. An
    # offset "before ledger 9" would look like loss once the broker drops 9 for closing empty.
    stats = {"ledgers": [{"ledgerId": 5, "entries": 10, "size": 1000}, {"ledgerId": 9, "entries": 0, "size": 0}],
             "currentLedgerEntries": 0, "currentLedgerSize": 0, "lastConfirmedEntry": "5:9", "entriesAddedCounter": 10}
    catalog = FakeCatalog(PartitionLayout.from_internal_stats(P0, stats))
    r = reader(tmp_path, catalog)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert positions(end) == {P0: (5, 9)}
    assert r.latestOffset(end, unlimited()) == end  # caught up: no empty batch
    catalog.set(layout(P0, [(5, 10), (11, 4)]))  # 9 dropped empty after an unload; 4 new entries in 11
    assert positions(r.latestOffset(end, unlimited())) == {P0: (11, 3)}  # no loss reported


ROLLED_OVER = {"ledgers": [{"ledgerId": 5, "entries": 10, "size": 1000}, {"ledgerId": 9, "entries": 0, "size": 0}],
               "currentLedgerEntries": 0, "currentLedgerSize": 0, "lastConfirmedEntry": "5:9", "entriesAddedCounter": 10}


def test_a_restart_after_retention_deleted_the_fully_read_closed_ledger_is_not_loss(tmp_path):
    # Caught up at 5:9, the last entry of closed ledger 5, while 9 is open and empty: the offset carries 9.
    catalog = FakeCatalog(PartitionLayout.from_internal_stats(P0, ROLLED_OVER))
    r = reader(tmp_path, catalog)
    end = spark_json(r.latestOffset(r.initialOffset(), unlimited()))
    assert positions(end) == {P0: (5, 9)} and end[LEDGER_ENDS] == {P0: 9}
    # Stopped; retention deletes ledger 5; 9 receives 4 entries. A new reader (a restart) reads them, no loss.
    catalog.set(layout(P0, [(9, 4)]))
    restarted = reader(tmp_path, catalog)
    later = restarted.latestOffset(end, unlimited())
    assert positions(later) == {P0: (9, 3)} and LEDGER_ENDS not in later
    (task,) = restarted.partitions(end, later)
    assert task.runs == ((9, 0, 4),)


def test_without_the_proof_a_deleted_ledger_after_the_offset_is_still_loss(tmp_path):
    catalog = FakeCatalog(PartitionLayout.from_internal_stats(P0, ROLLED_OVER))
    end = spark_json(reader(tmp_path, catalog).latestOffset(reader(tmp_path, catalog).initialOffset(), unlimited()))
    catalog.set(layout(P0, [(11, 4)]))  # 5 deleted, and 9 too (dropped empty, or held entries that were deleted)
    with pytest.raises(DataLossError, match=r"entries after 5:9 and before 11:0"):
        reader(tmp_path, catalog).latestOffset(end, unlimited())
    unproven = {k: v for k, v in end.items() if k != LEDGER_ENDS}  # an offset written before the proof existed
    catalog.set(layout(P0, [(9, 4)]))
    with pytest.raises(DataLossError, match=r"entries after 5:9 and before 9:0"):
        reader(tmp_path, catalog).latestOffset(unproven, unlimited())


def test_an_offset_inside_a_ledger_carries_no_proof(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 10), (9, 4)])))
    end = r.latestOffset(r.initialOffset(), ReadMaxRows(3))
    assert positions(end) == {P0: (5, 2)} and LEDGER_ENDS not in end


def test_max_entries_per_task_also_splits_a_range_that_ends_before_the_next_ledger(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 7), (7, 6)])), maxEntriesPerTask=5)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadMaxRows(7))
    assert positions(end) == {P0: (7, -1)}
    tasks = r.partitions(start, end)
    assert [t.entries for t in tasks] == [5, 2] and tasks[-1].end == EntryPosition(7, -1)
    assert tasks[-1].runs == ((5, 5, 2),)


def spark_json(offsets: dict) -> dict:
    """What Spark hands back: the offset after a round trip through its offset log."""
    return json.loads(json.dumps(offsets))


def test_a_re_run_first_batch_reads_the_range_it_was_planned_with(tmp_path):
    # startingOffsets=latest; the first batch is stopped before Spark commits it, more is published,
    # and Spark re-runs it from a fresh initialOffset() call, which now resolves "latest" further on.
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    first = reader(tmp_path, catalog, startingOffsets="latest")
    start = first.initialOffset()
    catalog.set(layout(P0, [(5, 20)]))
    end = spark_json(first.latestOffset(start, unlimited()))
    assert positions(start) == {P0: (5, 9)} and positions(end) == {P0: (5, 19)}
    assert first.latestOffset(end, unlimited()) == end  # caught up: the same offset, no empty batch

    catalog.set(layout(P0, [(5, 30)]))
    restarted = reader(tmp_path, catalog, startingOffsets="latest")
    assert positions(restarted.initialOffset()) == {P0: (5, 29)}
    (task,) = restarted.partitions(restarted.initialOffset(), end)
    assert (task.start, task.end, task.entries) == (EntryPosition(5, 9), EntryPosition(5, 19), 10)
    # Later batches carry no start of their own, only the query's identity.
    later = restarted.latestOffset(end, unlimited())
    assert set(later) == {P0, QUERY_ID} and positions(later) == {P0: (5, 29)} and later[QUERY_ID] == end[QUERY_ID]


def test_a_re_run_first_batch_whose_entries_retention_deleted_is_data_loss(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10), (7, 3)]))
    first = reader(tmp_path, catalog)  # earliest
    end = spark_json(first.latestOffset(first.initialOffset(), ReadMaxRows(10)))
    assert positions(end) == {P0: (7, -1)}
    catalog.set(layout(P0, [(7, 3)]))  # ledger 5 deleted before Spark committed the batch
    restarted = reader(tmp_path, catalog)
    assert positions(restarted.initialOffset()) == {P0: (7, -1)}  # "earliest" now: the batch would be empty
    with pytest.raises(DataLossError, match=r"entries after 5:-1 and before 7:0"):
        restarted.partitions(restarted.initialOffset(), end)


def test_a_corrupt_query_start_in_a_checkpointed_offset_is_a_clear_error(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 10)])))
    end = {P0: {"ledgerId": 5, "entryId": 3}, QUERY_START: {P0: {"ledgerId": "x"}}}
    with pytest.raises(ValueError, match=rf"{QUERY_START}.*checkpoint"):
        r.partitions(r.initialOffset(), end)


def test_each_query_has_its_own_identity_kept_in_its_offsets(tmp_path):
    # Two queries with the same (default) subscription on one host: two identities, two source-wide
    # buckets, each with the whole source-wide quota.
    catalog = FakeCatalog(layout(P0, [(5, 100)]))
    one, two = (reader(tmp_path, catalog, dispatchThrottlingRateInMsg=10, throttlingMode="batch") for _ in range(2))
    end_one = spark_json(one.latestOffset(one.initialOffset(), unlimited()))
    end_two = spark_json(two.latestOffset(two.initialOffset(), unlimited()))
    assert positions(end_one) == positions(end_two) == {P0: (5, 9)}
    assert end_one[QUERY_ID] != end_two[QUERY_ID] and len(end_one[QUERY_ID]) == 32
    # A restart takes the identity from its checkpointed offset: the same bucket, its window spent.
    restarted = reader(tmp_path, catalog, dispatchThrottlingRateInMsg=10, throttlingMode="batch")
    assert restarted.latestOffset(end_one, unlimited()) == end_one
    restarted._clock.now += 1  # type: ignore[attr-defined]
    after = restarted.latestOffset(end_one, unlimited())
    assert positions(after) == {P0: (5, 19)} and after[QUERY_ID] == end_one[QUERY_ID]


def test_a_checkpoint_from_before_identities_gets_one_and_keeps_it(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 100)])))
    old = {P0: {"ledgerId": 5, "entryId": 9}}  # written by a version without identities
    later = spark_json(r.latestOffset(old, ReadMaxRows(10)))
    assert positions(later) == {P0: (5, 19)} and QUERY_ID in later
    assert r.latestOffset(later, ReadMaxRows(10))[QUERY_ID] == later[QUERY_ID]


def test_a_corrupt_identity_in_a_checkpointed_offset_is_a_clear_error(tmp_path):
    r = reader(tmp_path, FakeCatalog(layout(P0, [(5, 10)])))
    with pytest.raises(ValueError, match=rf"{QUERY_ID} must be 32 lowercase hex digits, got 'x'.*checkpointLocation"):
        r.latestOffset({P0: {"ledgerId": 5, "entryId": 3}, QUERY_ID: "x"}, unlimited())


def test_a_first_plan_that_admits_nothing_plans_no_batch(tmp_path):
    """Issue 32: another query took the shared quota's whole window, so this query's first plan admits
    nothing: Spark must see no new offset (no empty first micro-batch), also for a partition that
    appeared after the query's initial offset."""
    catalog, clock = FakeCatalog(layout(P0, [(5, 10), (9, 4)])), FakeClock(PLANNER_START)
    quota = {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "3"}
    other, this = reader(tmp_path, catalog, clock, **quota), reader(tmp_path, catalog, clock, **quota)
    initial = this.initialOffset()  # P0 only
    catalog.set(layout(P0, [(5, 10), (9, 4)]), layout(P1, [(6, 8)]))  # a partition is added
    assert positions(other.latestOffset(other.initialOffset(), unlimited())) == {P0: (5, 2), P1: (6, 2)}
    assert this.latestOffset(initial, unlimited()) == initial
    clock.now += 1.0  # the next window: both partitions are read, the new one from its beginning
    assert positions(this.latestOffset(initial, unlimited())) == {P0: (5, 2), P1: (6, 2)}
