"""Issue 43: facts about a secured broker (TLS on both ports, mTLS and token authentication, authorization),
established with the real clients the source uses: the Python pulsar-client (libpulsar, OpenSSL) and requests.

- TLS failures: how a Pulsar client fails, how fast, and what it says, with a CA it should not trust, a broker
  certificate without its name, a client certificate of another CA, no credentials.
- requests: $REQUESTS_CA_BUNDLE (set on this machine, as on many clusters) replaces a Session's `verify`
  (psf/requests#3829); `verify=` per request, or a Session that gives its own `verify` to the merge, does not.
- Least privilege: every admin call the source makes (pulsar_throttled_source/metadata/admin.py) and a few more,
  and the binary-protocol reader and consumer, for roles holding each namespace permission, a topic grant, tenant
  admin and superuser: LEAST_PRIVILEGE is the table of HTTP statuses (binary: "ok" or the client's error).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import pulsar
import pytest
import requests
from certificates import make_certificates
from conftest import SAME_MESSAGE_LIMIT, TEST_BROKER_JVM
from helpers import quiet_logger
from secured_broker import SecuredBroker, secured_broker

from pulsar_throttled_source.local_broker import LocalBroker, TlsFiles

TENANT, NAMESPACE = "lp", "lp/ns"
TOPIC = "persistent://lp/ns/parted"  # 2 partitions, a string schema
PARTITION = f"{TOPIC}-partition-0"
SUBSCRIPTION = "least-privilege"

# role -> what it holds (granted in the `grants` fixture)
ROLES = {
    "no-grant": None,
    "consume-only": ("namespace", ["consume"]),
    "produce-only": ("namespace", ["produce"]),
    "functions-only": ("namespace", ["functions"]),
    "produce-consume": ("namespace", ["produce", "consume"]),
    "topic-consume": ("topic", ["consume"]),  # consume on TOPIC only, nothing on the namespace
    "tenant-admin": ("tenant", None),
    "admin": ("superuser", None),
}

# Bounds of the fail-fast facts: a failure that the client retries ends at operation_timeout_seconds.
OPERATION_TIMEOUT_S = 3



@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory):
    config = {"transactionCoordinatorEnabled": "true", **SAME_MESSAGE_LIMIT}
    with secured_broker(tmp_path_factory.mktemp("secured"), roles=list(ROLES), broker_config=config,
                        jvm_options=TEST_BROKER_JVM) as b:
        yield b


def timed(fn: Callable[[], Any]) -> tuple[Any, BaseException | None, float]:
    started = time.monotonic()
    try:
        return fn(), None, time.monotonic() - started
    except Exception as e:  # the facts are about which exception
        return None, e, time.monotonic() - started


def read_one(url: str, ca: str, auth: Any, topic: str, validate: bool = True, **kwargs: Any) -> bytes:
    client = pulsar.Client(url, tls_trust_certs_file_path=ca, tls_validate_hostname=validate, authentication=auth,
                           logger=quiet_logger("pulsar-secured-facts", logging.CRITICAL), **kwargs)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        return bytes(reader.read_next(5000).data())
    finally:
        client.close()


def tls_auth(pair: Any) -> pulsar.AuthenticationTLS:
    return pulsar.AuthenticationTLS(str(pair.cert), str(pair.key))


@pytest.fixture(scope="module")
def plain_topic(sb: SecuredBroker) -> str:
    topic = f"persistent://public/default/tls-facts-{int(time.time() * 1000)}"
    client = sb.client("admin")
    try:
        client.create_producer(topic).send(b"over tls")
    finally:
        client.close()
    return topic


# -- TLS on the binary protocol -------------------------------------------------------------------------

@pytest.mark.third_party
def test_mtls_client_reads_by_name_and_by_address(sb, plain_topic):
    """The broker certificate names localhost and 127.0.0.1: a checking client reads through either URL (the
    lookup answers the advertised 127.0.0.1, which the client checks too). A key in the traditional format
    (BEGIN RSA PRIVATE KEY) works for the C++ client, unlike for the broker."""
    from certificates import traditional_key

    admin = sb.certs.client("admin")
    ca = str(sb.certs.ca)
    assert read_one(sb.service_url_tls, ca, tls_auth(admin), plain_topic) == b"over tls"
    by_address = sb.service_url_tls.replace("localhost", "127.0.0.1")
    assert read_one(by_address, ca, tls_auth(admin), plain_topic) == b"over tls"
    old_format = traditional_key(admin, sb.certs.dir / "admin.traditional.key.pem")
    assert old_format.read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert read_one(sb.service_url_tls, ca, pulsar.AuthenticationTLS(str(admin.cert), str(old_format)), plain_topic) == b"over tls"
    # A token over TLS (no client certificate: the broker asks for one but does not require it).
    assert read_one(sb.service_url_tls, ca, pulsar.AuthenticationToken(sb.token("admin")), plain_topic) == b"over tls"


@pytest.mark.third_party
def test_client_certificate_settings_alone_do_not_authenticate(sb, plain_topic):
    """The native read path can set a certificate only through the C API's client settings
    (pulsar_client_configuration_set_tls_certificate_file_path / _private_key_file_path); the same settings in
    the Python client, without AuthenticationTLS, present the certificate in the handshake but send no
    authentication method: the broker refuses the connection and the client retries until the operation
    timeout. mTLS authentication needs the "tls" authentication (C API: pulsar_authentication_tls_create)."""
    admin = sb.certs.client("admin")
    got, error, took = timed(lambda: read_one(sb.service_url_tls, str(sb.certs.ca), None, plain_topic,
                                              tls_certificate_file_path=str(admin.cert), tls_private_key_file_path=str(admin.key),
                                              operation_timeout_seconds=OPERATION_TIMEOUT_S))
    assert got is None and isinstance(error, pulsar.Timeout), (got, error)
    assert OPERATION_TIMEOUT_S - 0.5 < took < OPERATION_TIMEOUT_S + 3, took


@pytest.mark.third_party
@pytest.mark.parametrize("timeout_s", [30, OPERATION_TIMEOUT_S])
def test_wrong_ca_fails_at_once_with_connect_error(sb, plain_topic, timeout_s):
    """A client trusting another CA: the handshake fails and create_reader raises ConnectError at once
    (not after operation_timeout_seconds); its text does not say why, only libpulsar's log line
    ("Handshake failed: certificate verify failed (SSL routines)") does."""
    _, error, took = timed(lambda: read_one(sb.service_url_tls, str(sb.certs.other_ca), tls_auth(sb.certs.client("admin")),
                                            plain_topic, operation_timeout_seconds=timeout_s))
    assert isinstance(error, pulsar.ConnectError), error
    assert str(error) == "Pulsar error: ConnectError"
    assert took < 2.0, took


@pytest.mark.third_party
def test_untrusted_client_certificate_and_no_credentials_fail_only_at_operation_timeout(sb, plain_topic):
    """Authentication failures are retried by the client: an "admin" certificate from another CA (the broker's
    handshake refuses it) and no credentials at all both end in Timeout at operation_timeout_seconds."""
    foreign = tls_auth(sb.certs.foreign_client)
    for auth in (foreign, None):
        _, error, took = timed(lambda: read_one(sb.service_url_tls, str(sb.certs.ca), auth, plain_topic,  # noqa: B023
                                                operation_timeout_seconds=OPERATION_TIMEOUT_S))
        assert isinstance(error, pulsar.Timeout), error
        assert str(error) == "Pulsar error: TimeOut"
        assert OPERATION_TIMEOUT_S - 0.5 < took < OPERATION_TIMEOUT_S + 3, took


@pytest.mark.third_party
def test_role_without_permission_fails_at_once(sb, plain_topic):
    _, error, took = timed(lambda: read_one(sb.service_url_tls, str(sb.certs.ca), tls_auth(sb.certs.client("no-grant")),
                                            plain_topic, operation_timeout_seconds=30))
    assert isinstance(error, pulsar.AuthorizationError), error
    assert str(error) == "Pulsar error: AuthorizationError"
    assert took < 2.0, took


@pytest.fixture  # for one test: stopped at its end
def wrong_name_broker(sb, tmp_path_factory):
    """A TLS broker (no authentication) whose certificate, signed by the same CA, names only broker.invalid."""
    pair = sb.certs.broker_wrong_name
    with LocalBroker(data_dir=tmp_path_factory.mktemp("wrong-name"), tls=TlsFiles(pair.cert, pair.key, sb.certs.ca),
                     broker_config=SAME_MESSAGE_LIMIT, jvm_options=TEST_BROKER_JVM) as b:
        client = pulsar.Client(b.service_url, logger=quiet_logger("pulsar-secured-facts", logging.CRITICAL))
        try:
            client.create_producer("persistent://public/default/named").send(b"plain")
        finally:
            client.close()
        yield b


@pytest.mark.third_party
def test_hostname_mismatch(sb, wrong_name_broker):
    """tls_validate_hostname=True: ConnectError at once, whatever operation_timeout_seconds; False (the
    pulsar-client default) reads from the misnamed broker. requests always checks the name."""
    ca, topic = str(sb.certs.ca), "persistent://public/default/named"
    for timeout_s in (30, OPERATION_TIMEOUT_S):
        _, error, took = timed(lambda: read_one(wrong_name_broker.service_url_tls, ca, None, topic,  # noqa: B023
                                                operation_timeout_seconds=timeout_s))  # noqa: B023
        assert isinstance(error, pulsar.ConnectError), error
        assert took < 2.0, took
    assert read_one(wrong_name_broker.service_url_tls, ca, None, topic, validate=False) == b"plain"
    with pytest.raises(requests.exceptions.SSLError,
                       match=r"CERTIFICATE_VERIFY_FAILED\] certificate verify failed: Hostname mismatch, certificate is not valid for 'localhost'"):
        requests.get(f"{wrong_name_broker.admin_url_tls}/admin/v2/clusters", verify=ca, timeout=10)


# -- requests and the admin API over https ----------------------------------------------------------

@pytest.mark.third_party
def test_requests_mtls_and_its_errors(sb):
    url = f"{sb.admin_url_tls}/admin/v2/clusters"
    ca, admin = str(sb.certs.ca), sb.certs.client("admin")
    cert = (str(admin.cert), str(admin.key))
    assert requests.get(url, verify=ca, cert=cert, timeout=10).json() == ["standalone"]
    assert requests.get(url.replace("localhost", "127.0.0.1"), verify=ca, cert=cert, timeout=10).status_code == 200
    with pytest.raises(requests.exceptions.SSLError,
                       match=r"CERTIFICATE_VERIFY_FAILED\] certificate verify failed: unable to get local issuer certificate"):
        requests.get(url, verify=str(sb.certs.other_ca), cert=cert, timeout=10)
    foreign = sb.certs.foreign_client
    with pytest.raises(requests.exceptions.SSLError, match=r"SSLV3_ALERT_CERTIFICATE_UNKNOWN|certificate unknown"):
        requests.get(url, verify=ca, cert=(str(foreign.cert), str(foreign.key)), timeout=10)
    no_cert = requests.get(url, verify=ca, timeout=10)
    assert no_cert.status_code == 401 and "Authentication required" in no_cert.text
    assert requests.get(url, verify=ca, headers={"Authorization": f"Bearer {sb.token('admin')}"}, timeout=10).status_code == 200


class _OwnVerifySession(requests.Session):
    """The fix: a request without its own `verify` takes the Session's, so the environment cannot replace it
    (the environment's bundle still applies to a Session left at verify=True)."""

    def merge_environment_settings(self, url, proxies, stream, verify, cert):  # type: ignore[no-untyped-def]
        return super().merge_environment_settings(url, proxies, stream, self.verify if verify is None else verify, cert)


@pytest.mark.third_party
def test_requests_ca_bundle_overrides_session_verify(sb, monkeypatch):
    """psf/requests#3829: with $REQUESTS_CA_BUNDLE (or $CURL_CA_BUNDLE) set, a Session's `verify` (a CA file, or
    even False) is replaced by the bundle; per-request `verify=`, trust_env=False, or a Session that passes its
    own `verify` to the merge avoid it."""
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    if not os.path.exists(bundle):
        pytest.skip("no system CA bundle")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", bundle)
    url = f"{sb.admin_url_tls}/admin/v2/clusters"
    admin = sb.certs.client("admin")

    def session(cls: type[requests.Session] = requests.Session, verify: Any = str(sb.certs.ca), trust_env: bool = True) -> requests.Session:
        s = cls()
        s.verify, s.cert, s.trust_env = verify, (str(admin.cert), str(admin.key)), trust_env
        return s

    with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        session().get(url, timeout=10)
    with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        session(verify=False).get(url, timeout=10)  # verify=False is overridden too: the bundle is checked
    assert session().get(url, verify=str(sb.certs.ca), timeout=10).status_code == 200
    assert session(trust_env=False).get(url, timeout=10).status_code == 200
    assert session(_OwnVerifySession).get(url, timeout=10).status_code == 200
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.setenv("CURL_CA_BUNDLE", bundle)
    with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        session().get(url, timeout=10)


# -- least privilege ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grants(sb: SecuredBroker) -> dict[str, int]:
    """Tenant lp (tenant admin: tenant-admin), namespace lp/ns with the roles' grants, TOPIC with 2 partitions, a
    string schema and 5 messages; answers the position of the first entry of partition 0 and a publish time."""
    def ok(method: str, path: str, **kw: Any) -> requests.Response:
        r = sb.admin_request(method, path, **kw)
        assert r.status_code in (200, 204), (method, path, r.status_code, r.text)
        return r

    ok("PUT", f"/admin/v2/tenants/{TENANT}", json={"adminRoles": ["tenant-admin"], "allowedClusters": ["standalone"]})
    ok("PUT", f"/admin/v2/namespaces/{NAMESPACE}")
    ok("PUT", f"/admin/v2/persistent/{NAMESPACE}/parted/partitions", json=2)
    for role, grant in ROLES.items():
        if grant and grant[0] == "namespace":
            ok("POST", f"/admin/v2/namespaces/{NAMESPACE}/permissions/{role}", json=grant[1])
        elif grant and grant[0] == "topic":
            ok("POST", f"/admin/v2/persistent/{NAMESPACE}/parted/permissions/{role}", json=grant[1])
    client = sb.client("admin")
    try:
        producer = client.create_producer(TOPIC, schema=pulsar.schema.StringSchema(), batching_enabled=False,
                                          message_routing_mode=pulsar.PartitionsRoutingMode.UseSinglePartition)
        first = producer.send("m0")
        for i in range(1, 5):
            producer.send(f"m{i}")
        producer.close()
    finally:
        client.close()
    partition = f"/admin/v2/persistent/{NAMESPACE}/parted-partition-{first.partition()}"
    ok("PUT", f"{partition}/subscription/{SUBSCRIPTION}", json={"ledgerId": -1, "entryId": -1})  # for resetcursor
    stats = ok("GET", f"{partition}/internalStats").json()
    assert stats["entriesAddedCounter"] == 5
    return {"partition": first.partition(), "ledger": first.ledger_id(), "entry": first.entry_id(),
            "publish_ms": int(time.time() * 1000) - 60_000}


def _binary(sb: SecuredBroker, role: str, action: str) -> str:
    client = sb.client(role, operation_timeout_seconds=OPERATION_TIMEOUT_S)
    try:
        if action == "reader":
            client.create_reader(TOPIC, pulsar.MessageId.earliest).close()
        elif action == "consumer":
            client.subscribe(TOPIC, f"{SUBSCRIPTION}-{role}", initial_position=pulsar.InitialPosition.Earliest).close()
        else:
            client.create_producer(TOPIC).close()
        return "ok"
    except pulsar.PulsarException as e:
        return type(e).__name__
    finally:
        client.close()


def _calls(g: dict[str, int]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """name -> (method, path, request kwargs). `partition` is the partition holding the messages."""
    t = f"/admin/v2/persistent/{NAMESPACE}/parted"
    p = f"{t}-partition-{g['partition']}"
    at = {"ledgerId": g["ledger"], "entryId": g["entry"], "partitionIndex": g["partition"]}
    lean = {"excludePublishers": "true", "excludeConsumers": "true"}
    return {
        # what the source calls (metadata/admin.py)
        "GET partitions": ("GET", f"{t}/partitions", {"params": {"checkAllowAutoCreation": "false"}}),
        "GET namespace topic list (persistent/t/ns)": ("GET", f"/admin/v2/persistent/{NAMESPACE}", {}),
        "GET internalStats": ("GET", f"{p}/internalStats", {}),
        "GET partitioned-internalStats": ("GET", f"{t}/partitioned-internalStats", {}),
        "GET stats": ("GET", f"{p}/stats", {"params": lean}),
        "GET partitioned-stats": ("GET", f"{t}/partitioned-stats", {"params": {"perPartition": "true", **lean}}),
        "HEAD entry (ledger/l/entry/e)": ("HEAD", f"{p}/ledger/{g['ledger']}/entry/{g['entry']}", {}),
        "GET messageid/{timestamp}": ("GET", f"{p}/messageid/{g['publish_ms']}", {}),
        "GET schema (latest)": ("GET", f"/admin/v2/schemas/{NAMESPACE}/parted/schema", {}),
        "GET schema (version 0)": ("GET", f"/admin/v2/schemas/{NAMESPACE}/parted/schema/0", {}),
        "GET topic dispatchRate": ("GET", f"{t}/dispatchRate", {"params": {"applied": "true"}}),
        "GET topic subscriptionDispatchRate": ("GET", f"{t}/subscriptionDispatchRate", {"params": {"applied": "true"}}),
        "GET v3 transactionBufferStats": ("GET", f"/admin/v3/transactions/transactionBufferStats/{NAMESPACE}/parted-partition-{g['partition']}", {}),
        "PUT subscription": ("PUT", f"{p}/subscription/{SUBSCRIPTION}-ROLE", {"json": at}),
        "POST resetcursor": ("POST", f"{p}/subscription/{SUBSCRIPTION}/resetcursor", {"json": at}),
        # related calls the source does not make
        "GET entry (getMessageById)": ("GET", f"{p}/ledger/{g['ledger']}/entry/{g['entry']}", {}),
        "GET examinemessage": ("GET", f"{p}/examinemessage", {"params": {"initialPosition": "earliest", "messagePosition": "1"}}),
        "GET lastMessageId": ("GET", f"{p}/lastMessageId", {}),
        "GET namespaces/t/ns/topics": ("GET", f"/admin/v2/namespaces/{NAMESPACE}/topics", {}),
        "GET namespace dispatchRate": ("GET", f"/admin/v2/namespaces/{NAMESPACE}/dispatchRate", {}),
        "GET namespace subscriptionDispatchRate": ("GET", f"/admin/v2/namespaces/{NAMESPACE}/subscriptionDispatchRate", {}),
    }


def least_privilege_table(sb: SecuredBroker, g: dict[str, int]) -> dict[str, dict[str, int | str]]:
    table: dict[str, dict[str, int | str]] = {}
    for name, (method, path, kwargs) in _calls(g).items():
        table[name] = {role: sb.admin_request(method, path.replace("ROLE", role), role=role, **kwargs).status_code for role in ROLES}
    for action in ("reader", "consumer", "producer"):
        table[f"binary: {action}"] = {role: _binary(sb, role, action) for role in ROLES}
    return table


def render(table: dict[str, dict[str, int | str]]) -> str:
    lines = ["| call | " + " | ".join(ROLES) + " |", "|---" * (len(ROLES) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(str(row[r]) for r in ROLES) + " |" for name, row in table.items()]
    return "\n".join(lines)


# Measured on Pulsar 4.0.7 (standalone, authorizationEnabled, default PulsarAuthorizationProvider): columns as ROLES.
# 401 (topic operations) and 403 (namespace operations) both mean "authenticated, not authorized" here.
OK, NO_CONTENT, NO, FORBIDDEN, GONE, DENIED = 200, 204, 401, 403, 404, "AuthorizationError"


def row(*cells: int | str) -> dict[str, int | str]:
    assert len(cells) == len(ROLES)
    return dict(zip(ROLES, cells, strict=True))


LEAST_PRIVILEGE: dict[str, dict[str, int | str]] = {
    'GET partitions': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'GET namespace topic list (persistent/t/ns)': row(FORBIDDEN, OK, OK, FORBIDDEN, OK, FORBIDDEN, OK, OK),
    'GET internalStats': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'GET partitioned-internalStats': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'GET stats': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'GET partitioned-stats': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'HEAD entry (ledger/l/entry/e)': row(NO, OK, NO, NO, OK, OK, OK, OK),
    'GET messageid/{timestamp}': row(NO, OK, NO, NO, OK, OK, OK, OK),
    'GET schema (latest)': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'GET schema (version 0)': row(NO, OK, OK, NO, OK, OK, OK, OK),
    'GET topic dispatchRate': row(FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, OK, OK),
    'GET topic subscriptionDispatchRate': row(FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, OK, OK),
    'GET v3 transactionBufferStats': row(OK, OK, OK, OK, OK, OK, OK, OK),  # no authorization check at all
    'PUT subscription': row(NO, NO_CONTENT, NO, NO, NO_CONTENT, NO_CONTENT, NO_CONTENT, NO_CONTENT),
    'POST resetcursor': row(NO, NO_CONTENT, NO, NO, NO_CONTENT, NO_CONTENT, NO_CONTENT, NO_CONTENT),
    'GET entry (getMessageById)': row(NO, OK, NO, NO, OK, OK, OK, OK),
    'GET examinemessage': row(NO, OK, NO, NO, OK, OK, OK, OK),
    'GET lastMessageId': row(NO, OK, NO, NO, OK, OK, OK, OK),
    'GET namespaces/t/ns/topics': row(FORBIDDEN, OK, OK, FORBIDDEN, OK, FORBIDDEN, OK, OK),
    'GET namespace dispatchRate': row(FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, OK, OK),
    'GET namespace subscriptionDispatchRate': row(FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, OK, OK),
    'binary: reader': row(DENIED, 'ok', DENIED, DENIED, 'ok', 'ok', 'ok', 'ok'),
    'binary: consumer': row(DENIED, 'ok', DENIED, DENIED, 'ok', 'ok', 'ok', 'ok'),
    'binary: producer': row(DENIED, DENIED, 'ok', DENIED, 'ok', DENIED, 'ok', 'ok'),
}


def test_least_privilege(sb, grants, tmp_path):
    table = least_privilege_table(sb, grants)
    (tmp_path / "least-privilege.md").write_text(render(table))
    print("\n" + render(table))
    assert table == LEAST_PRIVILEGE, "\n" + render(table)


def test_refusals_name_the_operation(sb, grants):
    """What an authenticated role without the permission is told (the JSON body's "reason")."""
    calls = _calls(grants)
    expected = {
        ("GET partitions", "no-grant"): (401, "Unauthorized to validateTopicOperation for operation [LOOKUP] on topic [persistent://lp/ns/parted]"),
        ("GET topic dispatchRate", "consume-only"):
            (403, "Unauthorized to validateTopicPolicyOperation for operation [READ] on topic [persistent://lp/ns/parted] on policy [RATE]"),
        ("GET namespace topic list (persistent/t/ns)", "topic-consume"):
            (403, "Unauthorized to validateNamespaceOperation for operation [GET_TOPICS] on namespace [lp/ns]"),
    }
    for (name, role), (status, reason) in expected.items():
        method, path, kwargs = calls[name]
        answer = sb.admin_request(method, path, role=role, **kwargs)
        assert (answer.status_code, answer.json()["reason"]) == (status, reason)
    no_credentials = sb.admin_request("GET", calls["GET v3 transactionBufferStats"][1], role=None)
    assert no_credentials.status_code == 401  # authentication is still required there


def test_token_role_is_the_certificate_role(sb, grants):
    """A token of a role gets what a certificate of that role gets (same principal)."""
    path = f"/admin/v2/persistent/{NAMESPACE}/parted/partitions"
    for role in ("consume-only", "no-grant"):
        by_cert = sb.admin_request("GET", path, role=role).status_code
        assert sb.admin_request("GET", path, role=None, token=sb.token(role)).status_code == by_cert


def test_certificates_are_pkcs8_and_name_the_roles(tmp_path):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    certs = make_certificates(tmp_path, roles=["reader"])
    assert certs.broker.key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    cert = x509.load_pem_x509_certificate(certs.client("reader").cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "reader"
    san = x509.load_pem_x509_certificate(certs.broker.cert.read_bytes()).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert set(map(str, san.value.get_values_for_type(x509.IPAddress))) == {"127.0.0.1"}
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
