"""Issue 2: the launcher's broker is real, and the admin endpoints behave as PLATFORM.md says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from helpers import create_topic, produce, wait_until

from pulsar_throttled_source import local_broker
from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.topics import TopicName


@pytest.mark.third_party
def test_produce_consume_round_trip(broker, pulsar_client, admin, unique):
    import pulsar

    topic = create_topic(admin, f"roundtrip-{unique}", 0)
    sent = produce(pulsar_client, topic, 20)
    reader = pulsar_client.create_reader(topic, pulsar.MessageId.earliest)
    got = [reader.read_next(5000) for _ in range(20)]
    reader.close()
    assert [m.data() for m in got] == [s.payload for s in sent]
    assert [m.properties() for m in got] == [s.properties for s in sent]


@pytest.mark.third_party
def test_partitioned_topic_created_through_admin(admin, unique):
    topic = TopicName.parse(f"parts-{unique}")
    admin.create_partitioned_topic(topic, 3)
    assert admin.partition_count(topic) == 3
    assert set(admin.partitioned_internal_stats(topic)) == {str(topic.partition(i)) for i in range(3)}
    admin.update_partitions(topic, 4)
    assert admin.partition_count(topic) == 4


def test_internal_stats_show_several_ledgers_after_rollover(admin, pulsar_client, unique):
    topic = create_topic(admin, f"ledgers-{unique}", 0)
    produce(pulsar_client, topic, 170)  # non-batched: 170 entries, 50 per ledger
    stats = admin.internal_stats(TopicName.parse(topic))
    layout = PartitionLayout.from_internal_stats(topic, stats)
    assert len(layout.ledgers) >= 4
    assert layout.total_entries == 170 == stats["entriesAddedCounter"]
    assert sum(l.size for l in layout.ledgers) == stats["totalSize"]
    last = admin.last_message_id(TopicName.parse(topic))
    assert (last["ledgerId"], last["entryId"]) == (layout.latest.ledger_id, layout.latest.entry_id)
    assert stats["lastConfirmedEntry"] == f"{layout.latest.ledger_id}:{layout.latest.entry_id}"


@pytest.mark.third_party
def test_stats_counters_and_batched_last_message_id(admin, pulsar_client, unique):
    topic = create_topic(admin, f"stats-{unique}", 0)
    produce(pulsar_client, topic, 40, batch=10)
    name = TopicName.parse(topic)
    stats = admin.stats(name)
    assert stats["msgInCounter"] == 40
    assert stats["bytesInCounter"] > 0
    assert {"msgRateIn", "msgThroughputIn"} <= set(stats)
    internal = admin.internal_stats(name)
    assert internal["entriesAddedCounter"] == 4  # 10 messages per entry
    last = admin.last_message_id(name)
    assert last["batchIndex"] == 9


@pytest.mark.third_party
def test_topic_level_dispatch_rate_set_and_read_back(admin, unique):
    name = TopicName.parse(create_topic(admin, f"policy-{unique}", 2))
    rate = {"dispatchThrottlingRateInMsg": 123, "dispatchThrottlingRateInByte": 4567, "relativeToPublishRate": False, "ratePeriodInSecond": 2}
    admin.set_dispatch_rate(name, rate)
    # Topic policies are applied asynchronously through the system topic.
    wait_until(lambda: (admin.dispatch_rate(name, applied=False) or {}).get("dispatchThrottlingRateInMsg") == 123, 30, what="topic policy")
    applied = admin.dispatch_rate(name, applied=True)
    assert {k: applied[k] for k in rate} == rate
    admin.set_subscription_dispatch_rate(name, {"dispatchThrottlingRateInMsg": 7})
    wait_until(lambda: (admin.subscription_dispatch_rate(name, applied=True) or {}).get("dispatchThrottlingRateInMsg") == 7, 30,
               what="subscription policy")


def _get_status(url: str, tok: str | None) -> int:
    req = urllib.request.Request(url)
    if tok:
        req.add_header("Authorization", f"Bearer {tok}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def test_cli_start_with_auth_token_status_stop(tmp_path):
    """The CLI's start/status/stop, with `--auth-token` (issue 6): one broker start covers both."""
    data = tmp_path / "cli-auth-broker"
    cli = [sys.executable, "-m", "pulsar_throttled_source.local_broker"]
    out = subprocess.run([*cli, "start", "--auth-token", "--data-dir", str(data)], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(info) == {"serviceUrl", "adminUrl", "pid", "dataDir"}
    try:
        tok = local_broker.admin_token(data)
        assert tok and (data / "auth" / "secret.key").exists()
        assert tok not in out.stdout + out.stderr  # the CLI says where the token is, never the token
        url = f"{info['adminUrl']}/admin/v2/namespaces/public"
        assert _get_status(url, None) == 401
        assert _get_status(url, local_broker.make_token(os.urandom(32), "admin")) == 401
        assert _get_status(url, tok) == 200
        status = subprocess.run([*cli, "status", "--data-dir", str(data)], capture_output=True, text=True, timeout=30)
        assert status.returncode == 0 and json.loads(status.stdout)["running"] is True
    finally:
        stop = subprocess.run([*cli, "stop", "--data-dir", str(data)], capture_output=True, text=True, timeout=60)
    assert json.loads(stop.stdout) == {"stopped": True}
    assert not local_broker.pid_alive(info["pid"])
    status = subprocess.run([*cli, "status", "--data-dir", str(data)], capture_output=True, text=True, timeout=30)
    assert status.returncode == 1 and json.loads(status.stdout)["running"] is False


def test_cli_clear_error_when_java_missing(tmp_path, monkeypatch):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # neither java nor mvn on PATH
    out = subprocess.run([sys.executable, "-m", "pulsar_throttled_source.local_broker", "start", "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert "Java 17" in out.stderr and "Traceback" not in out.stderr


def test_cli_clear_error_when_maven_missing(tmp_path):
    import shutil

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "java").symlink_to(shutil.which("java"))
    env = {"PATH": str(bindir), "HOME": str(tmp_path), local_broker.CACHE_ENV: str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-m", "pulsar_throttled_source.local_broker", "start", "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert "Maven" in out.stderr and "Traceback" not in out.stderr
