"""TLS checks against real TLS servers on loopback (certificates made with trustme): the admin API's session
(metadata/admin_http.py: the CA file of the options even where REQUESTS_CA_BUNDLE is set, host names, a client
certificate) and the look at the broker's certificate at load (metadata/service_tls.py)."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trustme

from pulsar_throttled_source.credentials import TlsSettings
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.metadata.admin_http import AdminError
from pulsar_throttled_source.metadata.service_tls import ServiceCertificateRefused, check_service_certificate


class _Topics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps([]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _serve(ca: trustme.CA, names: tuple[str, ...], require_client_cert: bool = False) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Topics)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        ca.configure_trust(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def https_named_localhost(ca) -> Iterator[int]:
    server = _serve(ca, ("localhost",))
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="module")
def https_named_elsewhere(ca) -> Iterator[int]:
    server = _serve(ca, ("broker.invalid",))
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="module")
def ca_file(ca, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _admin(port: int, tls: TlsSettings) -> PulsarAdmin:
    return PulsarAdmin(f"https://localhost:{port}", timeout_s=5, tls=tls, retry_timeout_s=30)


def test_the_admin_api_trusts_the_options_ca_file_even_where_the_environment_names_a_bundle(https_named_localhost, ca_file, monkeypatch):
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE replace a session's CA file (psf/requests#3829)."""
    system_bundle = ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", system_bundle)
    monkeypatch.setenv("CURL_CA_BUNDLE", system_bundle)
    assert _admin(https_named_localhost, TlsSettings(trust_file=ca_file)).list_topics("public/default") == []
    assert _admin(https_named_localhost, TlsSettings(allow_insecure=True)).list_topics("public/default") == []


def test_an_untrusted_certificate_fails_at_once_naming_the_url_and_the_option(https_named_localhost):
    admin = _admin(https_named_localhost, TlsSettings())  # the system's trust store: not our CA
    started = time.monotonic()
    with pytest.raises(AdminError) as refused:
        admin.list_topics("public/default")
    assert time.monotonic() - started < 3 and admin.requests_made == 1  # not retried as an outage
    message = str(refused.value)
    assert f"TLS failed with the Pulsar admin API at https://localhost:{https_named_localhost}" in message
    assert "not signed by a CA this query trusts: set 'pulsar.client.tlsTrustCertsFilePath'" in message


def test_a_certificate_for_another_host_fails_unless_hostname_checks_are_off(https_named_elsewhere, ca_file):
    with pytest.raises(AdminError, match="does not name that host: .*'pulsar.client.tlsValidateHostname' to false"):
        _admin(https_named_elsewhere, TlsSettings(trust_file=ca_file)).list_topics("public/default")
    assert _admin(https_named_elsewhere, TlsSettings(trust_file=ca_file, validate_hostname=False)).list_topics("public/default") == []


def test_the_admin_api_shows_the_client_certificate(ca, ca_file, tmp_path):
    server = _serve(ca, ("localhost",), require_client_cert=True)
    port = server.server_address[1]
    try:
        client = ca.issue_cert("reader.client.invalid")
        cert, key = tmp_path / "client.pem", tmp_path / "client.key"
        client.cert_chain_pems[0].write_to_path(str(cert))
        client.private_key_pem.write_to_path(str(key))
        assert _admin(port, TlsSettings(trust_file=ca_file, client_cert=(str(cert), str(key)))).list_topics("public/default") == []
        with pytest.raises(AdminError):  # without it the server ends the handshake
            PulsarAdmin(f"https://localhost:{port}", timeout_s=5, tls=TlsSettings(trust_file=ca_file)).list_topics("public/default")
    finally:
        server.shutdown()


def test_the_brokers_certificate_is_looked_at_once_at_load(https_named_localhost, https_named_elsewhere, ca_file):
    ok = f"pulsar+ssl://localhost:{https_named_localhost}"
    check_service_certificate(ok, {"tls_trust_certs_file_path": ca_file, "tls_validate_hostname": True})
    with pytest.raises(ServiceCertificateRefused) as untrusted:
        check_service_certificate(ok, {"tls_validate_hostname": True})
    assert f"TLS failed with the Pulsar broker at {ok}" in str(untrusted.value)
    assert "set 'pulsar.client.tlsTrustCertsFilePath'" in str(untrusted.value)
    elsewhere = f"pulsar+ssl://localhost:{https_named_elsewhere},other:6651/"
    with pytest.raises(ServiceCertificateRefused, match="does not name that host: use the host name .*'service.url'"):
        check_service_certificate(elsewhere, {"tls_trust_certs_file_path": ca_file, "tls_validate_hostname": True})
    check_service_certificate(elsewhere, {"tls_trust_certs_file_path": ca_file, "tls_validate_hostname": False})
    check_service_certificate(elsewhere, {"tls_allow_insecure_connection": True})
    check_service_certificate(f"pulsar://localhost:{https_named_elsewhere}", {})  # not TLS: nothing to look at


def test_every_host_of_a_multi_host_service_url_is_looked_at(https_named_localhost, https_named_elsewhere, ca_file):
    """A cluster's service URL names every broker, and the client sends lookups to each in turn: a certificate
    refused on the second broker is found at load too, naming that host."""
    second_refused = f"pulsar+ssl://localhost:{https_named_localhost},localhost:{https_named_elsewhere}"
    with pytest.raises(ServiceCertificateRefused) as refused:
        check_service_certificate(second_refused, {"tls_trust_certs_file_path": ca_file, "tls_validate_hostname": True})
    assert f"TLS failed with the Pulsar broker at {second_refused} (host localhost:{https_named_elsewhere})" in str(refused.value)
    assert "does not name that host" in str(refused.value)
    both_fine = f"pulsar+ssl://localhost:{https_named_localhost},localhost:{https_named_localhost}/"
    check_service_certificate(both_fine, {"tls_trust_certs_file_path": ca_file, "tls_validate_hostname": True})


def test_a_broker_not_reachable_at_load_is_left_to_the_read_tasks():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    check_service_certificate(f"pulsar+ssl://127.0.0.1:{port}", {"tls_validate_hostname": True}, timeout_s=1)

