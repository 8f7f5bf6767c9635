"""The secured mode of the local cluster's launcher without starting it (issue 52): TLS ports in the layout, the
certificates (each member's own address its only name), the token key and tokens, each role's config keys and the
metadata set-up's TLS URLs."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.serialization import load_der_public_key

from pulsar_throttled_source.local_broker.__main__ import build_parser
from pulsar_throttled_source.local_broker.broker_error import BrokerError
from pulsar_throttled_source.local_broker.cluster import ClusterInfo, start_cluster
from pulsar_throttled_source.local_broker.cluster_config import ClusterSettings, broker_conf, metadata_setup_args, proxy_conf
from pulsar_throttled_source.local_broker.cluster_layout import load_or_plan, plan_layout
from pulsar_throttled_source.local_broker.cluster_security import ensure_security, readiness_request


@pytest.fixture
def secured(tmp_path):
    layout = plan_layout(tmp_path, secured=True)
    return layout, ensure_security(layout)


def test_a_secured_layout_gives_brokers_and_proxy_tls_ports_and_a_plain_one_does_not(tmp_path):
    layout = plan_layout(tmp_path / "s", secured=True)
    assert {m.name: sorted(m.ports) for m in layout.members if m.role in ("broker", "proxy")} == {
        "broker-1": ["broker", "brokerTls", "web", "webTls"], "broker-2": ["broker", "brokerTls", "web", "webTls"],
        "proxy": ["service", "serviceTls", "web", "webTls"]}
    ports = [p for m in layout.members for p in m.ports.values()]
    assert len(ports) == len(set(ports))
    saved = load_or_plan(tmp_path / "t", secured=True)
    assert load_or_plan(tmp_path / "t").secured  # a later command finds the mode with the ports
    plain = plan_layout(tmp_path / "p")
    assert not plain.secured and all("Tls" not in p for m in plain.members for p in m.ports)
    assert saved.secured


def test_each_certificate_names_only_its_members_own_address(secured):
    layout, security = secured
    for member in [*layout.of_role("broker"), *layout.of_role("proxy")]:
        cert = x509.load_pem_x509_certificate(security.cert(member.name).read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == [member.host]
        assert names.get_values_for_type(x509.DNSName) == []
        assert security.key(member.name).read_text().startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8: the broker's format
        assert security.key(member.name).stat().st_mode & 0o077 == 0


def test_a_tls_handshake_checks_the_members_name(secured):
    """A real handshake with a member's certificate: by its address it verifies; by a name it does not carry, not."""
    layout, security = secured
    broker = layout.member("broker-1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(security.cert(broker.name), security.key(broker.name))
    with socket.socket() as listener:
        listener.bind((broker.host, 0))
        listener.listen(2)
        port = listener.getsockname()[1]

        def serve() -> None:
            for _ in range(2):
                conn, _ = listener.accept()
                try:
                    with server_ctx.wrap_socket(conn, server_side=True):
                        pass
                except (ssl.SSLError, OSError):
                    pass

        threading.Thread(target=serve, daemon=True).start()
        with socket.create_connection((broker.host, port)) as sock, security.ssl_context().wrap_socket(sock, server_hostname=broker.host):
            pass
        with socket.create_connection((broker.host, port)) as sock, pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
            security.ssl_context().wrap_socket(sock, server_hostname=layout.member("broker-2").host)


def test_tokens_are_rs256_for_the_audience_and_verify_with_the_members_public_key(secured):
    _, security = secured
    token = security.token("reader", lifetime_s=60)
    header, claims, signature = token.split(".")

    def decode(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(decode(header)) == {"alg": "RS256"}
    assert json.loads(decode(claims))["sub"] == "reader" and json.loads(decode(claims))["aud"] == security.audience
    public = load_der_public_key(security.token_public_key.read_bytes())
    public.verify(decode(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())  # type: ignore[union-attr, call-arg, arg-type]
    assert json.loads(decode(security.token_file("admin").read_text().split(".")[1]))["sub"] == "admin"


def test_security_is_made_once_per_data_dir(secured):
    layout, security = secured
    ca, key = security.ca.read_bytes(), security.token_private_key.read_bytes()
    again = ensure_security(layout)
    assert (again.ca.read_bytes(), again.token_private_key.read_bytes()) == (ca, key)  # issued tokens stay valid


def test_brokers_and_proxy_serve_tls_verify_tokens_and_reach_each_other_over_tls(secured):
    layout, security = secured
    broker, proxy = layout.member("broker-1"), layout.member("proxy")
    conf = broker_conf(layout, broker, ClusterSettings(secured=True, broker_extra=(("maxMessageSize", "131072"),)))
    assert (conf["brokerServicePortTls"], conf["webServicePortTls"]) == (broker.ports["brokerTls"], broker.ports["webTls"])
    assert conf["tlsCertificateFilePath"] == security.cert("broker-1") and conf["tlsKeyFilePath"] == security.key("broker-1")
    assert conf["authenticationEnabled"] == "true" and conf["tokenPublicKey"] == f"file://{security.token_public_key}"
    assert (conf["tokenPublicAlg"], conf["tokenAudience"]) == ("RS256", security.audience)
    assert conf["brokerClientTlsEnabled"] == "true" and conf["tlsHostnameVerificationEnabled"] == "true"
    assert conf["brokerClientAuthenticationParameters"] == f"file://{security.token_file('admin')}"
    assert conf["proxyRoles"] == "proxy" and conf["maxMessageSize"] == "131072"
    pconf = proxy_conf(layout, proxy, ClusterSettings(secured=True))
    assert (pconf["servicePortTls"], pconf["webServicePortTls"]) == (proxy.ports["serviceTls"], proxy.ports["webTls"])
    assert pconf["tlsEnabledWithBroker"] == "true" and pconf["authenticationEnabled"] == "true"
    assert pconf["brokerClientAuthenticationParameters"] == f"file://{security.token_file('proxy')}"
    allowed = set(str(pconf["brokerProxyAllowedTargetPorts"]).split(","))
    assert {str(b.ports[p]) for b in layout.of_role("broker") for p in ("broker", "brokerTls")} == allowed
    args = metadata_setup_args(layout, ClusterSettings(secured=True))
    b1, b2 = layout.of_role("broker")
    given = dict(zip(args[::2], args[1::2], strict=True))
    assert given["--web-service-url-tls"] == f"https://{b1.address('webTls')},{b2.address('webTls')}"
    assert given["--broker-service-url-tls"] == f"pulsar+ssl://{b1.address('brokerTls')},{b2.address('brokerTls')}"
    plain = plan_layout(layout.data_dir / "plain")
    assert "authenticationEnabled" not in broker_conf(plain, plain.member("broker-1"), ClusterSettings())
    assert "--web-service-url-tls" not in metadata_setup_args(plain, ClusterSettings())


def test_readiness_asks_over_https_with_the_superusers_token(secured):
    layout, security = secured
    url, context, headers = readiness_request(layout, layout.member("broker-2")) or ("", None, {})
    assert url == f"https://{layout.member('broker-2').address('webTls')}"
    assert context is not None and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert headers == {"Authorization": f"Bearer {security.token_file('admin').read_text()}"}
    assert readiness_request(plan_layout(layout.data_dir / "plain"), layout.member("broker-2")) is None


def test_the_json_line_of_a_secured_cluster_has_its_tls_urls_and_files(secured):
    layout, security = secured
    info = json.loads(ClusterInfo.of(layout, {}).to_json())["security"]
    b1 = layout.member("broker-1")
    assert info["brokers"][0] == {"name": "broker-1", "serviceUrl": f"pulsar+ssl://{b1.address('brokerTls')}",
                                  "adminUrl": f"https://{b1.address('webTls')}"}
    assert info["proxy"]["adminUrl"] == f"https://{layout.member('proxy').address('webTls')}"
    assert info["caFile"] == str(security.ca) and info["adminTokenFile"] == str(security.token_file("admin"))
    assert ClusterInfo.of(plan_layout(layout.data_dir / "plain"), {}).security is None


def test_a_data_dir_keeps_the_mode_it_was_made_with(tmp_path):
    load_or_plan(tmp_path, secured=True)
    with pytest.raises(BrokerError, match="made with TLS and authentication; start it the same way"):
        start_cluster(tmp_path, ClusterSettings())


def test_cli_takes_secure():
    args = build_parser().parse_args(["cluster", "start", "--secure"])
    assert args.secure is True
    assert build_parser().parse_args(["cluster", "start"]).secure is False
