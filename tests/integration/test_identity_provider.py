"""Issue 43: OAuth2 client credentials against a real authorization server and a real broker that trusts its key.

One identity provider (tests/identity_provider.py: mock-oauth2-server from Maven Central) and one standalone broker
per module. The broker authenticates with AuthenticationProviderToken and the IdP's RSA key (tokenPublicKey: the
JWKS key written as DER), takes the role from `sub`, requires `aud`, and its own internal client is an OAuth2
superuser client of the same IdP. Tokens live TOKEN_LIFETIME_S, so an expired one is refused within a test. What
the source does when tokens expire while it reads is in test_secured_cluster (both read paths, in Spark).
"""

from __future__ import annotations

import base64
import json
import re
import stat
import time
from pathlib import Path

import pulsar
import pytest
import requests
from conftest import SAME_MESSAGE_LIMIT, TEST_BROKER_JVM
from helpers import quiet_logger
from identity_provider import UNTRUSTED_ISSUER_ID, IdentityProvider, jwt_claims

from pulsar_throttled_source.local_broker import LocalBroker

TOKEN_LIFETIME_S = 15
REFRESH_CHECK_S = 5
AUDIENCE = "pulsar-throttled-tests"
BROKER_CLIENT, SUPERUSER_ROLE = "broker-client", "broker-admin"  # the broker's own client: a superuser
READER_CLIENT, READER_ROLE = "reader-client", "reader"  # a client id mapped to a role of our choosing
STARTUP_BOUND_S = 10



@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory):
    with IdentityProvider(tmp_path_factory.mktemp("idp"), token_lifetime_s=TOKEN_LIFETIME_S, audience=AUDIENCE,
                          roles={BROKER_CLIENT: SUPERUSER_ROLE, READER_CLIENT: READER_ROLE}) as provider:
        yield provider


@pytest.fixture(scope="module")
def oauth_broker(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("oauth-broker")
    key_url = idp.write_public_key(work / "idp-public-key.der")
    superuser = idp.write_credentials(BROKER_CLIENT, work / "broker-client.json")
    config = {**idp.broker_config(key_url, superuser, SUPERUSER_ROLE, refresh_check_s=REFRESH_CHECK_S), **SAME_MESSAGE_LIMIT}
    # The launcher's readiness check would send its own HS256 admin token, which this broker does not trust: it
    # is given a superuser token from the IdP instead.
    broker = LocalBroker(data_dir=work / "broker", max_entries_per_ledger=50, broker_config=config,
                         ready_token=lambda: idp.access_token(BROKER_CLIENT), jvm_options=TEST_BROKER_JVM)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def accepted_token(idp: IdentityProvider, oauth_broker: LocalBroker) -> str:
    """A reader token the broker accepts now; the refusal test (last) sends it again once it has expired."""
    token = idp.access_token(READER_CLIENT)
    assert _admin_get(oauth_broker, "/admin/v2/namespaces/public", token).status_code == 200
    return token


@pytest.fixture(scope="module")
def reader_credentials(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return idp.write_credentials(READER_CLIENT, tmp_path_factory.mktemp("creds") / "reader-client.json")


@pytest.fixture(autouse=True)
def no_secret_in_output(request, capfd):
    """Nothing a test printed (its clients' logs, the helpers) shows a client secret or a token the test saw."""
    seen: list[str] = []
    request.node.secrets_seen = seen
    yield
    out, err = capfd.readouterr()
    idp = request.node.funcargs.get("idp")
    secrets = list(seen) + ([idp.client_secret(c) for c in (BROKER_CLIENT, READER_CLIENT)] if idp else [])
    for s in secrets:
        assert s not in out + err, f"a secret or token appears in the output of {request.node.name}"


def _token(request, idp: IdentityProvider, client_id: str, issuer_id: str | None = None) -> str:
    tok = idp.access_token(client_id, issuer_id)
    request.node.secrets_seen.extend([tok, tok.rsplit(".", 1)[1]])
    return tok


def _header(token: str) -> dict[str, str]:
    payload = token.split(".")[0]
    header: dict[str, str] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return header


def _broker_log(broker: LocalBroker) -> str:
    return (Path(broker.data_dir) / "broker.log").read_text(errors="replace")


def _admin_get(broker: LocalBroker, path: str, token: str | None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return requests.get(f"{broker.admin_url}{path}", headers=headers, timeout=10)


# ---------------------------------------------------------------------------------------
# The identity provider itself


def test_identity_provider_serves_discovery_jwks_and_client_credentials_tokens(request, idp):
    assert idp.startup_s is not None and idp.startup_s < STARTUP_BOUND_S, f"IdP start-up took {idp.startup_s:.1f} s"
    doc = idp.discovery()
    assert doc["issuer"] == idp.issuer_url == f"http://127.0.0.1:{idp.port}/pulsar"
    assert doc["token_endpoint"] == f"{idp.issuer_url}/token" and doc["jwks_uri"] == f"{idp.issuer_url}/jwks"
    keys = idp.jwks()["keys"]
    assert [(k["kty"], k["kid"], "d" in k) for k in keys] == [("RSA", "pulsar", False)]  # public half only

    before = int(time.time())
    token = _token(request, idp, READER_CLIENT)
    claims = jwt_claims(token)
    assert _header(token)["alg"] == "RS256" and _header(token)["kid"] == "pulsar"
    assert claims["sub"] == READER_ROLE and claims["aud"] == AUDIENCE and claims["iss"] == idp.issuer_url
    assert claims["exp"] - claims["iat"] == TOKEN_LIFETIME_S and before - 1 <= claims["iat"] <= time.time()
    # A client id without a chosen role gets itself as its role.
    assert jwt_claims(_token(request, idp, "some-other-client"))["sub"] == "some-other-client"

    # The untrusted issuer: the same claims, a key of its own.
    other = _token(request, idp, READER_CLIENT, UNTRUSTED_ISSUER_ID)
    assert {k: jwt_claims(other)[k] for k in ("sub", "aud")} == {"sub": READER_ROLE, "aud": AUDIENCE}
    other_keys = requests.get(f"{idp.base_url}/{UNTRUSTED_ISSUER_ID}/jwks", timeout=5).json()["keys"]
    assert len(other_keys) == 1 and other_keys[0]["n"] != keys[0]["n"]


def test_credentials_file_is_a_pulsar_client_credentials_file(idp, reader_credentials):
    written = json.loads(reader_credentials.read_text())
    same_secret = written.pop("client_secret") == idp.client_secret(READER_CLIENT)  # not compared in the assertion: shown if it fails
    assert same_secret and written == {"type": "client_credentials", "client_id": READER_CLIENT, "issuer_url": idp.issuer_url}
    assert stat.S_IMODE(reader_credentials.stat().st_mode) == 0o600
    assert idp.client_secret(READER_CLIENT) not in repr(idp)


def test_a_second_identity_provider_signs_with_another_key(request, idp, tmp_path):
    """Every instance makes its own signing key: mock-oauth2-server's built-in one is the same in every copy."""
    with IdentityProvider(tmp_path, token_lifetime_s=TOKEN_LIFETIME_S, audience=AUDIENCE) as second:
        assert second.port != idp.port and second.startup_s is not None and second.startup_s < STARTUP_BOUND_S
        assert second.jwks()["keys"][0]["n"] != idp.jwks()["keys"][0]["n"]


# ---------------------------------------------------------------------------------------
# The broker trusts the IdP's tokens, and only them


@pytest.mark.third_party
def test_admin_api_accepts_a_bearer_token_from_the_identity_provider(request, idp, oauth_broker, accepted_token):
    for client in (BROKER_CLIENT, READER_CLIENT):
        resp = _admin_get(oauth_broker, "/admin/v2/namespaces/public", _token(request, idp, client))
        assert resp.status_code == 200 and "public/default" in resp.json()
    # The standalone's own admin client (brokerClientAuthenticationPlugin: OAuth2, the superuser) made public/default.
    assert re.search(r'"PUT /admin/v2/namespaces/public/default HTTP/1.1" 204 .*"Pulsar-Java-v4.0.7"', _broker_log(oauth_broker))


# ---------------------------------------------------------------------------------------
# The Python client's OAuth2 plugin


@pytest.mark.third_party
@pytest.mark.parametrize("private_key", ["file", "data"])
def test_python_client_reads_a_topic_with_oauth2_client_credentials(idp, oauth_broker, reader_credentials, private_key):
    params = idp.oauth2_params(READER_CLIENT, reader_credentials if private_key == "file" else None)
    assert set(json.loads(params)) == {"issuer_url", "private_key", "audience"}
    topic = f"persistent://public/default/oauth2-read-{private_key}-{time.time_ns()}"
    client = pulsar.Client(oauth_broker.service_url, authentication=pulsar.AuthenticationOauth2(params), logger=quiet_logger("pulsar-oauth2-test-client"),
                           operation_timeout_seconds=10)
    try:
        producer = client.create_producer(topic)
        sent = [f"m-{i}".encode() for i in range(20)]
        for payload in sent:
            producer.send(payload)
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert [reader.read_next(5000).data() for _ in sent] == sent
    finally:
        client.close()
    assert f"connected with role={READER_ROLE} using authMethod=token" in _broker_log(oauth_broker)


@pytest.mark.third_party
@pytest.mark.parametrize("params", [
    pytest.param(lambda idp, creds: {"issuerUrl": idp.issuer_url, "privateKey": f"file://{creds}", "audience": AUDIENCE},
                 id="java-style-names"),
    pytest.param(lambda idp, creds: {"issuer_url": idp.issuer_url, "client_id": READER_CLIENT, "client_secret": "s3cret-in-params",
                                     "audience": AUDIENCE}, id="inline-client-id-and-secret"),
    pytest.param(lambda idp, creds: {"issuer_url": idp.issuer_url, "private_key": str(creds), "audience": AUDIENCE},
                 id="private-key-plain-path"),
])
def test_which_parameter_spellings_the_python_client_takes(idp, oauth_broker, reader_credentials, params, request):
    """The C++ plugin behind pulsar.AuthenticationOauth2 reads issuer_url, private_key (file://, a plain path or
    data:application/json;base64,...), or client_id and client_secret inline, audience and scope; the Java
    client's camelCase names (issuerUrl, privateKey) are not read, and then no token is fetched."""
    given = params(idp, reader_credentials)
    client = pulsar.Client(oauth_broker.service_url, authentication=pulsar.AuthenticationOauth2(json.dumps(given)),
                           logger=quiet_logger("pulsar-oauth2-test-client"), operation_timeout_seconds=5)
    topic = f"persistent://public/default/oauth2-params-{time.time_ns()}"
    try:
        if "issuerUrl" in given:
            with pytest.raises(pulsar.AuthenticationError):
                client.create_reader(topic, pulsar.MessageId.earliest)
        else:
            client.create_reader(topic, pulsar.MessageId.earliest).close()
    finally:
        client.close()


@pytest.mark.third_party
def test_admin_api_refuses_no_untrusted_and_expired_tokens(request, idp, oauth_broker, accepted_token):
    """Last in the module, so that the token the broker accepted at its start has expired by now (else: wait)."""
    request.node.secrets_seen.append(accepted_token)
    untrusted = _token(request, idp, READER_CLIENT, UNTRUSTED_ISSUER_ID)
    wait = jwt_claims(accepted_token)["exp"] + 1.5 - time.time()
    if wait > 0:
        time.sleep(wait)
    statuses = {name: _admin_get(oauth_broker, "/admin/v2/namespaces/public", token).status_code
                for name, token in [("none", None), ("untrusted", untrusted), ("expired", accepted_token), ("not-a-jwt", "not-a-jwt")]}
    assert statuses == {"none": 401, "untrusted": 401, "expired": 401, "not-a-jwt": 401}
    # the same request with a fresh token passes
    assert _admin_get(oauth_broker, "/admin/v2/namespaces/public", _token(request, idp, READER_CLIENT)).status_code == 200
    # The binary protocol refuses them too: the broker closes each connect, and the C++ client tries again until its
    # operation timeout (pulsar.Timeout, not AuthenticationError); the broker's log says why it refused.
    topic = f"persistent://public/default/oauth2-refused-{time.time_ns()}"
    for token, reason in [(untrusted, "JWT signature does not match"), (accepted_token, "JWT expired")]:
        seen = len(_broker_log(oauth_broker))
        client = pulsar.Client(oauth_broker.service_url, authentication=pulsar.AuthenticationToken(str(token)), logger=quiet_logger("pulsar-oauth2-test-client"),
                               operation_timeout_seconds=3)
        try:
            with pytest.raises(pulsar.Timeout):
                client.create_reader(topic, pulsar.MessageId.earliest)
        finally:
            client.close()
        refusals = re.findall(r"Failed to authenticate: operation=connect, principal=null, reason=(.*)", _broker_log(oauth_broker)[seen:])
        assert refusals and all(reason in r for r in refusals), refusals[:3]
