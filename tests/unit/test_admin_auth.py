"""The admin API's authenticators (metadata/admin_auth.py): a token file read again when it changes, an
OAuth2 access token fetched again before it expires (fake clock; a small token endpoint stands in for
the issuer here, the real authorization server is in tests/integration/test_secured_*), basic auth."""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import requests

from pulsar_throttled_source.credentials import BasicAuth, OAuth2Auth, TlsAuth, TokenAuth
from pulsar_throttled_source.metadata.admin_auth import AuthenticationFailed, FileToken, authenticator


def _authorization(auth: requests.auth.AuthBase) -> str:
    return auth(requests.Request("GET", "http://broker:8080/admin/v2/clusters").prepare()).headers["Authorization"]


def test_a_token_file_is_read_again_when_it_changes(tmp_path):
    path = tmp_path / "token"
    path.write_text("first.token.value\n")
    auth = authenticator(TokenAuth(file=str(path)))
    assert isinstance(auth, FileToken)
    assert _authorization(auth) == "Bearer first.token.value"
    path.write_text("second.token.value-longer\n")  # rotated (another size: seen even within one mtime tick)
    assert _authorization(auth) == "Bearer second.token.value-longer"
    replacement = tmp_path / "token.new"  # replaced by rename, as Kubernetes and Vault agents do
    replacement.write_text("third.token.value-the-longest\n")
    os.replace(replacement, path)
    assert _authorization(auth) == "Bearer third.token.value-the-longest"
    path.unlink()
    with pytest.raises(AuthenticationFailed, match=f"Cannot read the token file {path} .*'pulsar.client.authParams'"):
        _authorization(auth)
    assert "value" not in repr(auth)


def test_static_and_basic_credentials_and_a_client_certificate():
    assert _authorization(authenticator(TokenAuth(token="abc.def.ghi"))) == "Bearer abc.def.ghi"
    basic = authenticator(BasicAuth("reader", "pa55word"))
    assert _authorization(basic) == "Basic " + base64.b64encode(b"reader:pa55word").decode()
    assert "pa55word" not in repr(basic)
    assert authenticator(TlsAuth("/c.pem", "/k.pem")) is None and authenticator(None) is None  # the session's cert


class _Issuer(BaseHTTPRequestHandler):
    """A token endpoint with a discovery document; counts what it issued."""

    issued: list[dict[str, list[str]]] = []
    lifetime_s = 100

    def do_GET(self) -> None:
        if self.path == "/.well-known/openid-configuration":
            port = self.server.server_address[1]
            self._answer(200, {"issuer": f"http://127.0.0.1:{port}", "token_endpoint": f"http://127.0.0.1:{port}/token"})
        else:
            self._answer(404, {})

    def do_POST(self) -> None:
        form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        if form.get("client_secret") != ["s3cret"]:
            self._answer(401, {"error": "invalid_client"})
            return
        type(self).issued.append(form)
        self._answer(200, {"access_token": f"access-{len(self.issued)}", "token_type": "Bearer", "expires_in": self.lifetime_s})

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def issuer() -> Iterator[str]:
    _Issuer.issued = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Issuer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _credentials_file(tmp_path: Path, secret: str) -> str:
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps({"type": "client_credentials", "client_id": "spark-reader", "client_secret": secret}))
    return f"file://{path}"


def test_an_oauth2_access_token_is_fetched_again_before_it_expires(issuer, tmp_path):
    now = [1000.0]
    auth = authenticator(OAuth2Auth(issuer, _credentials_file(tmp_path, "s3cret"), audience="urn:pulsar", scope="read"),
                         clock=lambda: now[0])
    assert _authorization(auth) == "Bearer access-1"
    form = _Issuer.issued[0]
    assert (form["grant_type"], form["client_id"], form["audience"], form["scope"]) == (
        ["client_credentials"], ["spark-reader"], ["urn:pulsar"], ["read"])
    now[0] += 79  # within 80 % of its 100 s lifetime: the same token
    assert _authorization(auth) == "Bearer access-1" and len(_Issuer.issued) == 1
    now[0] += 2  # past it: a new one, before the old one expires
    assert _authorization(auth) == "Bearer access-2" and len(_Issuer.issued) == 2
    assert "s3cret" not in repr(auth)


def test_an_oauth2_issuer_that_refuses_the_credentials_is_named_without_the_secret(issuer, tmp_path):
    auth = authenticator(OAuth2Auth(issuer, _credentials_file(tmp_path, "wrong-s3cret")))
    with pytest.raises(AuthenticationFailed) as refused:
        _authorization(auth)
    assert f"the OAuth2 issuer {issuer}" in str(refused.value) and "invalid_client" in str(refused.value)
    assert "s3cret" not in str(refused.value)
    missing = authenticator(OAuth2Auth(issuer + "/nowhere", _credentials_file(tmp_path, "s3cret")))
    with pytest.raises(AuthenticationFailed, match="has no discovery document at /.well-known/openid-configuration .*HTTP 404"):
        _authorization(missing)
