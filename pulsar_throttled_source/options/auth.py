"""Authentication and TLS options: which plugin, its parameters, and how the admin API checks certificates.

`pulsar.client.authPluginClassName` takes the Java client's class names (what users copy from
pulsar-spark), pulsar-client-cpp's short names (token, tls, oauth2, basic, athenz) or the Python
classes' names; `pulsar.client.authParams` takes the Java client's parameter format of that plugin
(and the C++ client's names where they differ). The admin API uses the client's credentials and
trust settings unless `pulsar.admin.*` gives its own. Messages name the option, never a value.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..credentials import AthenzAuth, BasicAuth, Credentials, OAuth2Auth, TlsAuth, TlsSettings, TokenAuth
from . import values
from .passthrough import ADMIN, CLIENT, setting

log = logging.getLogger(__name__)

_JWT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

_JAVA = "org.apache.pulsar.client.impl.auth."
# Lowercased plugin names -> the method; anything else is refused with SUPPORTED.
PLUGIN_NAMES: dict[str, str] = {
    **{name: "token" for name in ("token", _JAVA + "authenticationtoken", "authenticationtoken")},
    **{name: "tls" for name in ("tls", _JAVA + "authenticationtls", "authenticationtls")},
    **{name: "oauth2" for name in ("oauth2", _JAVA + "oauth2.authenticationoauth2", "authenticationoauth2")},
    **{name: "basic" for name in ("basic", _JAVA + "authenticationbasic", "authenticationbasic")},
    **{name: "athenz" for name in ("athenz", _JAVA + "authenticationathenz", "authenticationathenz")},
}
SUPPORTED = ("token, tls, oauth2, basic or athenz (or the Java client's class names, e.g. "
             "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2, org.apache.pulsar.client.impl.auth.AuthenticationTls)")
_NOT_IN_THE_C_CLIENT = {"authenticationkeystoretls": "TLS client certificates from a key store (give PEM files with "
                                                      "org.apache.pulsar.client.impl.auth.AuthenticationTls instead)",
                        "authenticationsasl": "Kerberos (SASL)"}


def credentials(opts: Mapping[str, str], prefix: str) -> Credentials | None:
    """The credentials `prefix` (pulsar.client. or pulsar.admin.) gives, or None when it gives none."""
    plugin_option, params_option = f"{prefix}authPluginClassName", f"{prefix}authParams"
    plugin_raw = setting(opts, prefix, "authPluginClassName")
    params = setting(opts, prefix, "authParams")
    bare_token = setting(opts, prefix, "authToken")
    if bare_token and not params:
        params, params_option = f"token:{bare_token}", f"{prefix}authToken"
    method = _method(plugin_raw, plugin_option) if plugin_raw else ("token" if params else None)
    if method is None:
        return None
    if params is None and method != "tls":
        raise ValueError(f"Option '{params_option}' is required with {plugin_option}={plugin_raw}: the plugin's parameters.")
    found = _parsed(method, params, opts, prefix, params_option)
    if found.secrets() and params and not SPARK_REDACTION.search(params):
        raise ValueError(f"Option '{params_option}': Spark would show this value in query plans, the Spark UI and its event "
                         "log: it holds a secret but none of the words Spark's redaction (spark.redaction.regex) hides by "
                         f"default (secret, password, token, access key, credential); {_REDACTABLE[found.plugin]}.")
    return found


# Spark hides an option's value where its key or value matches spark.redaction.regex; this is its
# default (PySpark 4.0 to 4.3). No key of ours matches it, so a value holding a secret must.
SPARK_REDACTION = re.compile(r"(?i)secret|password|token|access[.]?key|credential")
_REDACTABLE = {"token": "write it as 'token:<jwt>'",
               "oauth2token": 'give "type": "client_credentials" with it, or privateKey as a file:// path',
               "athenz": "give privateKey as a file:// path",
               "basic": 'write it as {"userId": "...", "password": "..."}'}


def _parsed(method: str, params: str | None, opts: Mapping[str, str], prefix: str, option: str) -> Credentials:
    if method == "token":
        return _token(params or "", option)
    if method == "tls":
        return _tls(params, opts, prefix, option)
    if method == "oauth2":
        return _oauth2(params or "", option)
    if method == "basic":
        return _basic(params or "", option)
    _json_object(params or "", option, "Athenz parameters")
    return AthenzAuth(params or "")


def admin_credentials(opts: Mapping[str, str], client: Credentials | None) -> Credentials | None:
    """The admin API's own credentials (pulsar.admin.*), else the client's; Athenz has no admin API flow here."""
    own = credentials(opts, ADMIN)
    chosen = own or client
    if isinstance(chosen, AthenzAuth):
        where = ADMIN if own else CLIENT
        raise ValueError(f"Option '{where}authPluginClassName': Athenz authenticates reads but not the admin API here; "
                         "give the admin API credentials of another method with 'pulsar.admin.authPluginClassName' and "
                         "'pulsar.admin.authParams' (token, tls, oauth2 or basic).")
    return chosen


def admin_tls(opts: Mapping[str, str], client_kwargs: Mapping[str, Any], admin: Credentials | None) -> TlsSettings:
    """How the admin API checks the broker: pulsar.admin.* settings, else the client's (one trust store for both)."""
    def admin_or_client(name: str, kwarg: str) -> Any:
        own = setting(opts, ADMIN, name)
        return own if own is not None else client_kwargs.get(kwarg)

    def flag(name: str, kwarg: str, default: bool) -> bool:
        raw = admin_or_client(name, kwarg)
        return bool(raw) if isinstance(raw, bool) else bool(values.boolean_value(raw, f"{ADMIN}{name}", default))

    client_cert = None
    if isinstance(admin, TlsAuth):
        client_cert = (admin.cert_file, admin.key_file)
    elif client_kwargs.get("tls_certificate_file_path") and client_kwargs.get("tls_private_key_file_path"):
        client_cert = (client_kwargs["tls_certificate_file_path"], client_kwargs["tls_private_key_file_path"])
    tls = TlsSettings(trust_file=admin_or_client("tlsTrustCertsFilePath", "tls_trust_certs_file_path"),
                      allow_insecure=flag("tlsAllowInsecureConnection", "tls_allow_insecure_connection", False),
                      validate_hostname=flag("tlsValidateHostname", "tls_validate_hostname", True),
                      client_cert=client_cert)
    if tls.allow_insecure:
        log.warning("TLS certificates are not checked (tlsAllowInsecureConnection=true): anyone between Spark and the "
                    "broker can read and change what the query reads, and see its credentials.")
    elif not tls.validate_hostname:
        log.warning("TLS hostnames are not checked (tlsValidateHostname=false): a certificate issued for another host is accepted.")
    return tls


def _method(raw: str, option: str) -> str:
    name = raw.strip().lower()
    if name in PLUGIN_NAMES:
        return PLUGIN_NAMES[name]
    unsupported = _NOT_IN_THE_C_CLIENT.get(name.rsplit(".", 1)[-1])
    why = f" ({unsupported} is not in pulsar-client, which both read paths use)" if unsupported else ""
    raise ValueError(f"Option '{option}': '{raw}' is not supported{why}; expected {SUPPORTED}.")


def _token(params: str, option: str) -> TokenAuth:
    """'token:<jwt>', 'file:///path' (read again whenever a connection authenticates), {"token": ...},
    {"file": ...}, or a bare JWT (as the Java client takes it)."""
    text = params.strip()
    if text.startswith("{"):
        given = _json_object(text, option, "token parameters")
        if given.get("token"):
            return TokenAuth(token=str(given["token"]))
        if given.get("file"):
            text = "file://" + str(given["file"]).removeprefix("file://")
        else:
            raise ValueError(f'Option \'{option}\': expected {{"token": "..."}} or {{"file": "/path"}} (value not shown).')
    if text.startswith("token:"):
        token = text[len("token:"):].strip()
        if not token:
            raise ValueError(f"Option '{option}': the token after 'token:' is empty.")
        return TokenAuth(token=token)
    if text.startswith("file:"):
        path = _file_url_path(text)
        if not _read_text(path, option, "token file").strip():
            raise ValueError(f"Option '{option}': the token file {path} is empty.")
        return TokenAuth(file=path)
    if _JWT.fullmatch(text):  # the Java client takes a bare token too
        return TokenAuth(token=text)
    raise ValueError(f"Option '{option}': expected 'token:<jwt>', 'file:///path/to/token' or {{\"token\": \"...\"}} (value not shown).")


def _tls(params: str | None, opts: Mapping[str, str], prefix: str, option: str) -> TlsAuth:
    """Java's 'tlsCertFile:/path,tlsKeyFile:/path' or {"tlsCertFile": ..., "tlsKeyFile": ...}; without
    parameters, the client's tlsCertificateFilePath and tlsKeyFilePath (as the Java client falls back to)."""
    given: dict[str, Any] = {}
    if params and params.strip().startswith("{"):
        given = _json_object(params, option, "TLS parameters")
    elif params:
        for part in params.split(","):
            key, _, value = part.partition(":")
            given[key.strip()] = value.strip()
    cert_given = given.get("tlsCertFile") or setting(opts, prefix, "tlsCertificateFilePath")
    key_given = given.get("tlsKeyFile") or setting(opts, prefix, "tlsPrivateKeyFilePath")  # or Java's tlsKeyFilePath
    if not cert_given or not key_given:
        raise ValueError(f"Option '{option}': TLS authentication needs the client certificate and its key, as "
                         "'tlsCertFile:/path/client.cert.pem,tlsKeyFile:/path/client.key-pk8.pem'.")
    cert, key = _file_url_path(str(cert_given)), _file_url_path(str(key_given))
    for path, what in ((cert, "client certificate"), (key, "client key")):
        _read_text(path, option, what)
    return TlsAuth(cert, key)


def _oauth2(params: str, option: str) -> OAuth2Auth:
    """The Java client's {"type": "client_credentials", "issuerUrl", "privateKey", "audience", "scope"}
    (the C++ client's issuer_url, private_key accepted too). privateKey: a credentials file (file://)
    or a data: URL, holding client_id and client_secret; checked here, never shown."""
    given = _json_object(params, option, "OAuth2 parameters")

    def value(*names: str) -> str | None:
        found = next((given[n] for n in names if given.get(n)), None)
        return str(found) if found is not None else None

    kind = value("type") or "client_credentials"
    if kind != "client_credentials":
        raise ValueError(f"Option '{option}': OAuth2 type '{kind}' is not supported; expected client_credentials.")
    issuer, private_key = value("issuerUrl", "issuer_url"), value("privateKey", "private_key")
    if not issuer or not private_key:
        raise ValueError(f"Option '{option}': OAuth2 needs 'issuerUrl' and 'privateKey' (a credentials file, file:///path, "
                         "or a data:application/json;base64,... URL), as "
                         '{"type": "client_credentials", "issuerUrl": "https://auth.example.com", "privateKey": "file:///path/creds.json", "audience": "..."}.')
    if not issuer.startswith(("https://", "http://")):
        raise ValueError(f"Option '{option}': the OAuth2 issuerUrl must be an http(s) URL.")
    if private_key.startswith("/"):
        private_key = "file://" + private_key
    client_credentials(private_key, option)  # fails now, naming the option, if it cannot be used
    return OAuth2Auth(issuer.rstrip("/"), private_key, value("audience"), value("scope"))


def client_credentials(private_key: str, option: str = "pulsar.client.authParams") -> dict[str, str]:
    """The client_id and client_secret of an OAuth2 credentials file or data: URL (privateKey)."""
    if private_key.startswith("data:"):
        header, _, payload = private_key.partition(",")
        try:
            text = base64.b64decode(payload).decode() if header.endswith(";base64") else payload
        except ValueError:
            raise ValueError(f"Option '{option}': the OAuth2 privateKey data: URL is not valid base64 (value not shown).") from None
        where = "the OAuth2 privateKey data: URL"
    elif private_key.startswith("file:"):
        path = _file_url_path(private_key)
        text, where = _read_text(path, option, "OAuth2 credentials file"), f"the OAuth2 credentials file {path}"
    else:
        raise ValueError(f"Option '{option}': the OAuth2 privateKey must be file:///path/to/credentials.json or a data: URL.")
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, dict) or not found.get("client_id") or not found.get("client_secret"):
        raise ValueError(f"Option '{option}': {where} must be JSON with client_id and client_secret (content not shown).")
    return {"client_id": str(found["client_id"]), "client_secret": str(found["client_secret"])}


def _basic(params: str, option: str) -> BasicAuth:
    """{"userId": ..., "password": ...} (Java; the C++ client's "username" too) or 'user:password'."""
    text = params.strip()
    if text.startswith("{"):
        given = _json_object(text, option, "basic authentication parameters")
        user, password = given.get("userId") or given.get("username"), given.get("password")
    else:
        user, _, password = text.partition(":")
    if not user or not password:
        raise ValueError(f'Option \'{option}\': basic authentication needs {{"userId": "...", "password": "..."}} (value not shown).')
    return BasicAuth(str(user), str(password))


def _json_object(text: str, option: str, what: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, dict):
        raise ValueError(f"Option '{option}': the {what} must be a JSON object (value not shown).")
    return found


def _file_url_path(text: str) -> str:
    """file:///a/b, file:/a/b or /a/b -> /a/b."""
    if text.startswith("file://"):
        return text[len("file://"):]
    return text[len("file:"):] if text.startswith("file:") else text


def _read_text(path: str, option: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise ValueError(f"Option '{option}': cannot read the {what} {path} ({e.strerror or type(e).__name__}); "
                         "it must be readable at that path on the driver and on every executor.") from None
