"""Issue 43: the source against a secured cluster, on both read paths.

One real authorization server (tests/identity_provider.py) and one broker (tests/secured_broker.py) for the
module: TLS on both ports (certificates made by the tests), client-certificate and token authentication (the
token key is the authorization server's: its OAuth2 access tokens are the tokens), authorization on, a role
"reader" granted only `consume` on the namespace. Access tokens live TOKEN_LIFETIME_S and the broker checks every
connection's credentials every REFRESH_CHECK_S, so tokens expire while throttled queries read. Every delivery
test compares the exact payloads read with what two producers (one batching) sent. The suite's one spark-submit
secrecy job runs here (at the end): every credential the source takes, right and wrong, in one application.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from conftest import SAME_MESSAGE_LIMIT, TEST_BROKER_JVM
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from helpers import produce
from identity_provider import IdentityProvider, jwt_claims
from pyspark.errors import AnalysisException
from redis_server import PASSWORD as REDIS_PASSWORD
from redis_server import redis_server
from secrecy import JWT, assert_no_secret, files_text
from secured_broker import AUTH_PROVIDERS, SUPERUSER, SecuredBroker, secured_broker
from streaming import Collected, available_now_side_by_side, failure_of, identity, read_stream, sent_identity

from pulsar_throttled_source.admin_endpoint import AdminEndpoint, without_userinfo
from pulsar_throttled_source.credentials import TlsSettings, TokenAuth
from pulsar_throttled_source.local_broker.tokens import make_rs256_token, make_token
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.metadata.owner_redirects import ClusterHosts

TOKEN_LIFETIME_S = 10
REFRESH_CHECK_S = 3
AUDIENCE = "pulsar-throttled-secured"
NAMESPACE = "secured/data"
READER, OUTSIDER, TOPIC_READER = "reader", "outsider", "topic-reader"  # consume on the namespace, nothing, consume on one topic
CLIENTS = {"reader-client": READER, "outsider-client": OUTSIDER}  # OAuth2 client id -> role (the token's sub)
JAVA = "org.apache.pulsar.client.impl.auth."
FAIL_BOUND_S = 30
BASIC_PASSWORD = "b4sic-Passw0rd"
METRICS_PASSWORD, ADMIN_URL_PASSWORD = "m3trics-pr0xy-pw", "4dmin-url-pw"  # in URLs (no word Spark's redaction matches)


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    """The authorization server's signing key: the broker trusts what it signs (access tokens, and static tokens)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def servers(tmp_path_factory, signing_key) -> Iterator[tuple[IdentityProvider, SecuredBroker]]:
    """The authorization server and the broker, started side by side: the broker only needs the public key of the
    server's signing key (made here, before either starts) until a client brings it a token."""
    provider = IdentityProvider(tmp_path_factory.mktemp("idp"), token_lifetime_s=TOKEN_LIFETIME_S, audience=AUDIENCE, roles=CLIENTS,
                                signing_key=signing_key)
    work = tmp_path_factory.mktemp("secured-cluster")
    key_url = provider.write_signing_key(work / "idp-public-key.der")
    # Basic authentication too: the reader's user name is its role; the password file holds an apr1 (MD5) hash.
    hashed = subprocess.run(["openssl", "passwd", "-apr1", BASIC_PASSWORD], capture_output=True, text=True, check=True).stdout.strip()
    (work / "basic-users").write_text(f"{READER}:{hashed}\n")
    config = {"tokenPublicAlg": "RS256", "tokenAudienceClaim": "aud", "tokenAudience": AUDIENCE,
              "authenticationRefreshCheckSeconds": str(REFRESH_CHECK_S), **SAME_MESSAGE_LIMIT,
              "authenticationProviders": AUTH_PROVIDERS + ",org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
              "basicAuthConf": f"file://{work / 'basic-users'}"}
    with ThreadPoolExecutor(1) as pool:
        provider_started = pool.submit(provider.start)
        try:
            with secured_broker(work, roles=[READER, OUTSIDER, TOPIC_READER], token_public_key=key_url, broker_config=config,
                                max_entries_per_ledger=50, jvm_options=TEST_BROKER_JVM) as broker:
                provider_started.result()
                for method, path, body in [
                    ("PUT", "/admin/v2/tenants/secured", {"adminRoles": [], "allowedClusters": ["standalone"]}),
                    ("PUT", f"/admin/v2/namespaces/{NAMESPACE}", None),
                    ("POST", f"/admin/v2/namespaces/{NAMESPACE}/permissions/{READER}", ["consume"]),
                ]:
                    answer = broker.admin_request(method, path, json=body)
                    assert answer.status_code in (200, 204), (path, answer.status_code, answer.text)
                yield provider, broker
        finally:
            wait([provider_started])  # a start still under way (the broker's failed) ends before the stop
            provider.stop()


@pytest.fixture(scope="module")
def idp(servers) -> IdentityProvider:
    return servers[0]


@pytest.fixture(scope="module")
def sb(servers) -> SecuredBroker:
    return servers[1]


@pytest.fixture(scope="module")
def topic(sb: SecuredBroker):
    """Two partitions, 45 entries each: 120 messages in batches of 4 and 60 single ones, from two producers."""
    name = f"persistent://{NAMESPACE}/orders-{int(time.time() * 1000)}"
    answer = sb.admin_request("PUT", f"/admin/v2/persistent/{NAMESPACE}/{name.rsplit('/', 1)[1]}/partitions", json=2)
    assert answer.status_code == 204, answer.text
    client = sb.client("admin")
    try:
        sent = produce(client, name, 120, batch=4, prefix="batched") + produce(client, name, 60, prefix="single")
    finally:
        client.close()
    return name, sent


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory) -> Iterator[str]:
    """A real Redis server with a password (REDIS_PASSWORD), for quotaStore."""
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="module")
def static_token(signing_key) -> str:
    """A token of the reader that never expires, as an operator pastes into `pulsar.client.authParams=token:...`."""
    pem = signing_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return make_rs256_token(pem, {"sub": READER, "aud": AUDIENCE})


@pytest.fixture(scope="module")
def reader_credentials(idp, tmp_path_factory) -> Path:
    return idp.write_credentials("reader-client", tmp_path_factory.mktemp("creds") / "reader-client.json")


def _secrets(idp: IdentityProvider) -> list[str]:
    return [idp.client_secret(c) for c in CLIENTS]


@pytest.fixture(autouse=True)
def no_secret_in_captured_output(request, capfd, tmp_path):
    """After each test: nothing this process printed (its clients, explain()) shows a client secret or any JWT."""
    yield
    out, err = capfd.readouterr()
    (tmp_path / "captured-output.log").write_text(out + err)
    idp = request.node.funcargs.get("idp")
    for secret in _secrets(idp) if idp else []:
        assert secret not in out + err, f"a client secret appears in the output of {request.node.name}"
    assert not JWT.search(out + err), f"a token appears in the output of {request.node.name} ({tmp_path / 'captured-output.log'})"


def options(sb: SecuredBroker, topic: str, tmp_path: Path, read_path: str, **extra: str) -> dict[str, str]:
    return {"service.url": sb.service_url_tls, "admin.url": sb.admin_url_tls, "topic": topic, "readPath": read_path,
            "pulsar.client.tlsTrustCertsFilePath": str(sb.certs.ca), "startingOffsets": "earliest",
            "metadataRefreshIntervalMs": "200", "quotaStatePath": str(tmp_path / "quota.sqlite"), **extra}


def mtls(sb: SecuredBroker, role: str = READER) -> dict[str, str]:
    return {"pulsar.client.authPluginClassName": JAVA + "AuthenticationTls",
            "pulsar.client.authParams": sb.certs.client(role).auth_params()}


def oauth2(idp: IdentityProvider, credentials: Path) -> dict[str, str]:
    """The Java client's plugin class and parameter names, as a pulsar-spark query has them."""
    return {"pulsar.client.authPluginClassName": JAVA + "oauth2.AuthenticationOAuth2",
            "pulsar.client.authParams": json.dumps({"type": "client_credentials", "issuerUrl": idp.issuer_url,
                                                    "privateKey": f"file://{credentials}", "audience": AUDIENCE})}


def stream_everything(spark, opts: dict[str, str], checkpoint: Path, timeout_s: float = 120) -> Collected:
    return available_now_side_by_side(spark, {"query": (opts, checkpoint)}, timeout_s)[1]["query"]


def batch_query(spark, opts: dict[str, str]):
    """spark.read with a stream's options, less those that only streams take (quotas, durable subscriptions)."""
    reader = spark.read.format("pulsar-throttled")
    for k, v in opts.items():
        if k not in ("throttlingMode", "dispatchThrottlingRatePerTopicInMsg", "maxEntriesPerTrigger", "durableSubscription", "subscription"):
            reader = reader.option(k, v)
    return reader.load()


def assert_exactly(rows, sent) -> None:
    got = Counter(identity(r) for r in rows)
    assert max(got.values()) == 1, "a message was read twice"
    assert set(got) == {sent_identity(s) for s in sent}, "messages were lost or made up"


# ---------------------------------------------------------------------------------------
# Reading: TLS client certificates, OAuth2


@pytest.mark.parametrize("read_path", ["python", "native"])
def test_tls_client_certificates_read_everything_once(spark, sb, topic, tmp_path, read_path):
    name, sent = topic
    opts = options(sb, name, tmp_path, read_path, throttlingMode="batch", dispatchThrottlingRatePerTopicInMsg="1000",
                   maxEntriesPerTrigger="30", **mtls(sb))
    if read_path == "native":  # and a durable subscription, which a consume-only role may create
        opts |= {"durableSubscription": "true", "subscription": f"secured-{int(time.time())}"}
    sink = stream_everything(spark, opts, tmp_path / "cp")
    assert_exactly(sink.rows, sent)
    assert len(sink.batches) >= 3  # 90 entries at 30 per micro-batch
    assert_exactly(batch_query(spark, opts).collect(), sent)


def test_basic_authentication_reads_everything_once(spark, sb, topic, tmp_path):
    name, sent = topic
    opts = options(sb, name, tmp_path, "native", **{"pulsar.client.authPluginClassName": JAVA + "AuthenticationBasic",
                                                    "pulsar.client.authParams": json.dumps({"userId": READER, "password": BASIC_PASSWORD})})
    assert_exactly(stream_everything(spark, opts, tmp_path / "cp").rows, sent)
    wrong = opts | {"pulsar.client.authParams": json.dumps({"userId": READER, "password": "not-" + BASIC_PASSWORD})}
    message, _ = load_error(spark, wrong)
    assert "HTTP 401: not authenticated" in message and BASIC_PASSWORD not in message, message[:2000]


@contextmanager
def fresh_token_file(idp: IdentityProvider, path: Path) -> Iterator[list[str]]:
    """`path` holds a short-lived access token of the reader, replaced (renamed over, as a Vault agent or the
    kubelet does) three times per token lifetime; yields the tokens issued so far."""
    issued: list[str] = []

    def write_fresh_token() -> None:
        token = idp.access_token("reader-client")
        issued.append(token)
        path.with_suffix(".new").write_text(token + "\n")
        os.replace(path.with_suffix(".new"), path)

    write_fresh_token()
    stop = threading.Event()

    def rotate() -> None:
        while not stop.wait(TOKEN_LIFETIME_S / 3):
            write_fresh_token()

    rotator = threading.Thread(target=rotate, daemon=True)
    rotator.start()
    try:
        yield issued
    finally:
        stop.set()
        rotator.join()


def test_tokens_that_expire_while_throttled_queries_read_are_fetched_again(spark, sb, idp, topic, reader_credentials, tmp_path):
    """Three throttled queries at once (one wait for all; each its own quota state), 45 entries per partition at 2
    per second: about 22 s, over two token lifetimes. OAuth2 client credentials on both read paths: the broker
    challenges the readers' connections when their token expires (the client's plugin answers with a new one) and
    the planner's admin API calls fetch a new token before theirs expires. A token file replaced (renamed over, as
    a Vault agent or the kubelet does) while the query runs: the readers' plugin reads the file again at every
    authentication, the admin API whenever the file changes, so the query outlives every token it started with.
    Then a batch query with OAuth2 on each path reads everything once too."""
    name, sent = topic
    token_file = tmp_path / "reader.token"
    throttled = {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "2"}
    auths = {"oauth2-python": ("python", oauth2(idp, reader_credentials)), "oauth2-native": ("native", oauth2(idp, reader_credentials)),
             "token-file": ("python", {"pulsar.client.authParams": f"file://{token_file}"})}
    for how in auths:
        (tmp_path / how).mkdir()
    with fresh_token_file(idp, token_file) as issued:
        started = time.monotonic()
        queries, sinks = available_now_side_by_side(spark, {how: (options(sb, name, tmp_path / how, read_path, **throttled, **auth),
                                                                  tmp_path / f"cp-{how}") for how, (read_path, auth) in auths.items()}, 180)
        assert time.monotonic() - started > 2 * TOKEN_LIFETIME_S, "the queries did not outlive two tokens"
    for how, q in queries.items():
        assert_exactly(sinks[how].rows, sent)
        last = q.recentProgress[-1]  # each query, from its start to the end of its last batch
        ended = datetime.fromisoformat(last["timestamp"]).timestamp() + last["durationMs"]["triggerExecution"] / 1000
        assert ended - q.started_at > 2 * TOKEN_LIFETIME_S, f"the query {how} did not outlive two tokens"
    assert jwt_claims(issued[0])["exp"] < time.time(), "the first token had not expired when the query ended"
    assert len(issued) >= 6
    for read_path in ("python", "native"):
        assert_exactly(batch_query(spark, options(sb, name, tmp_path, read_path, **oauth2(idp, reader_credentials))).collect(), sent)


def test_consume_on_the_namespace_reads_a_pattern_and_consume_on_one_topic_reads_that_topic(spark, sb, topic, tmp_path):
    """What the least-privilege table of docs/guides/secured-clusters.md says a consume-only role can do, it does: topicsPattern (the
    namespace's topic list) with consume on the namespace; a non-partitioned topic with consume on it alone
    (its existence is asked of the topic, not of the namespace's list)."""
    name, sent = topic
    single = f"persistent://{NAMESPACE}/single-{int(time.time() * 1000)}"
    assert sb.admin_request("PUT", f"/admin/v2/persistent/{NAMESPACE}/{single.rsplit('/', 1)[1]}").status_code == 204
    granted = sb.admin_request("POST", f"/admin/v2/persistent/{NAMESPACE}/{single.rsplit('/', 1)[1]}/permissions/{TOPIC_READER}",
                               json=["consume"])
    assert granted.status_code == 204, granted.text
    client = sb.client("admin")
    try:
        single_sent = produce(client, single, 30, batch=5, prefix="one")
    finally:
        client.close()
    opts = options(sb, single, tmp_path, "auto", **mtls(sb, TOPIC_READER))
    assert_exactly(stream_everything(spark, opts, tmp_path / "cp-topic").rows, single_sent)
    pattern = options(sb, name, tmp_path, "auto", **mtls(sb)) | {"topicsPattern": name.rsplit("-", 1)[0] + "-.*"}
    del pattern["topic"]
    assert_exactly(stream_everything(spark, pattern, tmp_path / "cp-pattern").rows, sent)


# ---------------------------------------------------------------------------------------
# Fast, clear failures


def load_error(spark, opts: dict[str, str]) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(AnalysisException) as err:
        read_stream(spark, opts)
    return str(err.value), time.monotonic() - started


def test_an_untrusted_broker_certificate_fails_at_load_naming_the_url_and_option(spark, sb, topic, tmp_path):
    name, _ = topic
    wrong_ca = str(sb.certs.other_ca)
    # the admin API's CA is wrong
    message, elapsed = load_error(spark, options(sb, name, tmp_path, "auto", **mtls(sb), **{"pulsar.admin.tlsTrustCertsFilePath": wrong_ca}))
    assert f"TLS failed with the Pulsar admin API at {sb.admin_url_tls}" in message, message[:2000]
    assert "'pulsar.client.tlsTrustCertsFilePath'" in message and elapsed < FAIL_BOUND_S
    # the broker's: the readers would take it for a broker that is down and retry; the look at load says why
    opts = options(sb, name, tmp_path, "auto", **mtls(sb), **{"pulsar.admin.tlsTrustCertsFilePath": str(sb.certs.ca)})
    message, elapsed = load_error(spark, opts | {"pulsar.client.tlsTrustCertsFilePath": wrong_ca})
    assert f"TLS failed with the Pulsar broker at {sb.service_url_tls}" in message, message[:2000]
    assert "set 'pulsar.client.tlsTrustCertsFilePath' to the file of the CA" in message and elapsed < FAIL_BOUND_S


def test_a_role_without_the_permission_a_feature_needs_fails_at_planning_naming_it(spark, sb, idp, topic, tmp_path):
    name, _ = topic
    outsider = idp.write_credentials("outsider-client", tmp_path / "outsider.json")
    message, elapsed = load_error(spark, options(sb, name, tmp_path, "auto", **oauth2(idp, outsider)))
    assert "has no permission for it" in message and "It needs 'consume' on the topic or its namespace" in message, message[:2000]
    assert elapsed < FAIL_BOUND_S
    # consume is enough to read (the tests above); the broker's rate policies are for the tenant's admins only
    opts = options(sb, name, tmp_path, "auto", quotaSource="broker", **mtls(sb))
    q = read_stream(spark, opts).writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")) \
        .trigger(availableNow=True).start()
    message = failure_of(q, FAIL_BOUND_S * 2)
    assert "has no permission for it" in message and "the tenant's admin role" in message and "quotaSource" in message, message[:3000]


def test_credentials_follow_redirects_to_the_hosts_the_real_cluster_names_and_no_other(sb, idp, topic):
    """A 307 takes the admin credentials only to a host of the cluster (metadata/owner_redirects.py). What the broker
    answers: a superuser lists the cluster's brokers (GET /admin/v2/brokers/<cluster>); the reader (consume only) is
    refused that, and the topic's lookup names the owner instead. Either way the broker's web service (the host a
    307 to the owner names) is known, and a stranger is not. The admin URL given is not the broker's, so nothing is
    known before asking."""
    name, _ = topic
    partition = f"persistent/{name.split('://', 1)[1]}-partition-0"
    owner = sb.admin_request("GET", f"/lookup/v2/topic/{partition}").json()["httpUrlTls"]  # as a 307 to it names it
    owner_stats = f"{owner}/admin/v2/{partition}/internalStats"
    assert owner.split("://")[1].split(":")[0] in ("127.0.0.1", "localhost")
    superuser = sb.certs.client(SUPERUSER)
    endpoints = {"superuser": AdminEndpoint(sb.admin_url_tls, None, TlsSettings(trust_file=str(sb.certs.ca),
                                                                                client_cert=(str(superuser.cert), str(superuser.key)))),
                 "reader": AdminEndpoint(sb.admin_url_tls, TokenAuth(token=idp.access_token("reader-client")),
                                         TlsSettings(trust_file=str(sb.certs.ca)))}
    for role, endpoint in endpoints.items():
        admin = PulsarAdmin.at(endpoint)
        try:
            asked: list[str] = []
            hosts = ClusterHosts("https://admin.invalid:1", lambda path: asked.append(path) or admin._ask(path))  # noqa: B023
            assert hosts.holds(owner_stats), (role, asked)
            assert any(p.startswith("lookup/") for p in asked) == (role == "reader"), (role, asked)  # the list sufficed
            assert not hosts.holds(owner_stats.replace(owner, "https://stranger.invalid:8443")), role
        finally:
            admin.close()


# ---------------------------------------------------------------------------------------
# A whole driver's output and Spark's event log show no secret

LEAK_JOB = r'''
import json, sys, time
from pyspark.sql import SparkSession

began = time.monotonic()


def took(what):  # where the job's time goes (stderr: the checks read stdout)
    global began
    print(f"LEAK JOB TIMING {what}: {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
    began = time.monotonic()


args = json.load(open(sys.argv[1]))  # secrets come from a file: not on the command line, not in the environment
spark = SparkSession.builder.appName("secured-leak-check").getOrCreate()
spark.sparkContext.setLogLevel("INFO")
took("session")

for name, opts in args["refused"].items():  # credentials written where Spark would show them: refused at load
    reader = spark.readStream.format("pulsar-throttled")
    for k, v in {**args["base"], **opts}.items():
        reader = reader.option(k, v)
    try:
        reader.load()
        print(f"REFUSED {name}: no", flush=True)
    except Exception as e:
        print(f"REFUSED {name}: {e}", flush=True)
    took(f"refused {name}")

for name, opts in args["failing"].items():  # wrong tokens: the errors (at load or once started) show none
    reader = spark.readStream.format("pulsar-throttled")
    for k, v in {**args["base"], **opts, "quotaStatePath": args["work"] + "/quota.sqlite"}.items():
        reader = reader.option(k, v)
    try:
        df = reader.load()  # the topic's schema is looked up here: a refused admin token fails at load
    except Exception as e:
        print(f"FAILED {name}: error at load: {e}", flush=True)
        took(f"failing {name}")
        continue
    q = df.writeStream.format("noop").option("checkpointLocation", f"{args['work']}/cp-{name}").trigger(availableNow=True).start()
    try:
        q.awaitTermination(120)
        print(f"FAILED {name}: no", flush=True)
    except Exception as e:
        print(f"FAILED {name}: error: {e}", flush=True)
    print("PROGRESS", [p.json for p in q.recentProgress], q.status, flush=True)
    q.explain(True)
    took(f"failing {name}")

for name, (auth, read_path) in args["auths"].items():
    reader = spark.readStream.format("pulsar-throttled")
    stream_only = args["stream_only"].get(name, {})  # quotas, adaptiveThrottling: a batch query refuses them
    for k, v in {**args["base"], **auth, **stream_only, "readPath": read_path, "quotaStatePath": args["work"] + "/quota.sqlite"}.items():
        reader = reader.option(k, v)
    rows = []
    df = reader.load()
    df.explain(True)  # the logical plan shows the options (Spark redacts what spark.redaction.regex matches)
    q = df.writeStream.foreachBatch(lambda d, i: rows.extend(d.collect())) \
        .option("checkpointLocation", f"{args['work']}/cp-{name}").trigger(availableNow=True).start()
    q.awaitTermination(120)
    print(f"RESULT {name} {read_path}: {len(rows)} rows", flush=True)
    print("PROGRESS", [p.json for p in q.recentProgress], q.status, flush=True)
    q.explain(True)
    took(f"stream {name}")
    batch = spark.read.format("pulsar-throttled")
    for k, v in {**args["base"], **auth, "readPath": read_path}.items():
        batch = batch.option(k, v)
    batch = batch.load()
    batch.explain(True)
    print(f"RESULT {name} batch: {batch.count()} rows", flush=True)
    took(f"batch {name}")
spark.stop()
took("stop")
print("LEAK JOB DONE", flush=True)
'''


def secrets_of(*tokens: str) -> list[str]:
    """Each token and its signature (the part that must never be shown, even when truncated)."""
    return [s for t in tokens for s in (t, t.rsplit(".", 1)[1])]


def printed(stdout: str, marker: str) -> str:
    """What the job printed after `marker` (an error can take several lines), up to its next report."""
    lines = stdout.split(marker, 1)[1].splitlines()
    ends = [i for i, line in enumerate(lines[1:], 1) if line.startswith(("FAILED ", "PROGRESS ", "RESULT ", "REFUSED "))]
    return "\n".join(lines[:ends[0] if ends else None])


def test_driver_and_executor_logs_and_the_event_log_show_no_secret(sb, idp, topic, reader_credentials, static_token, redis_url, tmp_path):
    """One spark-submit application at INFO level (Spark's JVM, its planner process and the Python workers print
    there, where this process's capfd cannot see): every way to give credentials reads everything (stream and
    batch), wrong tokens fail at the admin API and at the readers, and credentials written where Spark would show
    them are refused; then no secret is in its output, its event log (query plans) or its checkpoints."""
    name, sent = topic
    wrong_token = make_token(os.urandom(32), READER)  # well formed, role "reader", signed with another key: refused
    work, events = tmp_path / "work", tmp_path / "events"
    work.mkdir()
    events.mkdir()
    data_url = "data:application/json;base64," + __import__("base64").b64encode(
        json.dumps({"client_id": "reader-client", "client_secret": idp.client_secret("reader-client")}).encode()).decode()
    base = {"service.url": sb.service_url_tls, "admin.url": sb.admin_url_tls, "topic": name, "startingOffsets": "earliest",
            "pulsar.client.tlsTrustCertsFilePath": str(sb.certs.ca), "metadataRefreshIntervalMs": "200"}
    auths = {  # each method once, its stream and batch query on one read path (both paths for the two OAuth2 forms)
        "oauth2-data-url": ({"pulsar.client.authPluginClassName": JAVA + "oauth2.AuthenticationOAuth2", "pulsar.client.authParams":
                             json.dumps({"type": "client_credentials", "issuerUrl": idp.issuer_url, "privateKey": data_url,
                                         "audience": AUDIENCE})}, "native"),
        "oauth2-file": (oauth2(idp, reader_credentials), "python"),
        "mtls": (mtls(sb), "native"),
        "token-file": ({"pulsar.client.authParams": f"file://{tmp_path / 'reader.token'}"}, "python"),
        "redis-store": (mtls(sb), "python"),
        "token-option": ({"pulsar.client.authParams": f"token:{static_token}"}, "native"),
    }
    # A refused client token shows as a timed-out reader open: one attempt of a second, then the task fails (3 s and
    # 2 s, two attempts per partition, kept the job's one failing stream 7 s in its tasks after a 6 s plan).
    fast = {"pollTimeoutMs": "1000", "pulsar.client.operationTimeoutSeconds": "1", "pulsar.client.connectionTimeoutMs": "1000"}
    failing = {"bad-client": {"pulsar.admin.authParams": f"token:{static_token}", "pulsar.client.authParams": f"token:{wrong_token}", **fast},
               "bad-admin": {"pulsar.client.authParams": f"token:{wrong_token}", "adminTimeoutMs": "3000"}}
    # Issue 54: a Redis password (quotaStorePassword), a metrics URL's password (taken out of the URL), credentials
    # written into admin.url, service.url and quotaStore (refused at load, naming where they go).
    metrics_url = sb.admin_url_tls.replace("://", f"://scraper:{METRICS_PASSWORD}@", 1) + "/metrics/"
    stream_only = {"redis-store": {"quotaStore": without_userinfo(redis_url), "quotaStorePassword": REDIS_PASSWORD,
                                   "dispatchThrottlingRatePerTopicInMsg": "1000", "throttlingMode": "batch",
                                   "adaptiveThrottling": "true", "adaptiveThrottlingMetricsUrl": metrics_url},
                   "token-option": {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "1000", "maxEntriesPerTrigger": "30"}}
    refused = {"admin-url": {"admin.url": sb.admin_url_tls.replace("://", f"://{READER}:{ADMIN_URL_PASSWORD}@", 1), **mtls(sb)},
               "service-url": {"service.url": sb.service_url_tls.replace("://", f"://{READER}:{ADMIN_URL_PASSWORD}@", 1)},
               "redis-url": {"quotaStore": redis_url, "dispatchThrottlingRatePerTopicInMsg": "1000"}}
    (tmp_path / "job.py").write_text(LEAK_JOB)
    (tmp_path / "args.json").write_text(json.dumps({"base": base, "auths": auths, "stream_only": stream_only, "refused": refused,
                                                    "failing": failing, "work": str(work)}))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}", "--conf", "spark.eventLog.compress=false",
           "--conf", "spark.sql.shuffle.partitions=2", str(tmp_path / "job.py"), str(tmp_path / "args.json")]
    with fresh_token_file(idp, tmp_path / "reader.token") as tokens:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    (tmp_path / "spark-submit.log").write_text(log)
    print("\n".join(line for line in proc.stderr.splitlines() if line.startswith("LEAK JOB TIMING")))  # shown with -s
    assert proc.returncode == 0 and "LEAK JOB DONE" in proc.stdout, f"spark-submit failed; log in {tmp_path / 'spark-submit.log'}"
    for auth, (_, read_path) in auths.items():
        for how in (read_path, "batch"):
            assert f"RESULT {auth} {how}: {len(sent)} rows" in proc.stdout, (auth, how)
    for name, where in (("admin-url", "pulsar.admin.authParams"), ("service-url", "pulsar.client.authParams"),
                        ("redis-url", "option 'quotaStorePassword'")):
        after = proc.stdout.split(f"REFUSED {name}: ", 1)[1]
        refusal = next(line for line in after.splitlines() if line.startswith("ValueError: Option "))  # the traceback's end
        assert "holds a" in refusal and where in refusal, refusal
    bad_client, bad_admin = printed(proc.stdout, "FAILED bad-client: "), printed(proc.stdout, "FAILED bad-admin: ")
    assert bad_client.startswith("error:") and f"at {sb.service_url_tls}" in bad_client, bad_client[:2000]
    assert bad_admin.startswith("error at load:") and f"The Pulsar admin API at {sb.admin_url_tls} refused" in bad_admin, bad_admin[:2000]
    assert "quotaStorePassword=*********(redacted)" in log and "adaptiveThrottlingMetricsUrl=*********(redacted)" in log
    assert " INFO " in log  # the check ran at INFO level
    assert log.count("pulsar.client.authParams=*********(redacted)") >= len(auths), "explain() did not show the options"
    event_log = files_text(events)
    assert "SparkListenerSQLExecutionStart" in event_log  # query plans are in it
    checkpoints = files_text(work, skip_suffixes=(".sqlite",))
    key_body = sb.certs.client(READER).key.read_text().splitlines()[1]  # a line of the client key itself
    secrets = [idp.client_secret("reader-client"), data_url.split(",", 1)[1][:40], key_body, *secrets_of(*tokens, static_token, wrong_token),
               REDIS_PASSWORD, METRICS_PASSWORD, ADMIN_URL_PASSWORD]
    assert_no_secret({"the spark-submit output": log, "the event log": event_log, "the checkpoints": checkpoints}, secrets, tmp_path)
