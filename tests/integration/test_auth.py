"""Issue 6, item 6: token authentication against a real broker that requires it.

A second standalone broker runs with token authentication for this module. The source reads it
with the token given through options (`pulsar.client.authParams=token:...` or `file://...`, the
admin API taking the same token unless `pulsar.admin.authParams` is set); without a valid token
the query fails fast with a message naming the URL and the option to set. The token never shows
in errors, the query progress, the checkpoint or reprs (checked in process). Spark's JVM, its
planner process and the Python workers keep the file descriptors they were started with (by the
session-wide SparkSession), so capfd cannot see them: the suite's one spark-submit secrecy job
(test_secured_cluster.py) reads with a token given as `token:...` in options there, and fails
with a wrong token at the admin API and at the readers, and greps its whole output at INFO level.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pulsar
import pytest
from conftest import SAME_MESSAGE_LIMIT, TEST_BROKER_JVM
from helpers import create_topic, produce, quiet_logger
from pyspark.errors import AnalysisException
from streaming import Collected, available_now_side_by_side, failure_of, identity, read_stream, sent_identity
from topic_admin import TopicAdmin

from pulsar_throttled_source import local_broker
from pulsar_throttled_source.credentials import TokenAuth
from pulsar_throttled_source.local_broker import LocalBroker, make_token
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.metadata.admin_http import AdminError
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.positions import BEFORE_EARLIEST, EntryPosition
from pulsar_throttled_source.read_task import PartitionRange
from pulsar_throttled_source.stream import PulsarStreamReader

FAIL_BOUND_S = 60
FAST_CLIENT = {"pollTimeoutMs": "3000", "pulsar.client.operationTimeoutSeconds": "2", "pulsar.client.connectionTimeoutMs": "1000"}



@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory: pytest.TempPathFactory):
    with LocalBroker(data_dir=tmp_path_factory.mktemp("pulsar-auth"), max_entries_per_ledger=50, auth_token=True,
                     broker_config=SAME_MESSAGE_LIMIT, jvm_options=TEST_BROKER_JVM) as b:  # stopped however the tests end
        yield b


@pytest.fixture(scope="module")
def token(auth_broker) -> str:
    tok = local_broker.admin_token(auth_broker.data_dir)
    assert tok is not None and tok.count(".") == 2, "the launcher writes the superuser token to DATA_DIR/auth/admin.token"
    return tok


@pytest.fixture(scope="module")
def wrong_token() -> str:
    """Well formed, role 'admin', but signed with another key: the broker must refuse it."""
    return make_token(os.urandom(32), "admin")


@pytest.fixture(scope="module")
def token_file(tmp_path_factory, token) -> Path:
    path = tmp_path_factory.mktemp("token") / "reader.token"
    path.write_text(token + "\n")
    return path


@pytest.fixture(scope="module")
def auth_topic(auth_broker, token):
    admin = TopicAdmin(auth_broker.admin_url, 10, credentials=TokenAuth(token=token))
    client = pulsar.Client(auth_broker.service_url, authentication=pulsar.AuthenticationToken(token), logger=quiet_logger("pulsar-auth-test-client"))
    try:
        topic = create_topic(admin, f"auth-{int(time.time() * 1000)}", 2)
        sent = produce(client, topic, 120, batch=4, prefix="batched")  # 15 entries per partition
        sent += produce(client, topic, 60, prefix="single")  # +30 entries per partition
    finally:
        client.close()
        admin.close()
    return topic, sent


def secrets_of(*tokens: str) -> list[str]:
    """Each token and its signature (the part that must never be shown, even when truncated)."""
    return [s for t in tokens for s in (t, t.rsplit(".", 1)[1])]


def assert_no_secret(text: str, secrets: list[str], where: str) -> None:
    for s in secrets:
        assert s not in text, f"a token (or its signature) appears in {where}"


@pytest.fixture(autouse=True)
def no_token_in_captured_output(request, token, wrong_token, capfd, tmp_path):
    """After each test: nothing this test process printed (explain output, its own pulsar clients) shows a token."""
    yield
    out, err = capfd.readouterr()
    (tmp_path / "captured-output.log").write_text(out + err)  # kept for debugging a failure
    assert_no_secret(out + err, secrets_of(token, wrong_token),
                     f"the captured output of {request.node.name} ({tmp_path / 'captured-output.log'})")


def auth_options(broker, topic: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic,
            "metadataRefreshIntervalMs": "200", "quotaStatePath": str(tmp_path / "quota.sqlite"), **extra}


def query_error(spark, opts: dict[str, str], checkpoint: Path) -> tuple[str, float]:
    """The error of a query that must fail (at load, where the admin API is first asked, or once
    started), and how long it took."""
    started = time.monotonic()
    secrets = secrets_of(*(v.split(":", 1)[1] for k, v in opts.items() if k.endswith("authParams") and v.startswith("token:")))
    try:
        df = read_stream(spark, opts)
    except AnalysisException as e:
        assert_no_secret(str(e), secrets, "the error at load")
        return str(e), time.monotonic() - started
    q = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    message = failure_of(q, FAIL_BOUND_S)
    assert_no_secret(message + json.dumps(q.status) + "".join(p.json for p in q.recentProgress), secrets, "the query's error or status")
    return message, time.monotonic() - started


# ---------------------------------------------------------------------------------------
# The broker really requires a token


def test_broker_refuses_requests_without_a_valid_token(auth_broker, token, wrong_token, auth_topic):
    topic, _ = auth_topic
    for tok in (None, wrong_token):
        admin = PulsarAdmin(auth_broker.admin_url, 10, credentials=TokenAuth(token=tok) if tok else None)
        with pytest.raises(AdminError) as err:
            admin.list_topics("public/default")
        admin.close()
        assert "HTTP 401" in str(err.value) and "pulsar.admin.authParams" in str(err.value)
    admin = PulsarAdmin(auth_broker.admin_url, 10, credentials=TokenAuth(token=token))
    assert f"{topic}-partition-0" in admin.list_topics("public/default")
    admin.close()
    client = pulsar.Client(auth_broker.service_url, logger=quiet_logger("pulsar-auth-test-client"), operation_timeout_seconds=2, connection_timeout_ms=1000)
    try:
        with pytest.raises(pulsar.PulsarException):  # refused (authentication), not some unrelated error
            client.create_reader(f"{topic}-partition-0", pulsar.MessageId.earliest)
    finally:
        client.close()


# ---------------------------------------------------------------------------------------
# Reading with the token from options


def test_reads_everything_with_the_token_from_options(spark, auth_broker, auth_topic, token, wrong_token, token_file, tmp_path):
    """The three ways to give the token, each its own query; the three run side by side (one wait for all)."""
    topic, sent = auth_topic
    auths = {
        # the admin API takes the client's token by default
        "client-token": {"pulsar.client.authParams": f"token:{token}"},
        "client-file": {"pulsar.client.authParams": f"file://{token_file}"},
        # separate admin credentials
        "admin-option": {"pulsar.admin.authParams": f"file://{token_file}", "pulsar.client.authParams": f"token:{token}"},
    }
    opts = {how: auth_options(auth_broker, topic, tmp_path / how, startingOffsets="earliest", maxEntriesPerTrigger="25",
                              throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="1000", **auth) for how, auth in auths.items()}
    for how in auths:
        (tmp_path / how).mkdir()
    queries, sinks = available_now_side_by_side(spark, {how: (o, tmp_path / how / "cp") for how, o in opts.items()}, 120)
    for how in auths:
        check_token_read(queries[how], sinks[how], opts[how], sent, token, wrong_token, token_file, tmp_path / how / "cp", how)


def check_token_read(q, sink: Collected, opts: dict[str, str], sent, token: str, wrong_token: str, token_file: Path,
                     checkpoint: Path, how: str) -> None:
    topic = opts["topic"]
    got = Counter(identity(r) for r in sink.rows)
    assert max(got.values()) == 1 and set(got) == {sent_identity(s) for s in sent}, how
    assert len(sink.batches) >= 3, how  # 90 entries at 25 per micro-batch

    secrets = secrets_of(token, wrong_token)
    progress = [p.json for p in q.recentProgress]
    assert progress and json.loads(progress[0])["sources"][0]["description"]
    assert_no_secret("\n".join(progress) + q.lastProgress.json + json.dumps(q.status), secrets, "the query progress")
    q.explain(extended=True)  # printed: checked with the rest of the captured output
    checkpoint_text = "\n".join(p.read_text(errors="replace") for p in checkpoint.rglob("*") if p.is_file())
    assert_no_secret(checkpoint_text, secrets, "the checkpoint")

    # What the planner and the tasks hold: reprs show no token, yet the token is there.
    parsed = parse_options({k.lower(): v for k, v in opts.items()})
    config = parsed.read_task_config(None)  # what the planner hands every read task
    part = PartitionRange(f"{topic}-partition-0", 0, BEFORE_EARLIEST, EntryPosition(1, 2), 3, config)
    from_file, as_value = TokenAuth(file=str(token_file)), TokenAuth(token=token)
    assert config.credentials == (from_file if how == "client-file" else as_value)
    assert parsed.admin_credentials == (as_value if how == "client-token" else from_file)
    shown = "\n".join([repr(parsed), str(parsed), repr(config), repr(part), str(part), repr(parsed.credentials), repr(parsed.admin_credentials),
                       repr(dict(parsed.client_kwargs)), repr(PulsarAdmin.for_planning(parsed))])
    assert_no_secret(shown, secrets, "a repr of the parsed options, ClientConfig or PartitionRange")


@pytest.mark.parametrize("key", ["pulsar.client.authParams", "pulsar.client.auth_params", "pulsar.client.auth.params",
                                 "pulsar.client.authToken", "pulsar.admin.authParams", "pulsar.admin.auth_params"])
def test_every_accepted_spelling_of_the_token_option_is_used(auth_broker, auth_topic, token, wrong_token, key):
    """A spelling that passes validation must not be silently ignored (it was: the query then failed with HTTP 401)."""
    topic, _ = auth_topic
    value = token if key.lower().endswith("token") else f"token:{token}"
    urls = {"service.url": auth_broker.service_url, "admin.url": auth_broker.admin_url}
    parsed = parse_options({**urls, "topic": topic, key.lower(): value})
    assert parsed.admin_credentials == TokenAuth(token=token)
    assert parsed.credentials == (None if key.startswith("pulsar.admin.") else TokenAuth(token=token))
    assert_no_secret(repr(parsed), secrets_of(token, wrong_token), "repr of the parsed options")
    # and the admin API accepts what was parsed
    reader = PulsarStreamReader(parse_options({**urls, "topic": topic, key.lower(): value}))
    assert set(reader.planner.catalog.snapshot(force=True).layouts) == {f"{topic}-partition-0", f"{topic}-partition-1"}
    reader.stop()


# ---------------------------------------------------------------------------------------
# Without a valid token: fast, clear failures


@pytest.mark.parametrize("how", ["no-token", "wrong-token"])
def test_without_a_valid_token_the_query_fails_at_the_admin_api(spark, auth_broker, auth_topic, wrong_token, tmp_path, how):
    topic, _ = auth_topic
    auth = {} if how == "no-token" else {"pulsar.client.authParams": f"token:{wrong_token}"}
    message, elapsed = query_error(spark, auth_options(auth_broker, topic, tmp_path, startingOffsets="earliest", **auth), tmp_path / "cp")
    assert f"The Pulsar admin API at {auth_broker.admin_url} refused" in message, message[:3000]
    assert "HTTP 401" in message and "'pulsar.admin.authParams'" in message
    assert elapsed < FAIL_BOUND_S


@pytest.mark.parametrize("how", ["client-token-missing", "client-token-wrong"])
def test_admin_token_without_a_valid_client_token_fails_the_read(spark, auth_broker, auth_topic, token, wrong_token, tmp_path, how):
    topic, _ = auth_topic
    auth = {"pulsar.admin.authParams": f"token:{token}"}
    if how == "client-token-wrong":
        auth["pulsar.client.authParams"] = f"token:{wrong_token}"
    opts = auth_options(auth_broker, topic, tmp_path, startingOffsets="earliest", **FAST_CLIENT, **auth)
    message, elapsed = query_error(spark, opts, tmp_path / "cp")
    assert f"Cannot open a reader on {topic}-partition-" in message and f"at {auth_broker.service_url}" in message, message[:3000]
    assert "'pulsar.client.authParams'" in message
    assert elapsed < FAIL_BOUND_S


@pytest.mark.parametrize("how", ["own topic", "existing topic"])
def test_the_quickstart_notebook_takes_its_credentials_from_settings(auth_broker, auth_topic, token, how, tmp_path, monkeypatch):
    """The notebook's settings and topic cells on a broker that requires a token (PULSAR_AUTH_* as a Databricks
    secret feeds them): the admin API and the notebook's own client authenticate, every query gets the token
    as options, and no cell prints it. Spark's cells are the same as without a token (test_notebook)."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb", as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    settings = next(c for c in code if "AUTH_METHOD = " in c.source)
    topic_cell = next(c for c in code if "def write_backlog" in c.source)
    check = nbformat.v4.new_code_cell("print(CONNECTION['pulsar.client.authParams'] == 'token:' + os.environ['EXPECTED'], PARTITIONS)")
    notebook.cells = [settings, topic_cell, check]
    env = {"PULSAR_SERVICE_URL": auth_broker.service_url, "PULSAR_ADMIN_URL": auth_broker.admin_url,
           "PULSAR_AUTH_METHOD": "token", "PULSAR_AUTH_PARAMS": token, "EXPECTED": token}
    if how == "existing topic":
        env["PULSAR_TOPIC"] = auth_topic[0]
    for k, v in env.items():
        monkeypatch.setenv(k, v)  # the kernel inherits this process's environment
    NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "token authentication" in shown and token not in shown, shown
    assert notebook.cells[2].outputs[0]["text"].strip() == "True 2", shown
    if how == "existing topic":
        assert f"{auth_topic[0]}: an existing topic of 2 partition(s)" in shown, shown
    else:
        assert ": 2000 messages on 2 partitions" in shown, shown
