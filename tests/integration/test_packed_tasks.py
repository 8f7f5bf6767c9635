"""A throttled query's small micro-batches run as about one task per core (smallBatchTasks, default 2), not one
per partition, and any batch in at most maxTasksPerTrigger tasks (issue 44): each task reads several partitions'
ranges in turn, and every payload arrives once.
The task counts are Spark's own (its status tracker), not the planner's."""

from __future__ import annotations

from collections import Counter

from helpers import create_topic, produce
from streaming import identity, read_stream, sent_identity, source_options


def tasks_per_job(spark, query) -> list[int]:
    """The tasks Spark ran for each job of the query (a streaming query's jobs are in the job group of its run id)."""
    tracker = spark.sparkContext.statusTracker()
    out = []
    for job in sorted(tracker.getJobIdsForGroup(str(query.runId))):
        info = tracker.getJobInfo(job)
        stages = [tracker.getStageInfo(s) for s in info.stageIds] if info is not None else []
        out.append(sum(s.numTasks for s in stages if s is not None))
    return out


def drain(spark, opts: dict, name: str, tmp_path) -> tuple[list, list, list[int]]:
    """Run an AvailableNow query into a memory table: its progress reports that read rows, the rows, and the tasks
    of each of its jobs."""
    query = (read_stream(spark, opts).writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
        assert query.exception() is None, query.exception()
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        return batches, spark.table(name).collect(), tasks_per_job(spark, query)
    finally:
        query.stop()


def test_small_throttled_batches_on_four_partitions_run_in_two_tasks(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"packed-{unique}", 4)
    sent = produce(pulsar_client, topic, 80)  # unbatched: 20 entries per partition
    # 12 entries per partition a window: every batch reads all four partitions (2 or more batches), ~1 KB a batch.
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch",
                          dispatchThrottlingRatePerTopicInMsg="12", quotaStatePath=tmp_path / "q.sqlite")
    batches, delivered, tasks = drain(spark, opts, f"packed_{unique}", tmp_path)
    assert Counter(identity(r) for r in delivered) == Counter(sent_identity(s) for s in sent)  # each payload once
    assert len(batches) >= 2, [p["numInputRows"] for p in batches]
    # One job per batch that read rows, each of 2 tasks carrying the ranges of 4 partitions.
    assert tasks == [2] * len(batches), tasks


def test_every_batch_runs_in_at_most_max_tasks_per_trigger(spark, broker, admin, pulsar_client, tmp_path, unique):
    topic = create_topic(admin, f"capped-{unique}", 4)
    # A batching producer and a plain one on the same partitions: entries of 10 messages and of one.
    sent = produce(pulsar_client, topic, 200, batch=10, prefix="batched") + produce(pulsar_client, topic, 40, prefix="single")
    # smallBatchTasks=0: only maxTasksPerTrigger packs these (small) batches; ~60 entries in ~3 batches.
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger="24", smallBatchTasks="0",
                          maxTasksPerTrigger="3")
    batches, delivered, tasks = drain(spark, opts, f"capped_{unique}", tmp_path)
    assert Counter(identity(r) for r in delivered) == Counter(sent_identity(s) for s in sent)  # each payload once
    assert len(batches) >= 2 and len(tasks) == len(batches), (tasks, [p["numInputRows"] for p in batches])
    # Batches over all four partitions run as 3 tasks (one reads two partitions in turn), never as 4.
    assert max(tasks) == 3 and all(t <= 3 for t in tasks), tasks
