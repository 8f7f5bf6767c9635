"""A real OAuth2/OIDC authorization server for the OAuth2 tests: navikt's mock-oauth2-server (Maven Central), run
from its standalone main class on a free loopback port, like the local broker is run from its jars.

It serves discovery (`<issuer>/.well-known/openid-configuration`), JWKS and the client_credentials grant, and signs
RS256 access tokens with a key made here for each instance (the server's built-in key is the same in every copy
of it, so a broker trusting that one would trust any mock-oauth2-server anywhere). Each token's `sub` is the role
chosen for its client id (the client id itself unless `roles` says otherwise) and its `aud` is `audience`.

    with IdentityProvider(tmp_dir, token_lifetime_s=20, roles={"reader-client": "reader"}) as idp:
        key_url = idp.write_public_key(tmp_dir / "idp.pub.der")  # the broker's tokenPublicKey
        creds = idp.write_credentials("reader-client", tmp_dir / "reader.json")  # a Pulsar credentials file
        pulsar.AuthenticationOauth2(idp.oauth2_params("reader-client", creds))

What it does not do: check client secrets. Any secret (or none) gets a token for any client id; the secrets
written here are only carried along, as a real deployment's would be. Tokens and secrets are never printed: the
server's own log (which may show requests) goes to `<work_dir>/identity-provider.log`.

`python tests/identity_provider.py fetch` downloads the jars once per machine (`make test` does, before the tests).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pulsar_throttled_source.local_broker.broker_error import BrokerError
from pulsar_throttled_source.local_broker.distribution import CACHE_ENV, check_java, maven_jars

MOCK_OAUTH2_SERVER_VERSION = "6.0.2"  # keep in step with mock-oauth2-server/pom.xml
POM = Path(__file__).parent / "mock-oauth2-server" / "pom.xml"
MAIN_CLASS = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"
DEFAULT_START_TIMEOUT_S = 60.0
# A small, quickly started JVM: the server issues a few tokens per test module.
# A second issuer on the same server: the same claims, but signed with a key the server makes for it (never the
# broker's tokenPublicKey). Its tokens are "from a server with another key".
UNTRUSTED_ISSUER_ID = "untrusted"
JVM_OPTIONS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


class IdentityProviderError(RuntimeError):
    pass


class Secret(str):
    """An access token or a client secret. Its repr, which is what pytest shows of a failing test's arguments and
    compared values, hides it."""

    def __repr__(self) -> str:
        return "<secret>"


def cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV)
    base = Path(override) if override else Path.home() / ".cache" / "pulsar-throttled-source"
    return base / f"mock-oauth2-server-{MOCK_OAUTH2_SERVER_VERSION}"


def resolve_jars(quiet: bool = True) -> Path:
    """Download the pinned server and its dependencies once per machine (Maven, as the broker's jars); return the lib dir."""
    return maven_jars(cache_dir(), POM, f"mock-oauth2-server {MOCK_OAUTH2_SERVER_VERSION} jars", quiet)


def _b64url_uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _b64url_decode_uint(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


def _private_jwk(key: rsa.RSAPrivateKey) -> dict[str, str]:
    priv = key.private_numbers()
    pub = priv.public_numbers
    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "pulsar-tests", "n": _b64url_uint(pub.n), "e": _b64url_uint(pub.e),
            "d": _b64url_uint(priv.d), "p": _b64url_uint(priv.p), "q": _b64url_uint(priv.q), "dp": _b64url_uint(priv.dmp1),
            "dq": _b64url_uint(priv.dmq1), "qi": _b64url_uint(priv.iqmp)}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jwt_claims(token: str) -> dict[str, Any]:
    """The (unverified) claims of a JWT: for assertions on sub, aud and exp."""
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


class IdentityProvider:
    """Context manager: a real OAuth2 authorization server on 127.0.0.1 for the duration of a `with` block."""

    def __init__(self, work_dir: str | Path, *, token_lifetime_s: int = 3600, audience: str = "pulsar",
                 roles: Mapping[str, str] | None = None, issuer_id: str = "pulsar",
                 timeout_s: float = DEFAULT_START_TIMEOUT_S, signing_key: rsa.RSAPrivateKey | None = None) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.token_lifetime_s = token_lifetime_s
        self.audience = audience
        self.roles = dict(roles or {})
        self.issuer_id = issuer_id
        self._timeout_s = timeout_s
        # The key its tokens are signed with: made here, or the caller's (e.g. the key a secured local cluster's
        # members verify tokens with, so its access tokens are accepted there).
        self._key = signing_key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._secrets: dict[str, Secret] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.startup_s: float | None = None  # JVM start to discovery answering
        self.log_path = self.work_dir / "identity-provider.log"

    def __repr__(self) -> str:
        return f"IdentityProvider(issuer_url={self.issuer_url if self.port else None!r}, roles={self.roles!r})"

    # -- URLs ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self.port is not None, "identity provider not started"
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer_url(self) -> str:
        return f"{self.base_url}/{self.issuer_id}"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer_url}/.well-known/openid-configuration"

    def discovery(self) -> dict[str, Any]:
        resp = requests.get(self.discovery_url, timeout=5)
        resp.raise_for_status()
        doc: dict[str, Any] = resp.json()
        return doc

    # -- lifecycle ----------------------------------------------------------------------

    def role_of(self, client_id: str) -> str:
        return self.roles.get(client_id, client_id)

    def _server_config(self) -> dict[str, Any]:
        claims = {"aud": self.audience}
        mappings = [{"requestParam": "client_id", "match": client_id, "claims": {"sub": role, **claims}}
                    for client_id, role in self.roles.items()]
        mappings.append({"requestParam": "client_id", "match": "*", "claims": {"sub": "${clientId}", **claims}})
        return {
            "interactiveLogin": False,
            "httpServer": "NettyWrapper",
            # One initial key: the first issuer asked for a key (ours, asked at start) signs with it; any other
            # issuer path gets a key the server generates.
            "tokenProvider": {"keyProvider": {"initialKeys": json.dumps(_private_jwk(self._key)), "algorithm": "RS256"}},
            "tokenCallbacks": [{"issuerId": issuer, "tokenExpiry": self.token_lifetime_s, "requestMappings": mappings}
                               for issuer in (self.issuer_id, UNTRUSTED_ISSUER_ID)],
        }

    def start(self) -> IdentityProvider:
        java = check_java()
        lib = resolve_jars(quiet=False)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "identity-provider.json"  # holds the signing key: owner-only
        config.touch(mode=0o600)
        config.write_text(json.dumps(self._server_config()))
        self.port = _free_port()
        env = {**os.environ, "SERVER_HOSTNAME": "127.0.0.1", "SERVER_PORT": str(self.port), "JSON_CONFIG_PATH": str(config),
               "LOG_LEVEL": "INFO"}
        env.pop("JSON_CONFIG", None)
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen([java, *JVM_OPTIONS, "-cp", f"{lib}/*", MAIN_CLASS], cwd=self.work_dir, env=env,
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready(started)
            self._check_signing_key()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        assert self._proc is not None
        while True:
            if self._proc.poll() is not None:
                raise IdentityProviderError(f"mock-oauth2-server exited with code {self._proc.returncode} during start-up; "
                                            f"see {self.log_path}")
            try:
                if self.discovery().get("issuer") == self.issuer_url:
                    return
            except (requests.RequestException, ValueError):
                pass
            if time.monotonic() - started > self._timeout_s:
                raise IdentityProviderError(f"mock-oauth2-server did not answer {self.discovery_url} within "
                                            f"{self._timeout_s:.0f} s; see {self.log_path}")
            time.sleep(0.1)

    def _check_signing_key(self) -> None:
        """The issuer's JWKS (asked first, so it took the initial key) holds exactly the key made here."""
        keys = self.jwks()["keys"]
        ours = self._key.public_key().public_numbers()
        if len(keys) != 1 or _b64url_decode_uint(keys[0]["n"]) != ours.n:
            raise IdentityProviderError(f"{self.issuer_url} does not sign with the key given to it (JWKS: {len(keys)} keys)")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

    def __enter__(self) -> IdentityProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- keys and tokens ------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        resp = requests.get(self.discovery()["jwks_uri"], timeout=5)
        resp.raise_for_status()
        doc: dict[str, Any] = resp.json()
        return doc

    def write_public_key(self, path: str | Path) -> str:
        """Fetch the issuer's JWKS and write its RSA key where a broker's `tokenPublicKey` reads it; return the setting's
        value, `file:///...`. Pulsar 4.0 reads that file's bytes as an X.509 SubjectPublicKeyInfo in DER: a PEM file,
        or a file of the DER's base64 text, fails ("Failed to decode public key"). (The setting also takes the DER's
        base64 itself, inline or as `data:;base64,...`.)"""
        keys = [k for k in self.jwks()["keys"] if k.get("kty") == "RSA"]
        if len(keys) != 1:
            raise IdentityProviderError(f"expected one RSA key in the JWKS of {self.issuer_url}, found {len(keys)}")
        public = rsa.RSAPublicNumbers(_b64url_decode_uint(keys[0]["e"]), _b64url_decode_uint(keys[0]["n"])).public_key()
        path = Path(path).resolve()
        path.write_bytes(public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
        return f"file://{path}"

    def write_signing_key(self, path: str | Path) -> str:
        """As write_public_key, but the public half of the key this instance gives the server, known before start()
        (which checks that the issuer signs with exactly that key): a broker trusting it can start beside the server."""
        path = Path(path).resolve()
        path.write_bytes(self._key.public_key().public_bytes(serialization.Encoding.DER,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))
        return f"file://{path}"

    def client_secret(self, client_id: str) -> Secret:
        """The client's secret (made on first use). The server accepts any secret; this one is only carried."""
        return self._secrets.setdefault(client_id, Secret(secrets.token_urlsafe(24)))

    def write_credentials(self, client_id: str, path: str | Path) -> Path:
        """Write a Pulsar OAuth2 credentials file (owner-only) for `client_id`; its tokens carry sub=role_of(client_id)."""
        path = Path(path).resolve()
        path.touch(mode=0o600)
        path.write_text(json.dumps({"type": "client_credentials", "client_id": client_id,
                                    "client_secret": self.client_secret(client_id), "issuer_url": self.issuer_url}))
        return path

    def oauth2_params(self, client_id: str, credentials: str | Path | None = None) -> str:
        """The JSON parameters of the Python client's `pulsar.AuthenticationOauth2`: `private_key` is the credentials
        file (`file://` URL) when given, else the credentials inline as `data:application/json;base64,...`."""
        if credentials is not None:
            private_key = f"file://{Path(credentials).resolve()}"
        else:
            body = json.dumps({"client_id": client_id, "client_secret": self.client_secret(client_id)})
            private_key = "data:application/json;base64," + base64.b64encode(body.encode()).decode()
        return json.dumps({"issuer_url": self.issuer_url, "private_key": private_key, "audience": self.audience})

    def access_token(self, client_id: str, issuer_id: str | None = None) -> Secret:
        """A fresh access token for `client_id` (client_credentials grant, secret in the form as Pulsar's clients send
        it). `issuer_id` asks another issuer on the same server (UNTRUSTED_ISSUER_ID: same claims, its own key)."""
        issuer = f"{self.base_url}/{issuer_id}" if issuer_id else self.issuer_url
        endpoint = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=5).json()["token_endpoint"]
        resp = requests.post(endpoint, timeout=10, data={"grant_type": "client_credentials", "client_id": client_id,
                                                         "client_secret": self.client_secret(client_id), "audience": self.audience})
        if resp.status_code != 200:  # an error response carries no token
            raise IdentityProviderError(f"{endpoint} refused a client_credentials request: HTTP {resp.status_code} {resp.text[:300]}")
        return Secret(resp.json()["access_token"])

    # -- the broker side --------------------------------------------------------------------

    def broker_config(self, public_key_url: str, superuser_credentials: str | Path, superuser_role: str,
                      refresh_check_s: int | None = None) -> dict[str, str]:
        """standalone.conf settings for a broker that trusts this server's tokens (role = `sub`, `aud` required) and
        whose own internal client authenticates with the superuser's OAuth2 credentials."""
        conf = {
            "authenticationEnabled": "true",
            "authorizationEnabled": "false",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            "tokenPublicKey": public_key_url,
            "tokenPublicAlg": "RS256",
            "tokenAudienceClaim": "aud",
            "tokenAudience": self.audience,
            "superUserRoles": superuser_role,
            "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2",
            "brokerClientAuthenticationParameters": json.dumps({
                "type": "client_credentials", "issuerUrl": self.issuer_url, "audience": self.audience,
                "privateKey": f"file://{Path(superuser_credentials).resolve()}"}),
        }
        if refresh_check_s is not None:
            conf["authenticationRefreshCheckSeconds"] = str(refresh_check_s)
        return conf


def main(argv: list[str]) -> int:
    if argv != ["fetch"]:
        print("usage: identity_provider.py fetch   (download the pinned mock-oauth2-server jars once)", file=sys.stderr)
        return 2
    try:
        print(resolve_jars(quiet=False))
    except (IdentityProviderError, BrokerError) as e:  # BrokerError: Maven's download (local_broker.distribution)
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
