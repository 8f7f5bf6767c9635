"""Token authentication settings: the plugin check and reading a token without ever showing it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from .model import Secret
from .passthrough import ADMIN, CLIENT, setting

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


def auth_params(raw: str | None, option: str) -> Secret | None:
    """Accept 'token:<jwt>', 'file:///path' or a JSON {"token": ...}; return the token.
    Messages name the option and the file, never the value."""
    if raw is None or not str(raw).strip():
        return None
    text = str(raw).strip()
    if text.startswith("token:"):
        return Secret(text[len("token:"):])
    if text.startswith("file://"):
        path = Path(text[len("file://"):])
        try:
            token = path.read_text().strip()
        except OSError:
            raise ValueError(f"Option '{option}': cannot read the token file {path}.") from None
        if not token:
            raise ValueError(f"Option '{option}': the token file {path} is empty.")
        return Secret(token)
    if text.startswith("{"):
        try:
            found = json.loads(text).get("token")
        except (json.JSONDecodeError, AttributeError):
            found = None
        if found:
            return Secret(str(found))
    raise ValueError(f"Option '{option}': expected 'token:<jwt>', 'file:///path/to/token' or {{\"token\": \"...\"}} (value not shown).")


def token(opts: Mapping[str, str], prefix: str) -> Secret | None:
    """The token of pulsar.client. or pulsar.admin.: authParams, or a bare authToken."""
    params, bare = setting(opts, prefix, "authParams"), setting(opts, prefix, "authToken")
    return auth_params(params or (f"token:{bare}" if bare else None), f"{prefix}authParams")


def auth_plugin(opts: Mapping[str, str]) -> str | None:
    """The client's authPluginClassName; only token authentication is supported, for the client and the admin API."""
    client_plugin = setting(opts, CLIENT, "authPluginClassName")
    for prefix, plugin in ((CLIENT, client_plugin), (ADMIN, setting(opts, ADMIN, "authPluginClassName"))):
        if plugin and "token" not in plugin.lower():
            raise ValueError(f"Option '{prefix}authPluginClassName': '{plugin}' is not supported; expected {TOKEN_PLUGIN}.")
    return client_plugin
