"""Issue 39: the status command (python -m pulsar_throttled_source.status) against a stopped query's checkpoint
and the real broker: each partition's committed position and lag equal what the topic holds beyond the
committed offset, the time lag is that of the oldest unread message, the quota buckets are the query's;
and a checkpoint of another source, or none, is a clear error at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from helpers import create_topic, produce, wait_until
from streaming import Collected, entry_of, source_options, start_collecting

PARTITIONS = 2
MESSAGES = 60  # one per entry, round-robin: 30 per partition
QUOTA = 4  # entries per partition per second: several batches, stopped well before the end


def run_status(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pulsar_throttled_source.status", *args], capture_output=True, text=True,
                          timeout=120)


def committed_id(checkpoint: Path) -> int:
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def test_status_of_a_stopped_query_is_what_the_topic_holds_beyond_its_committed_offset(spark, broker, admin, pulsar_client,
                                                                                         unique, tmp_path):
    topic = create_topic(admin, f"status-{unique}", PARTITIONS)
    produce_started = time.time()
    sent = produce(pulsar_client, topic, MESSAGES)
    produced = time.time()
    quota_path = tmp_path / "quota.sqlite"
    checkpoint = tmp_path / "cp"
    sink = Collected()
    opts = source_options(broker, topic, startingOffsets="earliest", throttlingMode="batch", subscription="status-sub",
                          dispatchThrottlingRatePerTopicInMsg=QUOTA, quotaStatePath=quota_path)
    q = start_collecting(spark, opts, sink, checkpoint, processingTime="1 second")
    try:
        wait_until(lambda: sink.count() >= 3 * PARTITIONS * QUOTA or not q.isActive, 120, what="three batches")
    finally:
        q.stop()
    assert q.exception() is None
    batch_id = committed_id(checkpoint)
    delivered = [r for b in sorted(sink.batches) if b <= batch_id for r in sink.batches[b]]
    assert 0 < len(delivered) < MESSAGES

    # What the topic holds beyond the committed offset, from what was sent and what the committed batches delivered.
    names = [f"{topic}-partition-{i}" for i in range(PARTITIONS)]
    expected = {}
    for i, name in enumerate(names):
        read = max(entry_of(bytes(r.messageId)) for r in delivered if r.partition == i)
        entries = sorted(s.position[:2] for s in sent if s.partition == i)
        expected[name] = {"committed": {"ledgerId": read[0], "entryId": read[1]},
                          "latest": {"ledgerId": entries[-1][0], "entryId": entries[-1][1]},
                          "behind": sum(1 for e in entries if e > read)}

    started = time.time()
    done = run_status("--checkpoint", str(checkpoint), "--admin-url", broker.admin_url, "--subscription", "status-sub",
                      "--quota-state-path", str(quota_path), "--option", f"dispatchThrottlingRatePerTopicInMsg={QUOTA}", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["batchId"], report["checkpoint"], report["subscription"]) == (batch_id, str(checkpoint), "status-sub")
    assert report["entriesBehindLatest"] == report["messagesBehindLatest"] == MESSAGES - len(delivered)
    assert report["partitions"] == PARTITIONS and report["maxEntriesBehindLatest"] == max(e["behind"] for e in expected.values())
    for name in names:
        row = report["perPartition"][name]
        want = expected[name]
        assert (row["committed"], row["latest"], row["entriesBehind"], row["messagesBehind"]) == (
            want["committed"], want["latest"], want["behind"], want["behind"]), (name, row, want)
        # The oldest unread message was published while the backlog was produced, before the query started.
        assert started - produced - 1 <= row["secondsBehind"] <= time.time() - produce_started + 1, row
    assert report["secondsBehindLatest"] == max(r["secondsBehind"] for r in report["perPartition"].values())
    # The query's topic buckets, one per partition, read from its SQLite store.
    assert report["quota"]["store"] == f"sqlite:{quota_path}"
    assert report["quota"]["levels"]["topic"]["buckets"] == PARTITIONS
    assert set(report["quota"]["buckets"]) == {f"topic:options:{name}" for name in names}

    table = run_status("--checkpoint", str(checkpoint), "--admin-url", broker.admin_url, "--quota-state-path", str(quota_path))
    assert table.returncode == 0, table.stderr
    assert f"batch {batch_id} committed" in table.stdout and f"Behind: {MESSAGES - len(delivered)} entries" in table.stdout
    assert all(name in table.stdout for name in names) and "topic" in table.stdout.split("Quota store", 1)[1]


def test_a_checkpoint_of_another_source_or_none_is_a_clear_error(spark, broker, tmp_path):
    other = tmp_path / "rate-cp"
    q = (spark.readStream.format("rate").option("rowsPerSecond", "5").load().writeStream.format("noop")
         .option("checkpointLocation", str(other)).trigger(processingTime="1 second").start())
    try:
        wait_until(lambda: (other / "commits").is_dir() and any(p.name.isdigit() for p in (other / "commits").iterdir()), 60,
                   what="a committed batch of the rate source")
    finally:
        q.stop()
    for checkpoint, message in ((other, f"{other} is a checkpoint of another source"),
                                (tmp_path / "none", f"No checkpoint at {tmp_path / 'none'}: the directory does not exist")):
        started = time.monotonic()
        done = run_status("--checkpoint", str(checkpoint), "--admin-url", broker.admin_url)
        assert done.returncode == 2 and message in done.stderr and "pulsar-throttled" in done.stderr, done.stderr
        assert done.stdout == "" and time.monotonic() - started < 10
