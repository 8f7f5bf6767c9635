"""The query progress report (planning/progress.py, issue 39) on made-up layouts: lag arithmetic, time lag,
the throttle state per level, the publish-time lookups it costs, and where each Spark line carries it."""

from __future__ import annotations

import json
import math
from concurrent.futures import Future

from builders import P0, P1, PLANNER_START, layout, reader, reader40, unlimited
from fakes import FakeCatalog, FakeClock
from pyspark.sql.streaming.datasource import ReadMaxRows

from pulsar_throttled_source.metadata.catalog import CatalogSnapshot, PublishStats
from pulsar_throttled_source.metadata.publish_times import LOOKUPS_PER_PLAN, OldestUnread, publish_ms
from pulsar_throttled_source.offsets import PROGRESS, SourceOffset
from pulsar_throttled_source.planning.admission import TriggerOutcome
from pulsar_throttled_source.planning.progress import level_of, partition_lags, progress_report
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.query_progress import source_report
from pulsar_throttled_source.throttling.buckets import Bucket, BucketSpec
from pulsar_throttled_source.throttling.report import level_reports

NOW = 1_000_000.0


def snap_of(*layouts, stats=None) -> CatalogSnapshot:
    return CatalogSnapshot(0.0, {l.partition: l for l in layouts}, stats or {})


def test_lag_is_totalled_maxed_and_averaged_over_partitions_in_entries_messages_and_seconds():
    # P0: 30 entries (ledger 5: 20, ledger 7: 10), 3 messages each by its counters; P1: 10 entries, no stats.
    snap = snap_of(layout(P0, [(5, 20), (7, 10)]), layout(P1, [(6, 10)]),
                   stats={P0: PublishStats(90, 9000, 0.0, 0.0)})
    end = {P0: EntryPosition(5, 9), P1: EntryPosition(6, 9)}  # P0: 20 behind, P1: caught up
    assert partition_lags(snap, end).behind == {P0: EntryPosition(5, 10)}
    report = progress_report(snap, partition_lags(snap, end), {P0: int((NOW - 42.5) * 1000)}, NOW, TriggerOutcome(), "native")
    assert report == {"entriesBehindLatest": 20, "maxEntriesBehindLatest": 20, "avgEntriesBehindLatest": 10.0,
                      "messagesBehindLatest": 60, "maxMessagesBehindLatest": 60, "avgMessagesBehindLatest": 30.0,
                      "secondsBehindLatest": 42.5, "partitions": 2, "partitionsBehind": 1,
                      "throttle": {"heldBy": None, "floorHeld": False, "readLimitHeld": 0, "levels": {}},
                      "readPath": "native"}
    assert list(report) == list(progress_report(snap, partition_lags(snap, {}), {}, NOW, TriggerOutcome(), "python"))  # one key order


def test_a_caught_up_query_is_0_behind_and_an_unknown_publish_time_is_null():
    snap = snap_of(layout(P0, [(5, 20)]))
    caught_up = progress_report(snap, partition_lags(snap, {P0: EntryPosition(5, 19)}), {}, NOW, TriggerOutcome(), "python")
    assert (caught_up["entriesBehindLatest"], caught_up["secondsBehindLatest"], caught_up["partitionsBehind"]) == (0, 0.0, 0)
    unknown = progress_report(snap, partition_lags(snap, {P0: EntryPosition(5, 9)}), {}, NOW, TriggerOutcome(), "python")
    assert unknown["secondsBehindLatest"] is None and unknown["entriesBehindLatest"] == 10


def test_lag_stops_at_the_newest_readable_entry():
    snap = CatalogSnapshot(0.0, {P0: layout(P0, [(5, 20)])}, {}, {P0: EntryPosition(5, 14)})  # an open transaction
    assert progress_report(snap, partition_lags(snap, {P0: EntryPosition(5, 9)}), {}, NOW, TriggerOutcome(), "python")["entriesBehindLatest"] == 5


def bucket(label: str, level: str, quota: float, used: float) -> Bucket:
    return Bucket(BucketSpec(f"{label}:{used}", level, label, 1, quota, math.inf), 7, used, 0.0)  # window 7: [7 s, 8 s)


def test_the_throttle_names_each_level_its_held_back_partitions_window_share_and_debt():
    levels = level_reports([bucket("topic", "topic", 10, 10), bucket("topic", "topic", 10, 4),
                            bucket("broker topic", "topic", 5, 7), bucket("source-wide", "source-wide", 100, 30)])
    held = {"a": "topic quota exhausted (msgs)", "b": "topic quota too small for the next entry (msgs, 1 left)",
            "c": "broker topic quota exhausted (msgs, debt 2)", "d": "source-wide share",
            "e": "messages per entry not known yet: first read admits 1 entry"}
    throttle = progress_report(snap_of(), partition_lags(snap_of(), {}), {}, NOW, TriggerOutcome(held, tuple(levels), False, 3), "python")["throttle"]
    assert throttle == {"heldBy": "topic", "floorHeld": False, "readLimitHeld": 3, "levels": {
        "sourceWide": {"heldBack": 1, "windowUsed": 0.3, "debtMessages": 0.0, "debtBytes": 0.0, "windowStartMs": 7000},
        "topic": {"heldBack": 2, "windowUsed": 1.0, "debtMessages": 0.0, "debtBytes": 0.0, "windowStartMs": 7000},
        "brokerTopic": {"heldBack": 1, "windowUsed": 1.0, "debtMessages": 2.0, "debtBytes": 0.0, "windowStartMs": 7000}}}
    assert level_of("broker subscription quota exhausted (bytes)") == "brokerSubscription"
    assert level_of("subscription quota exhausted (bytes)") == "subscription"


def test_per_partition_detail_only_when_asked():
    snap = snap_of(layout(P0, [(5, 20)]), layout(P1, [(6, 10)]))
    end = {P0: EntryPosition(5, 9), P1: EntryPosition(6, 9)}
    outcome = TriggerOutcome({P0: "topic quota exhausted (msgs)"})
    assert "perPartition" not in progress_report(snap, partition_lags(snap, end), {}, NOW, outcome, "python")
    detail = progress_report(snap, partition_lags(snap, end), {P0: int(NOW * 1000) - 1500}, NOW, outcome, "python", per_partition=True)["perPartition"]
    assert detail == {P0: {"latest": {"ledgerId": 5, "entryId": 19}, "entriesBehind": 10, "messagesBehind": 10,
                           "secondsBehind": 1.5, "heldBackBy": "topic"},
                      P1: {"latest": {"ledgerId": 6, "entryId": 9}, "entriesBehind": 0, "messagesBehind": 0,
                           "secondsBehind": 0.0, "heldBackBy": None}}


class InlinePool:
    """Runs lookups at once (a pool whose answers are in by the time they are waited for)."""

    def submit(self, fn, *args):
        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, **_kwargs) -> None:
        pass


def test_publish_times_are_asked_once_per_position_for_partitions_behind_only_and_bounded_per_plan():
    asked: list[tuple[str, EntryPosition]] = []

    def lookup(partition, entry):
        asked.append((partition, entry))
        return {"X-Pulsar-publish-time": f"2026-01-01T00:00:{entry.entry_id:02d}.250Z"}

    times = OldestUnread(lookup, pool=InlinePool)
    assert times.publish_times({}) == {}  # caught up: nothing asked
    first = times.publish_times({P0: EntryPosition(5, 3)})
    assert first == {P0: publish_ms({"x-pulsar-publish-time": "2026-01-01T00:00:03.250Z"})}
    for _ in range(5):  # idle or held-back polls: the same position, not asked again
        assert times.publish_times({P0: EntryPosition(5, 3)}) == first
    assert len(asked) == 1
    times.publish_times({P0: EntryPosition(5, 8)})  # the query moved on: one lookup
    assert asked[-1] == (P0, EntryPosition(5, 8)) and len(asked) == 2
    many = {f"{P0}-{i}": EntryPosition(9, i) for i in range(LOOKUPS_PER_PLAN + 8)}
    times.publish_times(many)
    assert len(asked) == 2 + LOOKUPS_PER_PLAN  # bounded; the rest come with the next plans
    assert len(times.publish_times(many)) == len(many) and len(asked) == 2 + len(many)


def test_an_unanswered_lookup_keeps_the_older_entrys_time_so_lag_is_never_understated():
    pending: list[Future] = []

    class SlowPool(InlinePool):
        def submit(self, fn, *args):
            future: Future = Future()
            pending.append(future)
            return future

    times = OldestUnread(lambda p, e: None, pool=SlowPool, wait_s=0.0, first_wait_s=0.0)
    assert times.publish_times({P0: EntryPosition(5, 3)}) == {}
    pending[0].set_result({"X-Pulsar-publish-time": "2026-01-01T00:00:03Z"})
    older = times.publish_times({P0: EntryPosition(5, 3)})
    assert times.publish_times({P0: EntryPosition(5, 9)}) == older  # its own answer not in yet
    pending[1].set_result({"X-Pulsar-publish-time": "2026-01-01T00:00:09Z"})
    assert times.publish_times({P0: EntryPosition(5, 9)})[P0] == older[P0] + 6000


def test_on_4_2_the_report_is_reportLatestOffset_and_offsets_carry_no_progress(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 30)]))
    clock = FakeClock(2_000.1)
    r = reader(tmp_path, catalog, clock, publish_ms={P0: "1970-01-01T00:31:30Z"},  # 1890 s: published 110 s before the clock
               throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg=10)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert PROGRESS not in end
    report = r.reportLatestOffset()
    assert report["entriesBehindLatest"] == 20 and report["secondsBehindLatest"] == 110.1
    assert report["throttle"]["heldBy"] == "topic" and report["throttle"]["levels"]["topic"]["windowUsed"] == 1.0
    clock.now += 0.5  # the same window's polls: no new batch, the lag grows older
    assert r.latestOffset(end, unlimited()) is end
    assert r.reportLatestOffset()["secondsBehindLatest"] == 110.6


def test_on_4_0_the_end_offset_carries_the_report_and_an_unchanged_offset_stays_byte_for_byte_equal(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 30)]))
    clock = FakeClock(3_000.1)
    r = reader40(tmp_path, catalog, clock)
    end = r.latestOffset()
    assert end[PROGRESS]["entriesBehindLatest"] == 20 and end[PROGRESS]["throttle"]["heldBy"] == "topic"
    clock.now += 0.5  # later polls in the same window: Spark compares the JSON, which must not change
    assert json.dumps(r.latestOffset()) == json.dumps(end)
    # A restart: Spark hands the checkpointed offset back (JSON round trip), then polls.
    again = reader40(tmp_path, catalog, clock)
    checkpointed = json.loads(json.dumps(end))
    assert again.partitions(checkpointed, checkpointed) == []
    assert json.dumps(again.latestOffset()) == json.dumps(end)
    clock.now = 3_001.2
    assert again.latestOffset()[PROGRESS]["entriesBehindLatest"] == 10


def test_progress_in_an_offset_changes_neither_where_it_stands_nor_equality():
    value = {P0: {"ledgerId": 5, "entryId": 9}, "queryId": "0" * 32, PROGRESS: {"entriesBehindLatest": 3}}
    offset = SourceOffset.from_json(value, "test")
    assert offset.positions == {P0: EntryPosition(5, 9)}
    assert offset == SourceOffset({P0: EntryPosition(5, 9)}, "0" * 32)
    assert json.dumps(offset.to_json()) == json.dumps(value)


class FakeProgress(dict):
    """PySpark's StreamingQueryProgress: a dict whose JSON is also at .json (on 4.0 its offsets are reprs)."""

    def __init__(self, as_dict: dict, as_json: dict) -> None:
        super().__init__(as_dict)
        self.json = json.dumps(as_json)


def test_source_report_reads_the_report_where_each_spark_line_puts_it():
    report = {"entriesBehindLatest": 4, "secondsBehindLatest": 1.5}
    offset = {P0: {"ledgerId": 5, "entryId": 9}}
    on_43 = {"sources": [{"endOffset": json.dumps(offset), "latestOffset": json.dumps(report)}]}
    assert source_report(on_43) == report
    assert source_report(json.dumps(on_43)) == report
    carried = {**offset, "progress": report}
    on_40 = FakeProgress({"sources": [{"endOffset": repr(carried), "latestOffset": repr(carried)}]},
                         {"sources": [{"endOffset": carried, "latestOffset": carried}]})
    assert source_report(on_40) == report
    assert source_report({"sources": [{"endOffset": json.dumps(offset), "latestOffset": None}]}) is None
    assert source_report({"sources": []}) is None


def test_an_entry_without_a_publish_time_is_not_asked_again_at_every_poll():
    asked = []
    clock = FakeClock(0.0)
    times = OldestUnread(lambda p, e: asked.append(e), pool=InlinePool, clock=clock)
    for _ in range(10):
        assert times.publish_times({P0: EntryPosition(5, 3)}) == {}
    assert len(asked) == 1
    clock.now = 6.0
    times.publish_times({P0: EntryPosition(5, 3)})
    assert len(asked) == 2


def test_the_report_says_when_the_trigger_floor_or_max_entries_per_trigger_held_the_batch(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 4)]), layout(P1, [(6, 30)]))
    r = reader(tmp_path, catalog, FakeClock(PLANNER_START), minEntriesPerTrigger=50, maxTriggerDelay="10m", throttlingMode="batch",
               dispatchThrottlingRatePerTopicInMsg=100)
    start = r.initialOffset()
    assert r.latestOffset(start, unlimited()) == start  # 34 < 50: no batch yet
    held = r.reportLatestOffset()
    assert held["throttle"]["floorHeld"] is True and held["throttle"]["heldBy"] is None and held["entriesBehindLatest"] == 34
    capped = reader(tmp_path / "capped", catalog, FakeClock(PLANNER_START))
    capped.latestOffset(capped.initialOffset(), ReadMaxRows(10))
    throttle = capped.reportLatestOffset()["throttle"]
    assert (throttle["floorHeld"], throttle["readLimitHeld"], throttle["levels"]) == (False, 2, {})
