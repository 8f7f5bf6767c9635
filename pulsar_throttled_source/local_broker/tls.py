"""TLS for a local broker: the files a caller gives (`TlsFiles`), the standalone.conf settings they turn into, and
the SSL context of the launcher's own readiness check.

With TLS the broker serves `pulsar+ssl://localhost:P` and `https://localhost:W` beside its plain ports (which stay
open: the launcher's plain URLs keep working). The broker reads only PKCS#8 private keys (`-----BEGIN PRIVATE
KEY-----`, RSA or EC; Pulsar's SecurityUtility), so `key` and `client_key` must be in that format; the C++ client
and Python's ssl read PKCS#8 and the traditional formats alike.

Authentication and authorization are not switched on here: a caller passes them in `broker_config` (tests/
secured_broker.py does, with mTLS and tokens). `client_cert`/`client_key` are the identity of the broker's own
internal client (over TLS, AuthenticationTls) and of the launcher's readiness check, so a broker that requires
client certificates still starts; give a superuser's certificate there when authorization is on.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

AUTHENTICATION_TLS = "org.apache.pulsar.client.impl.auth.AuthenticationTls"


def pkcs8(private_key_pem: bytes) -> bytes:
    """A PEM private key (trustme writes the traditional format) as unencrypted PKCS#8 PEM, the one format the
    broker reads."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

    key = load_pem_private_key(private_key_pem, password=None)
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a TLS broker: its certificate and PKCS#8 key, the CA it trusts (for client certificates, and
    the CA clients are told to trust), and optionally a client certificate and key for its own internal client."""

    cert: Path
    key: Path
    ca: Path
    client_cert: Path | None = None
    client_key: Path | None = None

    def __post_init__(self) -> None:
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("TlsFiles: give client_cert and client_key together, or neither")
        for name in ("cert", "key", "ca", "client_cert", "client_key"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value).resolve())

    def broker_config(self, broker_tls_port: int, web_tls_port: int) -> dict[str, str]:
        """The standalone.conf settings of TLS on both ports (the caller's own broker_config still wins)."""
        conf = {
            "brokerServicePortTls": str(broker_tls_port),
            "webServicePortTls": str(web_tls_port),
            "tlsCertificateFilePath": str(self.cert),
            "tlsKeyFilePath": str(self.key),
            "tlsTrustCertsFilePath": str(self.ca),
            # Asked for, not required, on connect: a token client over TLS has no certificate.
            "tlsRequireTrustedClientCertOnConnect": "false",
            "brokerClientTrustCertsFilePath": str(self.ca),
        }
        if self.client_cert is not None:
            conf.update({
                "brokerClientTlsEnabled": "true",
                "brokerClientAuthenticationPlugin": AUTHENTICATION_TLS,
                "brokerClientAuthenticationParameters": f"tlsCertFile:{self.client_cert},tlsKeyFile:{self.client_key}",
            })
        return conf

    def readiness_context(self) -> ssl.SSLContext:
        """The launcher's readiness check: the broker's chain must verify against `ca`; the name is not checked
        (a test may start a broker whose certificate names another host on purpose); the client certificate is
        presented when there is one."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.check_hostname = False
        if self.client_cert is not None and self.client_key is not None:
            ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx
