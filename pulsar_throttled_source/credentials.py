"""How the source proves who it is, to the broker's binary protocol and to its admin API: one value
per authentication method, built from the options (options.auth), carried to every read task.

Each method knows the plugin name and parameter string pulsar-client-cpp's own plugin factory takes
(`client_plugin`, `client_params`): the Python path passes them to `pulsar.Authentication`, the native
path to `pulsar_authentication_create`, so both read paths authenticate through the client's own
plugins (the OAuth2 flow, token files read again on every connection). The admin API's side is
metadata.admin_auth. No secret shows in a repr; `secrets()` lists what error texts must not echo.

Below every layer (options build them, metadata and reading use them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import ClassVar, Protocol


@dataclass(frozen=True)
class TokenAuth:
    """A JWT given as a value, or a file read again every time a connection authenticates (rotation)."""

    plugin: ClassVar[str] = "token"
    token: str | None = field(default=None, repr=False)
    file: str | None = None  # a path on every node that reads: the driver and the executors

    def client_params(self) -> str:
        return f"file://{self.file}" if self.file else f"token:{self.token}"

    def secrets(self) -> tuple[str, ...]:
        return (self.token,) if self.token else ()


@dataclass(frozen=True)
class TlsAuth:
    """A client certificate whose subject is the role (the broker's AuthenticationProviderTls)."""

    plugin: ClassVar[str] = "tls"
    cert_file: str
    key_file: str

    def client_params(self) -> str:
        return f"tlsCertFile:{self.cert_file},tlsKeyFile:{self.key_file}"

    def secrets(self) -> tuple[str, ...]:
        return ()  # paths; the key's content never leaves its file


@dataclass(frozen=True)
class OAuth2Auth:
    """OAuth2 client credentials: an access token fetched from `issuer_url` (and fetched again before
    it expires) with the client id and secret of the credentials file `private_key` (file:// or data: URL)."""

    plugin: ClassVar[str] = "oauth2token"  # pulsar-client-cpp's name for it (AuthOauth2.h)
    issuer_url: str
    private_key: str = field(repr=False)  # a data: URL holds the client secret itself
    audience: str | None = None
    scope: str | None = None

    def client_params(self) -> str:
        # pulsar-client-cpp's AuthOauth2 names (the Java client's issuerUrl, privateKey, ... are mapped in options.auth)
        params = {"type": "client_credentials", "issuer_url": self.issuer_url, "private_key": self.private_key}
        params |= {k: v for k, v in (("audience", self.audience), ("scope", self.scope)) if v}
        return json.dumps(params)

    def secrets(self) -> tuple[str, ...]:
        return (self.private_key,) if self.private_key.startswith("data:") else ()


@dataclass(frozen=True)
class BasicAuth:
    """A user name and password (the broker's AuthenticationProviderBasic)."""

    plugin: ClassVar[str] = "basic"
    user: str
    password: str = field(repr=False)

    def client_params(self) -> str:
        return json.dumps({"username": self.user, "password": self.password})

    def secrets(self) -> tuple[str, ...]:
        return (self.password,)


@dataclass(frozen=True)
class AthenzAuth:
    """Athenz role tokens (binary protocol only: the admin API needs credentials of another method)."""

    plugin: ClassVar[str] = "athenz"
    params: str = field(repr=False)  # the JSON both clients take (tenantDomain, tenantService, providerDomain, privateKey, ...)

    def client_params(self) -> str:
        return self.params

    def secrets(self) -> tuple[str, ...]:
        private_key = str(json.loads(self.params).get("privateKey", ""))
        return (private_key,) if private_key.startswith("data:") else ()  # else names and a key file's path


Credentials = TokenAuth | TlsAuth | OAuth2Auth | BasicAuth | AthenzAuth


class HasSecrets(Protocol):
    def secrets(self) -> tuple[str, ...]: ...


# scheme://user:password@ in a free text: the user-info runs to the last '@' before a space or the path.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/?#@]*):[^\s/?#]*@")


def scrub(text: str, *holders: HasSecrets | None) -> str:
    """`text` with every secret of `holders` (credentials, a quota store's endpoint) and the password of every URL
    in it replaced by ***: the one scrub of every error boundary (admin API errors, read tasks' errors)."""
    for holder in holders:
        for secret in holder.secrets() if holder is not None else ():
            if secret:
                text = text.replace(secret, "***")
    return _URL_PASSWORD.sub(r"\1:***@", text)


@dataclass(frozen=True)
class TlsSettings:
    """How the admin API checks the broker's certificate and which client certificate it shows:
    taken from the client's settings unless pulsar.admin.* gives its own (options.auth)."""

    trust_file: str | None = None  # the CA file; None: the system's trust store
    allow_insecure: bool = False  # no check at all
    validate_hostname: bool = True
    client_cert: tuple[str, str] | None = None  # (certificate, key) files, for mTLS

    @property
    def verify(self) -> bool | str:
        """requests' `verify`: False, the CA file, or True (the system's store)."""
        return False if self.allow_insecure else (self.trust_file or True)
