"""The sink under failures and on a secured broker: a query killed (SIGKILL) in the middle of a micro-batch and
restarted from its checkpoint; a topic whose broker publish-rate policy is lower than the write's quota, with a
producer queue that fills; a batch write and a stream to a broker with TLS and token authentication, with no secret
in the application's output, its plans or its event log. Read back with the plain Python client: exact payload
multisets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pulsar
import pytest
import requests
from conftest import SAME_MESSAGE_LIMIT, TEST_BROKER_JVM
from helpers import create_namespace, create_topic, produce, wait_until
from native_path import needs_native_path
from secrecy import assert_no_secret, files_text
from secured_broker import SecuredBroker, secured_broker
from sink_checks import entry_sizes, read_back, sink_options

JOBS = Path(__file__).parent / "fault_jobs"
WRITER = "writer"  # the secured broker's role that may produce on SECURED_NAMESPACE, nothing else
SECURED_NAMESPACE, SECURED_ROWS = "sink/out", 40
ROWS, BATCH_ENTRIES, QUOTA = 80, 6, 4  # 20 entries of 4 messages: ~4 micro-batches, each ~3 s to write at 4 a second per partition
EO_BATCH = 3  # effectivelyOnce's batches (pulsar.producer.batchingMaxMessages): a micro-batch's task sends two per partition


class Job:
    """fault_jobs/sink_kill_job.py in a process group of its own (driver, JVM, Python workers), its output read as it comes."""

    def __init__(self, spec: dict, log: Path) -> None:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        self.lines: list[str] = []
        self._log = open(log, "w")  # noqa: SIM115 (closed in wait/kill)
        self.proc = subprocess.Popen([sys.executable, str(JOBS / "sink_kill_job.py"), json.dumps(spec)], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=self._log, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def progress(self, name: str) -> list[tuple[int, int]]:
        """(batch id, rows) of each micro-batch Spark reported for query `name` (reported after its commit)."""
        return [(int(b), int(n)) for kind, q, b, n in (line.split() for line in list(self.lines) if line.startswith("PROGRESS "))
                if q == name]

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self._reader.join(30)
        self._log.close()

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self._reader.join(30)
            self._log.close()


@pytest.fixture(scope="module")
def sb(tmp_path_factory) -> SecuredBroker:
    """A broker with TLS on both ports, token authentication and authorization; WRITER may produce on one namespace."""
    with secured_broker(tmp_path_factory.mktemp("sink-secured"), roles=[WRITER], broker_config=dict(SAME_MESSAGE_LIMIT),
                        jvm_options=TEST_BROKER_JVM) as b:
        for method, path, body in [("PUT", "/admin/v2/tenants/sink", {"adminRoles": [], "allowedClusters": ["standalone"]}),
                                   ("PUT", f"/admin/v2/namespaces/{SECURED_NAMESPACE}", None),
                                   ("POST", f"/admin/v2/namespaces/{SECURED_NAMESPACE}/permissions/{WRITER}", ["produce"]),
                                   ("PUT", f"/admin/v2/persistent/{SECURED_NAMESPACE}/written/partitions", 2)]:
            answer = b.admin_request(method, path, json=body)
            assert answer.status_code in (200, 204), (path, answer.status_code, answer.text)
        yield b


def messages_in(admin, topic: str) -> int:
    """Messages the broker persisted on the partitioned `topic` so far (its partitions' msgInCounter)."""
    path = topic.replace("persistent://", "persistent/")
    stats = requests.get(f"{admin.base}/admin/v2/{path}/partitioned-stats", timeout=30)
    stats.raise_for_status()
    return int(stats.json()["msgInCounter"])


# The Python sender with the default producer queue and one of 5 that fills; the native sender (it paces its sends in
# C: native/src/send_tasks.c, pns_task_pace) with the default queue, where its sends timed out before it paced them.
@pytest.mark.parametrize("send_path,queues", [("python", ("1000", "5")),
                                              pytest.param("native", ("1000",), marks=needs_native_path)])
def test_a_broker_publish_rate_below_the_quota_slows_the_write_and_nothing_fails(spark, broker, admin, pulsar_client, unique,
                                                                                 send_path, queues):
    """The namespace's publish-rate policy (10 messages a second per partition) is below the write's quota (1000): the
    broker holds the producers back and the tasks wait, with sends timing out after 5 s while a write takes 6 s at the
    broker's pace. With the default producer queue (1000 messages: the sink keeps fewer in flight), and with a queue of
    5 that fills: every row once, nothing fails, the broker's pace kept."""
    namespace = create_namespace(admin, f"public/sink-slow-{send_path}-{unique}")
    rate, rows = 10, 120  # 60 a partition: 6 s at the broker's rate, more than the send timeout
    requests.post(f"{admin.base}/admin/v2/namespaces/{namespace}/publishRate",
                  json={"publishThrottlingRateInMsg": rate, "publishThrottlingRateInByte": -1}, timeout=30).raise_for_status()
    for queue in queues:
        topic = create_topic(admin, f"{namespace}/slow-{queue}", 2)
        df = spark.range(rows, numPartitions=2).selectExpr("concat('k', id % 5) as key", "cast(concat('slow-', id) as binary) as value")
        # Without batching: the broker paces each message (a batch is one entry: it passes whole, and the broker holds
        # the producer back after it, so a write this small would end in one batch before the policy shows).
        options = sink_options(broker, topic, publishThrottlingRateInMsg="1000", sendPath=send_path,
                               **{"pulsar.producer.maxPendingMessages": queue, "pulsar.producer.sendTimeoutMillis": "5000",
                                  "pulsar.producer.batchingEnabled": "false"})
        df.write.format("pulsar-throttled").options(**options).mode("append").save()

        per_second: Counter[tuple[int, int]] = Counter()
        got: Counter[tuple[bytes, str]] = Counter()
        for partition in pulsar_client.get_topic_partitions(topic):
            reader = pulsar_client.create_reader(partition, pulsar.MessageId.earliest)
            try:
                while reader.has_message_available():
                    m = reader.read_next(10_000)
                    got[(m.data(), m.partition_key())] += 1
                    per_second[(m.message_id().partition(), m.publish_timestamp() // 1000)] += 1
            finally:
                reader.close()
        assert got == Counter((f"slow-{i}".encode(), f"k{i % 5}") for i in range(rows)), queue
        for p in (0, 1):
            seconds = sorted(s for part, s in per_second if part == p)
            held = sum(per_second[(p, s)] for s in seconds)
            assert seconds[-1] - seconds[0] >= held // rate - 2, (queue, p, seconds)  # the broker's pace, not the quota's


@pytest.mark.timeout(900)  # two Spark applications one after the other (the killed one and its restart)
def test_a_query_killed_mid_batch_and_restarted_writes_every_row_once_effectively_once(broker, admin, pulsar_client, unique, sb,
                                                                                       tmp_path):
    """Two queries in one Spark application, effectivelyOnce and atLeastOnce, each a stream of this source written back
    under a write quota. The application is killed (SIGKILL, its whole process group) when each query has written some
    rows of a micro-batch after the first and Spark has not committed that batch, then run again on the same checkpoints:
    effectivelyOnce (in batches of EO_BATCH: the kill leaves one open, its rows unsent) holds every row once; atLeastOnce writes that batch's rows again (so the test can fail).
    The run after the restart also writes to the secured broker (one Spark application for both: see
    check_the_secured_write)."""
    namespace = create_namespace(admin, f"public/sink-kill-{unique}")
    requests.post(f"{admin.base}/admin/v2/namespaces/{namespace}/deduplication", json=True, timeout=30).raise_for_status()
    targets = {"eo": create_topic(admin, f"{namespace}/eo", 2), "alo": create_topic(admin, f"sink-kill-alo-{unique}", 2)}
    sources = {g: create_topic(admin, f"sink-kill-src-{g}-{unique}", 2) for g in targets}
    sent = {g: produce(pulsar_client, sources[g], ROWS, batch=4, prefix=f"{g}") for g in targets}
    checkpoints = {g: tmp_path / f"checkpoint-{g}" for g in targets}
    guarantees = {"eo": "effectivelyOnce", "alo": "atLeastOnce"}
    spec = {"service_url": broker.service_url, "admin_url": broker.admin_url, "quota_path": str(tmp_path / "quota.sqlite"),
            "runs": [{"name": g, "source": sources[g], "topic": targets[g], "guarantee": guarantees[g], "checkpoint": str(checkpoints[g]),
                      "max_entries": BATCH_ENTRIES, "quota": QUOTA,
                      "options": {"pulsar.producer.batchingMaxMessages": str(EO_BATCH)} if g == "eo" else {}} for g in targets]}

    job = Job(spec, tmp_path / "killed-run.log")
    in_flight: dict[str, int] = {}

    def mid_batch() -> bool:
        """Each query: a micro-batch after the first planned (in offsets/) and not committed (commits/), every committed
        one reported, and more messages on the topic than the committed ones hold: some of the open batch's rows."""
        for g in targets:
            planned = [int(p.name) for p in (checkpoints[g] / "offsets").glob("[0-9]*")]
            committed = {int(p.name) for p in (checkpoints[g] / "commits").glob("[0-9]*")}
            batch = max(planned, default=-1)
            reported = dict(job.progress(g))  # batch id -> rows, printed by the job after the batch's commit
            if batch < 1 or batch in committed or not committed <= set(reported):
                return False
            if messages_in(admin, targets[g]) <= sum(reported[b] for b in committed):
                return False
            in_flight[g] = batch
        return True

    try:
        wait_until(lambda: job.proc.poll() is not None or mid_batch(), 600, 0.05,
                   what=f"both queries in the middle of a micro-batch (job output: {job.lines}, log: {tmp_path})")
        assert job.proc.poll() is None, f"the job ended before it was killed: {job.lines}"
    finally:
        job.kill()
    for g, batch in in_flight.items():  # killed before Spark committed the batch whose rows (some or all) were on the topic
        assert not (checkpoints[g] / "commits" / str(batch)).exists() and (checkpoints[g] / "offsets" / str(batch)).exists(), g

    token = sb.token(WRITER)
    events = tmp_path / "events"
    events.mkdir()
    rerun_spec = {**spec, "spark_conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
                                         "spark.eventLog.compress": "false"},
                  "secured": {"service_url": sb.service_url_tls, "admin_url": sb.admin_url_tls, "rows": SECURED_ROWS,
                              "topic": f"persistent://{SECURED_NAMESPACE}/written", "checkpoint": str(tmp_path / "checkpoint-secured"),
                              "options": {"pulsar.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                                          "pulsar.client.authParams": f"token:{token}",
                                          "pulsar.client.tlsTrustCertsFilePath": str(sb.certs.ca)}}}
    rerun = Job(rerun_spec, tmp_path / "restarted-run.log")
    assert rerun.wait(300) == 0, (tmp_path / "restarted-run.log").read_text()[-3000:]
    assert {f"DONE {g}" for g in targets} <= set(rerun.lines), rerun.lines
    for g, batch in in_flight.items():  # the restart ran the killed micro-batch again
        assert rerun.progress(g)[0][0] == batch, (g, rerun.progress(g))

    expected = {g: Counter((s.payload, s.key) for s in sent[g]) for g in targets}
    got = {g: Counter((m[1], m[2]) for m in read_back(pulsar_client, targets[g], None)) for g in targets}
    assert got["eo"] == expected["eo"]  # every row once
    sizes = entry_sizes(pulsar_client, targets["eo"])  # in batches of EO_BATCH, most of them full
    assert max(sizes) == EO_BATCH and sizes[EO_BATCH] * EO_BATCH > ROWS / 2, sizes
    assert set(got["alo"]) == set(expected["alo"]) and sum(got["alo"].values()) > ROWS  # the killed batch's rows twice
    check_the_secured_write(sb, rerun, token, tmp_path)


def check_the_secured_write(sb: SecuredBroker, job: Job, token: str, tmp_path: Path) -> None:
    """The batch write and the stream wrote every row once over TLS with WRITER's token (a role that may only produce),
    and neither the application's output (driver and executors, INFO from the secured writes on), explain() nor the
    event log shows the token."""
    assert {"SECURED batch done", "SECURED stream done"} <= set(job.lines), job.lines
    client = sb.client()
    try:
        got = Counter(m[1] for m in read_back(client, f"persistent://{SECURED_NAMESPACE}/written", None))
    finally:
        client.close()
    assert got == Counter([f"batch-{i}".encode() for i in range(SECURED_ROWS)] + [f"stream-{i}".encode() for i in range(SECURED_ROWS)])
    output = "\n".join(job.lines) + (tmp_path / "restarted-run.log").read_text(errors="replace")
    assert " INFO " in output and "WriteToMicroBatchDataSource" in output  # at INFO, and the stream's explain() printed
    event_log = files_text(tmp_path / "events")
    assert "SparkListenerSQLExecutionStart" in event_log  # the writes' plans are in it
    assert_no_secret({"the application's output": output, "the event log": event_log,
                      "the checkpoints": files_text(tmp_path / "checkpoint-secured")}, [token, token.rsplit(".", 1)[1]], tmp_path)
