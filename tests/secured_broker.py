"""A secured standalone broker for tests (issue 43): TLS on both ports, client-certificate (mTLS) and token
authentication, authorization, and "admin" as the superuser role.

    from secured_broker import secured_broker

    with secured_broker(tmp_path) as sb:          # certificates made in tmp_path/certs, data in tmp_path/broker
        sb.service_url_tls                        # pulsar+ssl://localhost:P
        sb.admin_url_tls                          # https://localhost:W
        sb.certs.ca, sb.certs.client("reader")    # PEM files (tests/certificates.py)
        sb.token("reader")                        # an HS256 token of role "reader" (when the broker has a secret key)
        client = sb.client("reader")              # a pulsar.Client over TLS authenticated by the reader's certificate
        sb.admin_request("PUT", "/admin/v2/tenants/t", role="admin", json={...})  # requests, mTLS

As a pytest fixture: `@pytest.fixture(scope="module") def sb(tmp_path_factory): with secured_broker(
tmp_path_factory.mktemp("secured")) as b: yield b`.

Token authentication takes the caller's key: `token_secret_key` (bytes, HS256; one is generated when no key is
given) or `token_public_key` (a Pulsar key setting value, "file:///path" or "data:;base64,...", e.g. the public
key of a real OAuth2 server; add `tokenPublicAlg` etc. through `broker_config` when it is not RS256).

The plain ports stay open (the launcher's plain URLs), with authentication and authorization too; a certificate
can only be presented on the TLS ports, so there a token is the only way in.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from certificates import DEFAULT_ROLES, Certificates, make_certificates

from pulsar_throttled_source.local_broker import LocalBroker, TlsFiles, make_token

SUPERUSER = "admin"
AUTH_PROVIDERS = ",".join([
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
])


def secured_config(token_key_setting: dict[str, str]) -> dict[str, str]:
    """The broker settings of authentication and authorization (TLS itself comes from TlsFiles)."""
    return {
        "authenticationEnabled": "true",
        "authenticationProviders": AUTH_PROVIDERS,
        "authorizationEnabled": "true",
        "superUserRoles": SUPERUSER,
        **token_key_setting,
    }


@dataclass
class SecuredBroker:
    broker: LocalBroker
    certs: Certificates
    token_secret_key: bytes | None  # None when the broker verifies tokens with a caller's public key

    @property
    def service_url_tls(self) -> str:
        return self.broker.service_url_tls

    @property
    def admin_url_tls(self) -> str:
        return self.broker.admin_url_tls

    @property
    def service_url(self) -> str:  # plain, token authentication only
        return self.broker.service_url

    @property
    def admin_url(self) -> str:
        return self.broker.admin_url

    def token(self, role: str) -> str:
        assert self.token_secret_key is not None, "this broker verifies tokens with a public key: issue them there"
        return make_token(self.token_secret_key, role)

    def client(self, role: str | None = SUPERUSER, token: str | None = None, **kwargs: Any) -> Any:
        """A pulsar.Client on the TLS service URL, trusting the CA and checking the broker's name; it presents
        the certificate of `role` (or `token` when given; neither with role=None)."""
        import pulsar

        if token is not None:
            auth = pulsar.AuthenticationToken(token)
        elif role is not None:
            pair = self.certs.client(role)
            auth = pulsar.AuthenticationTLS(str(pair.cert), str(pair.key))
        else:
            auth = None
        url = kwargs.pop("service_url", self.service_url_tls)
        logger = logging.getLogger("pulsar-secured-test-client")
        logger.setLevel(logging.WARNING)
        settings: dict[str, Any] = {"tls_trust_certs_file_path": str(self.certs.ca), "tls_validate_hostname": True,
                                    "operation_timeout_seconds": 10, "logger": logger, **kwargs}
        return pulsar.Client(url, authentication=auth, **settings)

    def admin_request(self, method: str, path: str, role: str | None = SUPERUSER, token: str | None = None,
                      timeout: float = 20, **kwargs: Any) -> requests.Response:
        """One admin API request over https with the certificate of `role` (or `token`). `verify` is passed per
        request: a Session's own `verify` loses to $REQUESTS_CA_BUNDLE (psf/requests#3829)."""
        headers = dict(kwargs.pop("headers", None) or {})
        cert = None
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        elif role is not None:
            pair = self.certs.client(role)
            cert = (str(pair.cert), str(pair.key))
        return requests.request(method, f"{self.admin_url_tls}{path}", headers=headers, cert=cert,
                                verify=str(self.certs.ca), timeout=timeout, **kwargs)


@contextmanager
def secured_broker(directory: str | Path, *, roles: tuple[str, ...] | list[str] = DEFAULT_ROLES,
                   token_secret_key: bytes | None = None, token_public_key: str | None = None,
                   broker_config: dict[str, str] | None = None, max_entries_per_ledger: int | None = None,
                   jvm_options: list[str] | None = None) -> Iterator[SecuredBroker]:
    """Start a secured broker (certificates in DIRECTORY/certs, data in DIRECTORY/broker); stop it on exit."""
    root = Path(directory)
    certs = make_certificates(root / "certs", roles=sorted({SUPERUSER, *roles}))
    if token_public_key is not None and token_secret_key is not None:
        raise ValueError("give token_secret_key or token_public_key, not both")
    if token_public_key is not None:
        key_setting = {"tokenPublicKey": token_public_key}
    else:
        token_secret_key = token_secret_key or os.urandom(32)
        key_setting = {"tokenSecretKey": "data:;base64," + base64.b64encode(token_secret_key).decode()}
    admin = certs.client(SUPERUSER)
    tls = TlsFiles(cert=certs.broker.cert, key=certs.broker.key, ca=certs.ca, client_cert=admin.cert, client_key=admin.key)
    broker = LocalBroker(data_dir=root / "broker", max_entries_per_ledger=max_entries_per_ledger, tls=tls,
                         broker_config={**secured_config(key_setting), **(broker_config or {})}, jvm_options=jvm_options)
    with broker:
        yield SecuredBroker(broker, certs, token_secret_key)
