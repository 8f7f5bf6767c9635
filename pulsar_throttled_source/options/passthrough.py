"""pulsar.client.* / pulsar.reader.* / pulsar.admin.*: settings passed on to pulsar-client or read by the admin API.

A pass-through name is checked against the parameters of the pulsar-client call it goes to, and its
string value converted to that parameter's type (taken from the parameter's default), so a typo
fails at load() rather than as a TypeError on an executor.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .spec import settings

CLIENT = "pulsar.client."
READER = "pulsar.reader."
ADMIN = "pulsar.admin."

# Client/reader arguments that the source controls itself or that are not strings.
_CLIENT_RESERVED = {"service_url", "authentication", "logger"}
_READER_RESERVED = {"topic", "start_message_id", "reader_listener", "schema", "start_message_id_inclusive", "crypto_key_reader", "crypto_failure_action"}


# The Java client's names of settings pulsar-client names otherwise (copied from pulsar-spark queries).
JAVA_NAMES = {"tlshostnameverificationenable": "tlsvalidatehostname", "tlskeyfilepath": "tlsprivatekeyfilepath"}


def short_name(key: str, prefix: str) -> str:
    """The setting's name without prefix, '_' or '.', lowercased: authParams, auth_params and auth.params are one
    setting; a Java client name becomes the Python client's (tlsHostnameVerificationEnable: tlsValidateHostname)."""
    short = key[len(prefix):].replace("_", "").replace(".", "").lower()
    return JAVA_NAMES.get(short, short)


def setting(opts: Mapping[str, str], prefix: str, name: str) -> str | None:
    """The non-blank value of a pulsar.client./pulsar.admin. setting under any spelling the prefix check accepts:
    a spelling that passes validation is never silently ignored."""
    short = short_name(name, "")
    for key, value in opts.items():
        if key.startswith(prefix) and short_name(key, prefix) == short and str(value).strip():
            return str(value).strip()
    return None


def _kwarg_names(func: Callable[..., Any], reserved: set[str]) -> dict[str, tuple[str, Any]]:
    """short name -> (python kwarg, default) for a pulsar-client call."""
    sig = inspect.signature(func)
    return {
        p.name.replace("_", "").lower(): (p.name, p.default)
        for p in sig.parameters.values()
        if p.name != "self" and p.name not in reserved and p.kind is not p.VAR_KEYWORD
    }


def _convert(name: str, raw: str, default: Any) -> Any:
    """The string value as the type of the parameter's default (bool before int: bool is an int)."""
    text = str(raw).strip()
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected true or false.")
        return text.lower() == "true"
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"Option '{name}': '{raw}' is not an integer.") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"Option '{name}': '{raw}' is not a number.") from None
    return text


def _prefixed(opts: Mapping[str, str], prefix: str, allowed: dict[str, tuple[str, Any]], skip: set[str]) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for key, raw in sorted(opts.items()):
        if not key.startswith(prefix):
            continue
        short = short_name(key, prefix)
        if short in skip:
            continue
        if short not in allowed:
            names = ", ".join(sorted(prefix + k for k in allowed))
            raise ValueError(f"Option '{key}' is not a setting of pulsar-client; allowed: {names}.")
        kwarg, default = allowed[short]
        out.append((kwarg, _convert(key, raw, default)))
    return tuple(out)


def client_kwargs(opts: Mapping[str, str]) -> tuple[tuple[str, Any], ...]:
    """pulsar.client.* as pulsar.Client keyword arguments; the auth settings the source reads itself are left out."""
    import pulsar  # imported here so that option errors stay fast to produce in tests

    own = {s.key for s in settings(CLIENT)}
    given = _prefixed(opts, CLIENT, _kwarg_names(pulsar.Client.__init__, _CLIENT_RESERVED), own)
    # pulsar-client does not check that a broker's certificate names its host unless told to; a
    # query does, unless pulsar.client.tlsValidateHostname=false says otherwise (options.auth warns).
    if not any(name == "tls_validate_hostname" for name, _ in given):
        given += (("tls_validate_hostname", True),)
    return given


def reader_kwargs(opts: Mapping[str, str]) -> tuple[tuple[str, Any], ...]:
    """pulsar.reader.* as Client.create_reader keyword arguments."""
    import pulsar

    return _prefixed(opts, READER, _kwarg_names(pulsar.Client.create_reader, _READER_RESERVED), set())


def check_admin_settings(opts: Mapping[str, str]) -> None:
    """pulsar.admin.* holds only the settings the admin API client reads."""
    own = settings(ADMIN)
    keys = {s.key for s in own}
    for key in opts:
        if key.startswith(ADMIN) and short_name(key, ADMIN) not in keys:
            allowed = ", ".join(ADMIN + s.name for s in own)
            raise ValueError(f"Option '{key}' is not an admin setting; allowed: {allowed}.")
