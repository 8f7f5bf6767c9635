"""catch_up (issue 42) against a scripted stand-in for a StreamingQuery on a fake clock: when it stops a
processing-time query (4.0/4.1), when it leaves Trigger.AvailableNow to Spark (4.2+), and how errors and
timeouts come out. The real queries on every Spark line: tests/integration/test_catch_up.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pulsar_throttled_source.catch_up import CatchUpTimeout, catch_up


def batch(batch_id: int, rows: int, behind: int, spark40: bool = True) -> dict[str, Any]:
    """A micro-batch's progress event, its source report where each Spark line shows it."""
    report = {"entriesBehindLatest": behind, "throttle": {"heldBy": "topic" if behind else None}}
    source = ({"endOffset": {"positions": {"t-partition-0": "1:2"}, "progress": report}} if spark40
              else {"endOffset": {"positions": {}}, "latestOffset": report})
    return {"batchId": batch_id, "numInputRows": rows, "durationMs": {"addBatch": 5, "triggerExecution": 9},
            "sources": [{"description": "PythonMicroBatchStream", **source}]}


def idle(batch_id: int, behind: int | None) -> dict[str, Any]:
    """An idle trigger's progress event (no addBatch), its report the one the last offset carries, if any."""
    end = {"positions": {}} if behind is None else {"positions": {}, "progress": {"entriesBehindLatest": behind}}
    return {"batchId": batch_id, "numInputRows": 0, "durationMs": {"latestOffset": 1, "triggerExecution": 1},
            "sources": [{"description": "PythonMicroBatchStream", "endOffset": end}]}


class Event:
    """As PySpark gives progress on 4.0: an object whose JSON holds the offsets."""

    def __init__(self, data: dict) -> None:
        self.json = json.dumps(data)


class FakeQuery:
    """Progress events that appear at given times (the fake clock advances by each wait)."""

    def __init__(self, clock: list[float], script: list[tuple[float, dict]], ends_at: float | None = None,
                 fails_at: float | None = None) -> None:
        self.clock, self.script, self.ends_at, self.fails_at = clock, script, ends_at, fails_at
        self.stopped_at: float | None = None
        self.status = {"isDataAvailable": False, "isTriggerActive": False}

    def awaitTermination(self, timeout: float) -> bool:
        self.clock[0] += timeout
        if self.fails_at is not None and self.clock[0] >= self.fails_at:
            self.stopped_at = self.clock[0]
            raise RuntimeError("StreamingQueryException: the sink failed")
        return self.stopped_at is not None or (self.ends_at is not None and self.clock[0] >= self.ends_at)

    @property
    def recentProgress(self) -> list:
        return [Event(e) for t, e in self.script if t <= self.clock[0]]

    @property
    def isActive(self) -> bool:
        return self.stopped_at is None and not (self.ends_at is not None and self.clock[0] >= self.ends_at)

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = self.clock[0]

    def exception(self) -> None:
        return None


class FakeWriter:
    def __init__(self, query: FakeQuery) -> None:
        self.query, self.triggers, self.started = query, [], None

    def trigger(self, **kwargs: Any) -> FakeWriter:
        self.triggers.append(kwargs)
        return self

    def start(self) -> FakeQuery:
        self.started = "start"
        return self.query

    def toTable(self, name: str) -> FakeQuery:
        self.started = name
        return self.query


def run(script, available_now=False, **kwargs):
    clock = [0.0]
    query = FakeQuery(clock, script, **{k: kwargs.pop(k) for k in ("ends_at", "fails_at") if k in kwargs})
    writer = FakeWriter(query)
    result = catch_up(writer, available_now=available_now, poll_s=0.5, clock=lambda: clock[0], **kwargs)
    return result, writer, query


def test_spark40_stops_after_the_first_batch_planned_with_nothing_behind():
    script = [(1, batch(0, 8, 16)), (2, batch(1, 8, 8)), (2.5, idle(2, 8)), (3, batch(2, 8, 0)), (4, batch(3, 3, 0))]
    result, writer, query = run(script, processing_time="200 milliseconds")
    assert writer.triggers == [{"processingTime": "200 milliseconds"}] and writer.started == "start"
    assert query.stopped_at == 3.0  # at the batch with 0 behind, not before (the idle trigger still showed 8)
    assert (result.trigger, result.batches, result.rows) == ("processingTime", 3, 24)
    assert result.reports == [{"entriesBehindLatest": 0, "throttle": {"heldBy": None}}]


def test_spark40_a_quota_held_idle_stretch_does_not_stop_the_query():
    # Batches planned with lag left, then triggers the quota admits nothing on: only the last batch decides.
    script = [(1, batch(0, 8, 4)), (1.5, idle(1, 4)), (12, idle(1, 4)), (13, batch(1, 4, 0))]
    result, _, query = run(script, idle_s=2.0)
    assert query.stopped_at == 13.0 and result.batches == 2


def test_spark40_a_run_with_nothing_new_ends_after_idle_s():
    result, _, query = run([(1, idle(5, 0))], idle_s=4.0)  # the checkpoint's last plan: nothing behind
    assert query.stopped_at == 4.0 and (result.batches, result.rows) == (0, 0)
    # A new query on an empty topic: its first batch runs, reads nothing and has no report (4.0/4.1).
    empty_first = {**idle(0, None), "durationMs": {"addBatch": 3, "triggerExecution": 9}}
    result, _, query = run([(1, empty_first)], idle_s=4.0)
    assert query.stopped_at == 4.0 and result.batches == 0


def test_spark40_an_idle_run_whose_checkpoint_shows_a_lag_waits_for_a_batch():
    with pytest.raises(CatchUpTimeout) as timed_out:
        run([(1, idle(5, 3))], idle_s=1.0, timeout_s=6.0)
    assert timed_out.value.result.query.stopped_at == 6.0
    assert timed_out.value.result.reports == [{"entriesBehindLatest": 3}]


def test_spark40_waits_while_spark_says_data_is_available():
    clock = [0.0]
    query = FakeQuery(clock, [(1, idle(0, None)), (9, batch(0, 5, 0))])
    query.status = {"isDataAvailable": True, "isTriggerActive": True}  # a first batch still being planned
    result = catch_up(FakeWriter(query), available_now=False, idle_s=2.0, poll_s=0.5, clock=lambda: clock[0])
    assert query.stopped_at == 9.0 and result.rows == 5


def test_timeout_stops_the_query_and_says_how_far_it_got():
    with pytest.raises(CatchUpTimeout, match=r"not caught up after 3 s \(2 micro-batches, 16 rows read") as timed_out:
        run([(1, batch(0, 8, 16)), (2, batch(1, 8, 8))], timeout_s=3.0)
    result = timed_out.value.result
    assert isinstance(timed_out.value, TimeoutError) and result.query.stopped_at == 3.0 and result.batches == 2


def test_the_querys_error_is_raised_and_the_query_stopped():
    with pytest.raises(RuntimeError, match="the sink failed"):
        run([(1, batch(0, 8, 16))], fails_at=2.0)


def test_a_query_stopped_by_someone_else_before_caught_up_is_an_error():
    with pytest.raises(RuntimeError, match="stopped before it caught up"):
        run([(1, batch(0, 8, 16))], ends_at=2.0)


def test_spark40_a_source_that_reports_no_lag_is_refused():
    other = {"batchId": 0, "numInputRows": 3, "durationMs": {"addBatch": 1},
             "sources": [{"description": "RateStreamV2", "endOffset": {"0": 3}}]}
    with pytest.raises(ValueError, match="every source of the query must be a pulsar-throttled source.*RateStreamV2"):
        run([(1, other)])


def test_with_admission_control_it_is_trigger_available_now_until_spark_ends_it():
    script = [(1, batch(0, 8, 8, spark40=False)), (2, batch(1, 8, 0, spark40=False))]
    result, writer, query = run(script, available_now=True, table="bronze.orders", ends_at=2.0)
    assert writer.triggers == [{"availableNow": True}] and writer.started == "bronze.orders"
    assert query.stopped_at is None  # ended by Spark, not stopped
    assert (result.trigger, result.batches, result.rows) == ("availableNow", 2, 16)
    assert result.reports[0]["entriesBehindLatest"] == 0


@pytest.mark.parametrize("kwargs, message", [({"timeout_s": 0}, "timeout_s must be a number of seconds above 0"),
                                             ({"poll_s": 0}, "poll_s must be above 0"),
                                             ({"idle_s": -1}, "idle_s 0 or more")])
def test_bad_arguments_fail_before_the_query_starts(kwargs, message):
    writer = FakeWriter(FakeQuery([0.0], []))
    with pytest.raises(ValueError, match=message):
        catch_up(writer, available_now=False, **kwargs)
    assert writer.started is None
