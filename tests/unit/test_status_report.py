"""The status command (status.py, checkpoint_log.py, status_quota.py; issue 39) on made-up checkpoints, a
fake admin API and real quota stores: which batch counts as committed, the clear errors, the lag arithmetic,
the publish-time lookups it costs, the quota buckets it reads (and never writes), and its output."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest
from builders import P0, P1, URLS, layout, stored_keys
from fakes import FakeAdmin

from pulsar_throttled_source import status as status_mod
from pulsar_throttled_source.admin_endpoint import QuotaStoreEndpoint
from pulsar_throttled_source.checkpoint_log import CheckpointError, committed_batch
from pulsar_throttled_source.metadata.catalog import CatalogSnapshot, PublishStats
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planning.progress import partition_lags
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.status_quota import quota_state
from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
from pulsar_throttled_source.throttling.store import BucketState

QUERY_ID = "0123456789abcdef0123456789abcdef"
KAFKA = '{"orders":{"0":12,"1":7}}'
TOPIC = "persistent://public/default/t"


def offset_line(positions: dict[str, tuple[int, int]], query_id: str | None = QUERY_ID) -> str:
    value: dict = {p: {"ledgerId": l, "entryId": e} for p, (l, e) in positions.items()}
    if query_id:
        value["queryId"] = query_id
    return json.dumps(value)


def write_checkpoint(root: Path, batches: dict[int, list[str]], committed: list[int]) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"7f1c0a52-0000-4000-8000-000000000000"}')
    for batch_id, lines in batches.items():
        (root / "offsets" / str(batch_id)).write_text("\n".join(["v1", '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}', *lines]))
        (root / "offsets" / f".{batch_id}.crc").write_text("x")
    for batch_id in committed:
        (root / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_the_newest_batch_with_a_commit_file_is_the_committed_position(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", {0: [offset_line({P0: (5, 3)})], 1: [offset_line({P0: (5, 9)})],
                                            2: [offset_line({P0: (5, 15)})]}, committed=[0, 1])
    batch = committed_batch(cp)
    assert (batch.batch_id, batch.source, batch.offset.query_id) == (1, 0, QUERY_ID)
    assert batch.offset.positions == {P0: EntryPosition(5, 9)}  # batch 2 is planned, not committed: re-run on restart


def test_this_source_is_found_among_a_querys_sources(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", {0: [KAFKA, "-", offset_line({P1: (6, 1)})]}, committed=[0])
    batch = committed_batch(cp)
    assert (batch.source, batch.offset.positions) == (2, {P1: EntryPosition(6, 1)})
    with pytest.raises(CheckpointError, match="source 0 of the query is not a pulsar-throttled source"):
        committed_batch(cp, source=0)
    two = write_checkpoint(tmp_path / "two", {0: [offset_line({P0: (5, 1)}), offset_line({P1: (6, 1)})]}, committed=[0])
    with pytest.raises(CheckpointError, match=r"sources \[0, 1\]; say which one with --source"):
        committed_batch(two)
    assert committed_batch(two, source=1).offset.positions == {P1: EntryPosition(6, 1)}


@pytest.mark.parametrize("case,expected", [
    ("missing", "No checkpoint at {cp}: the directory does not exist"),
    ("no-offsets", "{cp} is not a streaming query's checkpoint: it has no offsets/ folder"),
    ("uncommitted", "{cp}: no micro-batch is committed yet (offsets/ holds batch 0, commits/ has no matching batch)"),
    ("empty", "{cp}: no micro-batch is committed yet (offsets/ is empty"),
    ("kafka", "{cp} is a checkpoint of another source: its committed batch 0 (offsets/0) holds no offset of the pulsar-throttled source"),
])
def test_a_checkpoint_that_is_missing_another_sources_or_uncommitted_is_a_clear_error(tmp_path, case, expected):
    cp = tmp_path / "cp"
    if case == "no-offsets":
        cp.mkdir()
    elif case == "uncommitted":
        write_checkpoint(cp, {0: [offset_line({P0: (5, 3)})]}, committed=[])
    elif case == "empty":
        write_checkpoint(cp, {}, committed=[])
    elif case == "kafka":
        write_checkpoint(cp, {0: [KAFKA]}, committed=[0])
    with pytest.raises(CheckpointError) as err:
        committed_batch(cp)
    assert expected.format(cp=cp) in str(err.value)
    assert "Expected" in str(err.value)  # and what was expected
    started = time.monotonic()
    assert status_mod.main(["--checkpoint", str(cp), "--admin-url", "http://127.0.0.1:9"]) == 2  # never asks the broker
    assert time.monotonic() - started < 2


def test_lag_per_partition_in_entries_messages_and_seconds_after_the_committed_position():
    now = 1_000_000.0
    # P0: ledger 5 (20 entries) then 7 (10), 3 messages each by its counters; P1: 10 entries, caught up.
    snap = CatalogSnapshot(0.0, {P0: layout(P0, [(5, 20), (7, 10)]), P1: layout(P1, [(6, 10)])},
                           {P0: PublishStats(90, 9000, 0.0, 0.0)})
    committed = {P0: EntryPosition(5, 9), P1: EntryPosition(6, 9), "persistent://public/default/gone-partition-0": EntryPosition(3, 1)}
    lags = partition_lags(snap, committed)
    report = status_mod.lag_report(snap, committed, lags, {P0: int((now - 42.5) * 1000)}, now)
    assert {k: v for k, v in report.items() if k != "perPartition"} == {
        "entriesBehindLatest": 20, "maxEntriesBehindLatest": 20, "avgEntriesBehindLatest": 10.0,
        "messagesBehindLatest": 60, "maxMessagesBehindLatest": 60, "avgMessagesBehindLatest": 30.0,
        "secondsBehindLatest": 42.5, "partitions": 2, "partitionsBehind": 1}
    assert report["perPartition"][P0] == {"committed": {"ledgerId": 5, "entryId": 9}, "latest": {"ledgerId": 7, "entryId": 9},
                                          "entriesBehind": 20, "messagesBehind": 60, "secondsBehind": 42.5}
    assert report["perPartition"][P1]["entriesBehind"] == 0 and report["perPartition"][P1]["secondsBehind"] == 0.0
    # A partition of the checkpoint the broker no longer holds: no end, no lag.
    assert report["perPartition"]["persistent://public/default/gone-partition-0"]["latest"] is None


def test_one_publish_time_lookup_per_partition_behind_within_the_timeout():
    admin = FakeAdmin()
    admin.slow = {P1}
    started = time.monotonic()
    found = status_mod.oldest_unread_ms(admin, {P0: EntryPosition(5, 10), P1: EntryPosition(6, 3)}, 0.5)
    assert time.monotonic() - started < 1.5
    assert found == {P0: 1704067200000}  # P1's answer came too late: no time lag, never a wrong one
    assert sorted(admin.header_lookups) == [(P0, 5, 10), (P1, 6, 3)]
    assert status_mod.oldest_unread_ms(admin, {}, 0.5) == {}


def test_quota_buckets_are_read_rolled_to_now_and_never_created(tmp_path):
    path = tmp_path / "quota.sqlite"
    opts = parse_options({**URLS, "topic": TOPIC, "quotaStatePath": str(path), "subscription": "s",
                          "dispatchThrottlingRatePerTopicInMsg": "10", "dispatchThrottlingRateInMsg": "100"})
    missing = quota_state(opts, QUERY_ID, [P0, P1], 1000.5)
    assert "no quota store file" in missing["error"] and not path.exists()
    store = SqliteQuotaStore(str(path))
    with store.transaction() as tx:
        tx.put_many({f"topic:options:{P0}": BucketState(1000, 25.0, 0.0),  # this window, 15 over: debt
                     f"topic:options:{P1}": BucketState(990, 30.0, 0.0),  # long ago: paid back
                     f"source:{QUERY_ID}": BucketState(1000, 40.0, 0.0),
                     f"topic:broker:{P0}": BucketState(1000, 3.0, 0.0),
                     f"topic:options:{TOPIC}-partition-9": BucketState(1000, 1.0, 0.0)})  # not this query's
    state = quota_state(opts, QUERY_ID, [P0, P1], 1000.5)
    assert state["levels"] == {
        "sourceWide": {"buckets": 1, "windowUsed": 0.4, "debtMessages": 0.0, "debtBytes": 0.0, "lastChargedSecondsAgo": 0.5},
        "topic": {"buckets": 2, "windowUsed": 1.0, "debtMessages": 15.0, "debtBytes": 0.0, "lastChargedSecondsAgo": 0.5},
        "brokerTopic": {"buckets": 1, "windowUsed": None, "debtMessages": 0.0, "debtBytes": 0.0, "lastChargedSecondsAgo": None}}
    assert state["buckets"][f"topic:options:{P1}"]["usedMessages"] == 0.0
    assert state["store"] == f"sqlite:{path}"
    assert stored_keys(store) == sorted([f"topic:options:{P0}", f"topic:options:{P1}", f"source:{QUERY_ID}",
                                           f"topic:broker:{P0}", f"topic:options:{TOPIC}-partition-9"])  # nothing written


def test_the_command_reports_from_the_checkpoint_in_json_and_as_a_table(tmp_path, monkeypatch, capsys):
    admin = FakeAdmin()
    admin.partitions[TOPIC] = 2
    admin.entries = {f"{TOPIC}-partition-0": 10, f"{TOPIC}-partition-1": 4}  # ledger 7
    admin.transactions = False
    monkeypatch.setattr(status_mod.PulsarAdmin, "at", classmethod(lambda cls, endpoint, **kw: admin))
    cp = write_checkpoint(tmp_path / "cp", {0: [offset_line({f"{TOPIC}-partition-0": (7, 3), f"{TOPIC}-partition-1": (7, 3)})]},
                          committed=[0])
    secret = "token:eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl"
    (tmp_path / "options.json").write_text(json.dumps({"pulsar.client.authParams": secret}))
    args = ["--checkpoint", str(cp), "--admin-url", "http://broker:8080", "--quota-state-path", str(tmp_path / "q.sqlite"),
            "--option", "pulsar.client.authPluginClassName=org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "--options-file", str(tmp_path / "options.json")]
    assert status_mod.main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["batchId"], report["queryId"], report["entriesBehindLatest"], report["partitionsBehind"]) == (0, QUERY_ID, 6, 1)
    assert report["perPartition"][f"{TOPIC}-partition-0"]["latest"] == {"ledgerId": 7, "entryId": 9}
    assert report["secondsBehindLatest"] > 0 and "no quota store file" in report["quota"]["error"]
    assert status_mod.main(args) == 0
    out = capsys.readouterr().out
    assert f"{TOPIC}-partition-0" in out and "Behind: 6 entries (max 6, avg 3.0)" in out and "eyJ" not in out


@pytest.mark.parametrize("option", ["pulsar.client.authParams", "pulsar.admin.auth_params", "pulsar.client.authToken", "quotaStorePassword"])
def test_the_command_takes_no_secret_on_its_command_line(tmp_path, capsys, option):
    cp = write_checkpoint(tmp_path / "cp", {0: [offset_line({f"{TOPIC}-partition-0": (7, 3)})]}, committed=[0])
    assert status_mod.main(["--checkpoint", str(cp), "--option", f"{option}=s3cret-value"]) == 1
    err = capsys.readouterr().err
    assert f"--option {option}: a secret is not taken from the command line; give it in --options-file" in err
    assert "s3cret-value" not in err and ((status_mod.PASSWORD_ENV in err) == (option == "quotaStorePassword"))


def test_the_redis_password_comes_from_the_environment_and_a_password_in_the_url_is_refused(tmp_path, monkeypatch, capsys):
    cp = write_checkpoint(tmp_path / "cp", {0: [offset_line({f"{TOPIC}-partition-0": (7, 3)})]}, committed=[0])
    monkeypatch.setenv(status_mod.PASSWORD_ENV, "pw-from-env")
    args = argparse.Namespace(options_file=None, option=[], admin_url="http://broker.example:8080", subscription=None,
                              quota_state_path=None, quota_store="redis://reader@redis.example:6379/0")
    options = status_mod.source_options(args, committed_batch(str(cp), None))
    assert options.quota_store == QuotaStoreEndpoint("redis://redis.example:6379/0", "reader", "pw-from-env")
    assert status_mod.main(["--checkpoint", str(cp), "--admin-url", "http://broker.example:8080",
                            "--quota-store", "redis://:pw-in-url@redis.example:6379/0"]) == 1
    err = capsys.readouterr().err
    assert "option 'quotaStorePassword'" in err and "pw-in-url" not in err
