"""Issue 6: a query stopped or killed at 10 different points and restarted on its checkpoint
delivers every message exactly once to an idempotent sink (batch id -> rows)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers import create_topic, produce, wait_until
from pyspark.errors import StreamingQueryException
from streaming import Collected, failure_of, identity, sent_identity, source_options, start_collecting


class Crash(RuntimeError):
    pass


class FaultySink(Collected):
    """An idempotent sink that fails once at a chosen batch, before or after storing its rows."""

    def __init__(self, store: dict[int, list]) -> None:
        super().__init__()
        self.batches = store  # shared across runs: a re-run batch replaces its rows
        self.crash_at: tuple[int, str] | None = None
        self.seen_batches: list[int] = []
        self.running = threading.Event()

    def sink(self, df, batch_id: int) -> None:
        self.seen_batches.append(batch_id)
        self.running.set()
        if self.crash_at == (batch_id, "before-write"):
            self.crash_at = None
            raise Crash(f"injected crash before writing batch {batch_id}")
        super().sink(df, batch_id)
        if self.crash_at == (batch_id, "after-write"):
            self.crash_at = None
            raise Crash(f"injected crash after writing batch {batch_id}, before Spark commits it")


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def planner_pids() -> list[int]:
    """This test's Spark Python streaming-source runners (where latestOffset/commit run):
    descendants of this process only, never another Spark on the machine."""
    me, pids = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"python_streaming_source_runner" not in cmd:
                continue
            pid = int(entry.name)
            while pid > 1 and pid != me:
                pid = _parent(pid)
            if pid == me:
                pids.append(int(entry.name))
    return pids


def test_restarts_at_ten_points_deliver_exactly_once(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"restarts-{unique}", 3)
    # ~900 entries, 15 per micro-batch: more than twice the batches the ten runs use up.
    sent = produce(pulsar_client, topic, 3600, batch=6) + produce(pulsar_client, topic, 300, prefix="single")
    checkpoint = str(tmp_path / "cp")
    store: dict[int, list] = {}
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger=15,
                          quotaStatePath=str(tmp_path / "quota.sqlite"))

    def start(sink: FaultySink, trigger: dict):
        return start_collecting(spark, opts, sink, checkpoint, **trigger)

    def last_batch() -> int:
        return max(store) if store else -1

    # Each point: how the run ends. Batch numbers are relative to the last batch stored so far.
    points = [
        ("stop between batches", "stop", 1),
        ("crash before the sink wrote (after planning and reading)", "before-write", 1),
        ("crash after the sink wrote, before Spark's commit", "after-write", 1),
        ("stop right after the first batch of a restart", "stop", 0),
        ("kill the planner process (SIGKILL)", "kill-planner", 1),
        ("crash before write on the re-run of a failed batch", "before-write", 0),
        ("stop between batches, later", "stop", 2),
        ("crash after write on a first batch after restart", "after-write", 0),
        ("kill the planner while batches run", "kill-planner", 2),
        ("stop during a batch (while the sink is writing)", "stop-during", 1),
    ]
    outcomes = []
    for name, how, ahead in points:
        sink = FaultySink(store)
        target = last_batch() + 1 + ahead
        gate = threading.Event()
        if how in ("before-write", "after-write"):
            sink.crash_at = (target, how)
        if how == "stop-during":
            original = sink.sink

            def slow_sink(df, batch_id, _original=original, _target=target, _gate=gate):
                if batch_id == _target:
                    _gate.set()
                    time.sleep(2)  # the query is stopped while this batch is in flight
                _original(df, batch_id)

            sink.sink = slow_sink  # type: ignore[method-assign]
        q = start(sink, {"processingTime": "100 milliseconds"})
        try:
            if how in ("before-write", "after-write"):
                with pytest.raises(StreamingQueryException, match="injected crash"):
                    q.awaitTermination(120)
            elif how == "kill-planner":
                wait_until(lambda: last_batch() >= target, 120, what=f"batch {target}")
                pids = planner_pids()
                assert pids, "no streaming source runner process found"
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                with pytest.raises(StreamingQueryException):
                    q.awaitTermination(120)
            elif how == "stop-during":
                assert gate.wait(120), f"batch {target} never started"
                q.stop()
            else:
                wait_until(lambda: last_batch() >= target, 120, what=f"batch {target}")
                q.stop()
        finally:
            if q.isActive:
                q.stop()
        outcomes.append((name, sink.seen_batches[:1], last_batch()))

    # Finish the backlog from the checkpoint, in larger batches (a read limit may change on restart).
    final = FaultySink(store)
    q = start_collecting(spark, {**opts, "maxEntriesPerTrigger": "300"}, final, checkpoint, availableNow=True)
    assert q.awaitTermination(180) and q.exception() is None

    rows = [r for b in sorted(store) for r in store[b]]
    delivered = [identity(r) for r in rows]
    assert len(delivered) == len(set(delivered)), f"duplicates after restarts: {len(delivered) - len(set(delivered))}"
    assert set(delivered) == {sent_identity(s) for s in sent}, outcomes
    # The crashes really re-ran their batch: some run started at a batch another run had seen.
    assert len(outcomes) == 10


def test_pattern_topic_created_and_deleted(spark, broker, admin, pulsar_client, tmp_path, unique):
    from pulsar_throttled_source.topics import TopicName

    a = create_topic(admin, f"patdel-{unique}-a", 0)
    sent = produce(pulsar_client, a, 10)
    for fail in ("false", "true"):
        sink = Collected()
        opts = source_options(broker, None, topicsPattern=f"persistent://public/default/patdel-{unique}-.*",
                              startingOffsets="earliest", failOnDataLoss=fail)
        q = start_collecting(spark, opts, sink, tmp_path / fail, processingTime="200 milliseconds")
        try:
            wait_until(lambda: sink.count() >= 10, 60, what="first topic")
            b = create_topic(admin, f"patdel-{unique}-b{fail}", 2)
            extra = produce(pulsar_client, b, 8, prefix=f"b{fail}")
            # Deleted once all of it was read: a count would not say so (the second query also reads the
            # first one's extra messages on topic a), and a topic deleted under a running read task is
            # another case (the task waits for its entries up to pollTimeoutMs).
            wait_until(lambda: {s.payload for s in extra} <= {bytes(r.value) for r in sink.rows}, 60,
                       what="created topic picked up")
            admin.delete_topic(TopicName.parse(b), partitioned=True)
            if fail == "true":
                message = failure_of(q, 60)
                assert b in message and "deleted" in message
            else:
                more = produce(pulsar_client, a, 5, prefix="more")
                wait_until(lambda: sink.count() >= 23, 60, what="query continues after the deletion")
                assert q.isActive
                got = {bytes(r.value) for r in sink.rows}
                assert {s.payload for s in sent + extra + more} <= got
                assert len(sink.rows) == len(got)
        finally:
            if q.isActive:
                q.stop()
