"""The admin API's side of each authentication method, as `requests` authenticators: a token (a
value, or a file read again when it changes), an OAuth2 access token fetched from the issuer and
fetched again before it expires (authlib's client-credentials flow), a user and password; a TLS
client certificate is the session's `cert` (admin_http). None of them shows a secret in a repr or
a message.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from requests.auth import AuthBase, HTTPBasicAuth

from ..credentials import BasicAuth, Credentials, OAuth2Auth, TokenAuth

DISCOVERY_TIMEOUT_S = 10.0


class AuthenticationFailed(RuntimeError):
    """The credentials could not be turned into something the admin API takes (an issuer refused them, a
    token file went missing); the message names the option, never a secret."""


def authenticator(credentials: Credentials | None, clock: Callable[[], float] = time.monotonic) -> AuthBase | None:
    """The requests authenticator of `credentials` (None: none, or a TLS client certificate)."""
    if isinstance(credentials, TokenAuth):
        return FileToken(credentials.file) if credentials.file else StaticToken(credentials.token or "")
    if isinstance(credentials, OAuth2Auth):
        return OAuth2ClientCredentials(credentials, clock)
    if isinstance(credentials, BasicAuth):
        return _QuietBasic(credentials.user, credentials.password)
    return None


class StaticToken(AuthBase):
    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "StaticToken(***)"


class FileToken(AuthBase):
    """A token file read again whenever it changes (a rotated token: Vault agents, Kubernetes projected
    tokens), as the clients' token plugins read it again at every authentication."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the file the token was read from
        self._token = ""
        self._lock = threading.Lock()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        return request

    def token(self) -> str:
        try:
            stat = os.stat(self.path)
            with self._lock:
                if self._seen != (stat.st_mtime_ns, stat.st_size):
                    self._token = Path(self.path).read_text().strip()
                    self._seen = (stat.st_mtime_ns, stat.st_size)
                return self._token
        except OSError as e:
            raise AuthenticationFailed(f"Cannot read the token file {self.path} ({e.strerror or type(e).__name__}) of option "
                                       "'pulsar.client.authParams' / 'pulsar.admin.authParams'.") from None

    def __repr__(self) -> str:
        return f"FileToken({self.path!r})"


class _QuietBasic(HTTPBasicAuth):
    def __repr__(self) -> str:
        return "HTTPBasicAuth(***)"


class OAuth2ClientCredentials(AuthBase):
    """An OAuth2 access token for the admin API, from the issuer the client's plugin uses (the token
    endpoint from its discovery document), fetched again once 80 % of its lifetime has passed (at
    most a minute before it expires), so a long-running query never sends an expired one."""

    def __init__(self, credentials: OAuth2Auth, clock: Callable[[], float] = time.monotonic) -> None:
        self._credentials = credentials
        self._clock = clock
        self._lock = threading.Lock()
        self._access_token = ""
        self._refresh_at = float("-inf")

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.access_token()}"
        return request

    def __repr__(self) -> str:
        return f"OAuth2ClientCredentials({self._credentials.issuer_url!r})"

    def access_token(self) -> str:
        with self._lock:
            if self._clock() >= self._refresh_at:
                self._fetch()
            return self._access_token

    def _fetch(self) -> None:
        from authlib.integrations.base_client.errors import OAuthError
        from authlib.integrations.requests_client import OAuth2Session

        from ..options.auth import client_credentials

        issuer = self._credentials.issuer_url
        where = f"the OAuth2 issuer {issuer} (option 'pulsar.client.authParams' / 'pulsar.admin.authParams')"
        ids = client_credentials(self._credentials.private_key)
        started = self._clock()
        try:
            endpoint = _token_endpoint(issuer)
            with OAuth2Session(ids["client_id"], ids["client_secret"], scope=self._credentials.scope,
                               token_endpoint_auth_method="client_secret_post") as session:
                extra = {"audience": self._credentials.audience} if self._credentials.audience else {}
                token: dict[str, Any] = session.fetch_token(endpoint, grant_type="client_credentials",
                                                            timeout=DISCOVERY_TIMEOUT_S, **extra)
        except OAuthError as e:
            raise AuthenticationFailed(f"{where} refused the client credentials: {e.error}.") from None
        except requests.RequestException as e:
            raise AuthenticationFailed(f"Cannot get an access token from {where}: {type(e).__name__}.") from None
        if not token.get("access_token"):
            raise AuthenticationFailed(f"{where} answered without an access token.")
        self._access_token = str(token["access_token"])
        lifetime = float(token.get("expires_in") or 3600)
        self._refresh_at = started + max(lifetime - 60.0, lifetime * 0.8)


def _token_endpoint(issuer: str) -> str:
    """The token endpoint of `issuer`'s OpenID discovery document, as Pulsar's clients find it."""
    answer = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=DISCOVERY_TIMEOUT_S)
    if answer.status_code != 200:
        raise AuthenticationFailed(f"The OAuth2 issuer {issuer} has no discovery document at /.well-known/openid-configuration "
                                   f"(HTTP {answer.status_code}); check issuerUrl in option 'pulsar.client.authParams'.")
    try:
        return str(answer.json()["token_endpoint"])
    except (ValueError, KeyError):
        raise AuthenticationFailed(f"The discovery document of the OAuth2 issuer {issuer} names no token_endpoint.") from None
