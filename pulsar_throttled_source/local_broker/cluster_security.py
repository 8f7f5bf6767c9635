"""The secured mode of the local cluster (`cluster start --secure`, `ClusterSettings(secured=True)`): TLS on every
broker's service and web ports and on the proxy's, and clients authenticated by JWTs (RS256) on brokers and proxy,
as an operator sets it up for OAuth2: the members verify tokens with one public key, so static tokens signed with
its private half (`ClusterSecurity.token`) and the access tokens of an OAuth2 server given that private key are
both accepted. The plain ports stay open, with authentication too.

Internal clients as an operator configures them: each broker's own client (topic lookups, redirects, the load
manager) connects to the other brokers over TLS as the superuser "admin" (brokerClientAuthenticationPlugin), the
proxy connects to brokers over TLS as the role "proxy", which the brokers list in proxyRoles (so the proxy may act
for its clients). Hostnames are verified on every internal TLS connection. Bookies stay plain and unauthenticated
(BookKeeper's own authentication is SASL/Kerberos, outside what a local test cluster can stand up).

Files, made once per data dir in <data>/security/ and kept on every restart:
    ca.pem                          the CA of every member's certificate (clients trust it)
    <member>.cert.pem, .key.pem     a broker's or the proxy's certificate, whose only name is its own 127.0.0.N
                                    address (IP SAN), so a redirect to another broker checks that broker's name
    token.key.pem, token.pub.der    the token signing key (PKCS#8 PEM), its public half (the members' tokenPublicKey)
    admin.token, proxy.token        the internal clients' tokens (owner-only files)
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .broker_error import BrokerError
from .cluster_layout import BROKER, PROXY, ClusterLayout, Member
from .tls import pkcs8
from .tokens import ADMIN_ROLE, make_rs256_token

SECURITY_DIR = "security"
PROXY_ROLE = "proxy"  # the proxy's own token: listed in the brokers' proxyRoles
AUDIENCE = "pulsar-local-cluster"  # every token's `aud`: an OAuth2 server must issue tokens for it
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TOKEN_CLIENT = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


@dataclass(frozen=True)
class ClusterSecurity:
    """Where a secured cluster's CA, certificates, token keys and internal tokens are (see the module doc)."""

    directory: Path
    audience: str = AUDIENCE

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def cert(self, member: str) -> Path:
        return self.directory / f"{member}.cert.pem"

    def key(self, member: str) -> Path:
        return self.directory / f"{member}.key.pem"

    @property
    def token_private_key(self) -> Path:
        return self.directory / "token.key.pem"

    @property
    def token_public_key(self) -> Path:
        return self.directory / "token.pub.der"

    def token_file(self, role: str) -> Path:
        return self.directory / f"{role}.token"

    def token(self, role: str, lifetime_s: int | None = None) -> str:
        """A token of `role` (its `sub`) for this cluster's audience; it expires after `lifetime_s` when given."""
        claims: dict[str, Any] = {"sub": role, "aud": self.audience}
        if lifetime_s is not None:
            claims["exp"] = int(time.time()) + lifetime_s
        return make_rs256_token(self.token_private_key.read_bytes(), claims)

    def ssl_context(self) -> ssl.SSLContext:
        """A client's TLS: the chain must lead to the cluster's CA and the certificate must name the host."""
        return ssl.create_default_context(cafile=str(self.ca))

    def token_provider_conf(self) -> dict[str, object]:
        """What brokers and proxy both say to verify clients' tokens."""
        return {
            "authenticationEnabled": "true",
            "authenticationProviders": TOKEN_PROVIDER,
            "tokenPublicKey": f"file://{self.token_public_key}",
            "tokenPublicAlg": "RS256",
            "tokenAudienceClaim": "aud",
            "tokenAudience": self.audience,
            "superUserRoles": f"{ADMIN_ROLE},{PROXY_ROLE}",
            "authorizationEnabled": "false",
        }


def security_of(layout: ClusterLayout) -> ClusterSecurity:
    return ClusterSecurity(layout.data_dir / SECURITY_DIR)


def ensure_security(layout: ClusterLayout) -> ClusterSecurity:
    """Make the data dir's CA, member certificates, token key and internal tokens unless they exist (a restart
    keeps them: tokens and certificates a client holds stay valid)."""
    security = security_of(layout)
    if security.token_file(PROXY_ROLE).exists():
        return security
    try:
        import trustme
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as e:
        raise BrokerError(f"A secured cluster makes its certificates with trustme ({e}); install the test extra: "
                          f"pip install -e '.[test]'") from None
    security.directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="pulsar local cluster CA", key_type=trustme.KeyType.RSA)
    ca.cert_pem.write_to_path(str(security.ca))
    for member in [*layout.of_role(BROKER), *layout.of_role(PROXY)]:
        # Java refuses an empty SAN and the member's address is its only name: a client reaching it by another
        # name, or a certificate of another member at its address, fails the hostname check.
        leaf = ca.issue_cert(member.host, common_name=member.host, key_type=trustme.KeyType.RSA)
        security.cert(member.name).write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        _write_private(security.key(member.name), pkcs8(leaf.private_key_pem.bytes()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_private(security.token_private_key, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    # Pulsar 4.0 reads a tokenPublicKey file as DER (X.509 SubjectPublicKeyInfo); PEM fails to decode.
    security.token_public_key.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
    for role in (ADMIN_ROLE, PROXY_ROLE):  # the proxy's last: its presence says the set is complete
        _write_private(security.token_file(role), security.token(role).encode())
    return security


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.write_bytes(data)


def _member_tls(security: ClusterSecurity, member: Member) -> dict[str, object]:
    return {
        "tlsCertificateFilePath": security.cert(member.name),
        "tlsKeyFilePath": security.key(member.name),
        "tlsTrustCertsFilePath": security.ca,
        "tlsRequireTrustedClientCertOnConnect": "false",  # clients bring tokens, not certificates
        "brokerClientTrustCertsFilePath": security.ca,
        "tlsHostnameVerificationEnabled": "true",  # internal clients check the name of the broker they reach
    }


def broker_security_conf(layout: ClusterLayout, broker: Member) -> dict[str, object]:
    """broker.conf keys of TLS on both ports, token authentication, and the broker's own client over TLS."""
    security = security_of(layout)
    return {
        **security.token_provider_conf(),
        **_member_tls(security, broker),
        "brokerServicePortTls": broker.ports["brokerTls"],
        "webServicePortTls": broker.ports["webTls"],
        "proxyRoles": PROXY_ROLE,
        "brokerClientTlsEnabled": "true",
        "brokerClientAuthenticationPlugin": TOKEN_CLIENT,
        "brokerClientAuthenticationParameters": f"file://{security.token_file(ADMIN_ROLE)}",
    }


def proxy_security_conf(layout: ClusterLayout, proxy: Member) -> dict[str, object]:
    """proxy.conf keys of TLS on both ports, token authentication, and the proxy's connections to brokers over
    TLS (the brokers' TLS ports, as the brokers advertise them) as the role "proxy"."""
    security = security_of(layout)
    return {
        **security.token_provider_conf(),
        **_member_tls(security, proxy),
        "servicePortTls": proxy.ports["serviceTls"],
        "webServicePortTls": proxy.ports["webTls"],
        "tlsEnabledWithBroker": "true",
        "brokerClientAuthenticationPlugin": TOKEN_CLIENT,
        "brokerClientAuthenticationParameters": f"file://{security.token_file(PROXY_ROLE)}",
        # Clients' own credentials travel on to the brokers (which accept them from a proxyRoles role).
        "forwardAuthorizationCredentials": "true",
    }


def tls_target_ports(layout: ClusterLayout) -> list[str]:
    return [str(b.ports["brokerTls"]) for b in layout.of_role(BROKER)] if layout.secured else []


def metadata_setup_tls_args(layout: ClusterLayout) -> list[str]:
    """The cluster's TLS URLs in its metadata (what a lookup over TLS and the proxy are told)."""
    if not layout.secured:
        return []
    brokers = layout.of_role(BROKER)
    return ["--web-service-url-tls", "https://" + ",".join(b.address("webTls") for b in brokers),
            "--broker-service-url-tls", "pulsar+ssl://" + ",".join(b.address("brokerTls") for b in brokers)]


def readiness_request(layout: ClusterLayout, member: Member) -> tuple[str, ssl.SSLContext, dict[str, str]] | None:
    """How the launcher asks a secured broker or proxy whether it serves: its https base URL, a TLS context that
    verifies its certificate and name, and the superuser's token. None for a plain cluster."""
    if not layout.secured:
        return None
    security = security_of(layout)
    token = security.token_file(ADMIN_ROLE).read_text()
    return f"https://{member.address('webTls')}", security.ssl_context(), {"Authorization": f"Bearer {token}"}


def secured_info(layout: ClusterLayout) -> dict[str, Any] | None:
    """The TLS URLs and security files of a secured cluster (ClusterInfo.security); None for a plain one."""
    if not layout.secured:
        return None
    security = security_of(layout)
    brokers, proxy = layout.of_role(BROKER), layout.of_role(PROXY)[0]
    return {
        "serviceUrl": "pulsar+ssl://" + ",".join(b.address("brokerTls") for b in brokers),
        "brokers": [{"name": b.name, "serviceUrl": f"pulsar+ssl://{b.address('brokerTls')}",
                     "adminUrl": f"https://{b.address('webTls')}"} for b in brokers],
        "proxy": {"name": proxy.name, "serviceUrl": f"pulsar+ssl://{proxy.address('serviceTls')}",
                  "adminUrl": f"https://{proxy.address('webTls')}"},
        "caFile": str(security.ca),
        "adminTokenFile": str(security.token_file(ADMIN_ROLE)),
        "tokenPrivateKeyFile": str(security.token_private_key),
        "tokenPublicKeyFile": str(security.token_public_key),
        "audience": security.audience,
    }
