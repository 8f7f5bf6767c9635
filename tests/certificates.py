"""Certificates for TLS tests (issue 43), made with trustme and written as PEM files into one directory.

    certs = make_certificates(tmp_path / "certs", roles=("admin", "reader"))
    certs.ca                      # the CA every broker and client here trusts
    certs.broker                  # KeyPair(cert, key) for SAN DNS:localhost + IP:127.0.0.1
    certs.client("reader")        # KeyPair of a client whose certificate's CN is the role "reader"

What each one is for:
- `broker`: a broker's certificate. Both names are in it because a client checks the name of every host it
  connects to, and a Pulsar client connects to the service URL's host for the lookup and then to the broker
  address the lookup answers (the broker's advertisedAddress, 127.0.0.1 for the launcher's brokers).
- `broker_wrong_name`: signed by the same CA, but only for `DNS:broker.invalid`: a client that checks
  hostnames must refuse it for localhost and 127.0.0.1, one that does not must accept it.
- `other_ca`, `foreign_client`: an unrelated CA, and an "admin" client certificate it signed (a client
  trusting `other_ca` must refuse the broker; a broker must not take `foreign_client` for admin).
- `clients[role]`: certificates whose subject CN is the role, as Pulsar's AuthenticationProviderTls reads it.

Keys are RSA 2048 in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`): the broker (Java, Pulsar's SecurityUtility)
reads no other format; OpenSSL (the C++ client, Python's ssl, requests) reads it as well. `traditional_key`
writes a key in the OpenSSL traditional format (`-----BEGIN RSA PRIVATE KEY-----`) for tests that show which
side accepts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import trustme
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from pulsar_throttled_source.local_broker.tls import pkcs8

DEFAULT_ROLES = ("admin", "reader", "consumer-only")
WRONG_NAME = "broker.invalid"
KEY_TYPE = trustme.KeyType.RSA


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM files."""

    cert: Path
    key: Path

    def auth_params(self) -> str:
        """The same as Pulsar's AuthenticationTls parameters (Java broker config, `pulsar.client.authParams`)."""
        return f"tlsCertFile:{self.cert},tlsKeyFile:{self.key}"


@dataclass(frozen=True)
class Certificates:
    dir: Path
    ca: Path
    other_ca: Path
    broker: KeyPair
    broker_wrong_name: KeyPair
    foreign_client: KeyPair
    clients: dict[str, KeyPair] = field(default_factory=dict)

    def client(self, role: str) -> KeyPair:
        try:
            return self.clients[role]
        except KeyError:
            raise KeyError(f"no client certificate for role {role!r}; made: {sorted(self.clients)}") from None


def traditional_key(pair: KeyPair, path: Path) -> Path:
    """Write `pair`'s key in the OpenSSL traditional format (PKCS#1 for RSA) to `path`."""
    key = load_pem_private_key(pair.key.read_bytes(), password=None)
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption()))
    path.chmod(0o600)
    return path


def _write(directory: Path, name: str, leaf: trustme.LeafCert) -> KeyPair:
    cert, key = directory / f"{name}.cert.pem", directory / f"{name}.key.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(pkcs8(leaf.private_key_pem.bytes()))
    key.chmod(0o600)
    return KeyPair(cert, key)


def _client(ca: trustme.CA, role: str) -> trustme.LeafCert:
    # trustme needs a SAN entry (and Java refuses an empty SAN extension): a name under .invalid, never a host.
    return ca.issue_cert(f"{role}.client.invalid", common_name=role, organization_name="pulsar-throttled-tests",
                         key_type=KEY_TYPE)


def make_certificates(directory: str | Path, roles: tuple[str, ...] | list[str] = DEFAULT_ROLES) -> Certificates:
    """A CA, the broker certificates, an unrelated CA and one client certificate per role, as PEM files in
    `directory` (created): ca.pem, other-ca.pem, broker.{cert,key}.pem, broker-wrong-name.*, client-ROLE.*,
    foreign-admin.*. About a second for the RSA keys."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="pulsar-throttled-tests CA", key_type=KEY_TYPE)
    other = trustme.CA(organization_name="unrelated CA", key_type=KEY_TYPE)
    ca.cert_pem.write_to_path(str(out / "ca.pem"))
    other.cert_pem.write_to_path(str(out / "other-ca.pem"))
    broker = ca.issue_cert("localhost", "127.0.0.1", common_name="localhost", key_type=KEY_TYPE)
    wrong = ca.issue_cert(WRONG_NAME, common_name=WRONG_NAME, key_type=KEY_TYPE)
    return Certificates(
        dir=out,
        ca=out / "ca.pem",
        other_ca=out / "other-ca.pem",
        broker=_write(out, "broker", broker),
        broker_wrong_name=_write(out, "broker-wrong-name", wrong),
        foreign_client=_write(out, "foreign-admin", _client(other, "admin")),
        clients={role: _write(out, f"client-{role}", _client(ca, role)) for role in roles},
    )
