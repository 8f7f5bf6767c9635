"""Read one option by its spec: default when unset, bounds and allowed values from the table.

`opts` is the options mapping with lowercased keys and string values, as parse_options builds it.
Every error names the option and what is allowed.
"""

from __future__ import annotations

import getpass
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from ..admin_endpoint import QuotaStoreEndpoint, redacted, userinfo, without_userinfo
from .spec import BY_NAME, TMP, USER, OptionSpec

Opts = Mapping[str, str]


def _spec(name: str, kind: tuple[str, ...]) -> OptionSpec:
    spec = BY_NAME[name]
    assert spec.kind in kind, f"{name} is a {spec.kind} option, not {'/'.join(kind)}"
    return spec


def is_set(opts: Opts, name: str) -> bool:
    """Given with a non-blank value (a blank value counts as unset, as for the readers below)."""
    return str(opts.get(BY_NAME[name].key, "")).strip() != ""


def integer(opts: Opts, name: str) -> int | None:
    """An int or quota option: the default when unset or blank, else a whole number within the spec's bounds."""
    spec = _spec(name, ("int", "quota"))
    raw = opts.get(spec.key)
    if raw is None or str(raw).strip() == "":
        return spec.default  # type: ignore[return-value]
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"Option '{name}': '{raw}' is not {spec.expected}.") from None
    if spec.kind == "quota" and value == -1:
        return value
    if (spec.minimum is not None and value < spec.minimum) or (spec.maximum is not None and value > spec.maximum):
        raise ValueError(f"Option '{name}': {value} is not allowed; expected {spec.expected}.")
    return value


_UNIT_MS = {"": 1, "ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(opts: Opts, name: str) -> int:
    """A duration option in milliseconds: a plain number is milliseconds (as Spark's time strings,
    which Kafka's maxTriggerDelay uses), or a number with a unit (30s, 15m); positive."""
    spec = _spec(name, ("duration",))
    raw = opts.get(spec.key)
    text = str(spec.default if raw is None or str(raw).strip() == "" else raw).strip().lower()
    match = re.fullmatch(r"(\d+)\s*(ms|s|min|m|h|d)?", text)
    value = int(match.group(1)) * _UNIT_MS[match.group(2) or ""] if match else 0
    if value <= 0:
        raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected {spec.expected}.")
    return value


def number(opts: Opts, name: str) -> int:
    """integer() of an option whose default is a number (never None)."""
    value = integer(opts, name)
    assert value is not None, name
    return value


def boolean(opts: Opts, name: str) -> bool | None:
    """true/false in any case; the default (None for the mode aliases) when unset or blank."""
    return boolean_value(opts.get(BY_NAME[name].key), name, _spec(name, ("bool",)).default)  # type: ignore[arg-type]


def boolean_value(raw: str | None, name: str, default: bool | None) -> bool | None:
    if raw is None or str(raw).strip() == "":
        return default
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected true or false.")


def flag(opts: Opts, name: str) -> bool:
    """boolean() of an option whose default is true or false."""
    return bool(boolean(opts, name))


def choice(opts: Opts, name: str, *, unset: str | None = None) -> str | None:
    """One of the spec's allowed values (case-insensitive, returned lowercased).

    Unset or blank gives the spec's default, or `unset` when a rule decides the default (throttlingMode)."""
    spec = _spec(name, ("choice",))
    raw = opts.get(spec.key)
    if raw is None or str(raw).strip() == "":
        return unset if unset is not None else spec.default  # type: ignore[return-value]
    text = str(raw).strip().lower()
    if text not in spec.allowed:
        raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected one of {', '.join(spec.allowed)}.")
    return text


def url(opts: Opts, name: str, userinfo_allowed: bool = False, several_hosts: bool = False) -> str:
    """A URL with one of the spec's schemes, a host and a valid port, without user-info unless `userinfo_allowed`
    (the caller then takes it out); trailing '/' dropped. A given but blank URL is an error, not the default.
    `several_hosts`: it may name several, as Pulsar's clients take a cluster's brokers (pulsar://h1:6650,h2:6650),
    each checked alike."""
    spec = _spec(name, ("url",))
    raw = str(opts.get(spec.key, spec.default)).strip()
    parsed = urlparse(raw)
    hosts = parsed.netloc.split(",") if several_hosts else [parsed.netloc]
    if parsed.scheme not in spec.allowed or not all(_host_and_port_ok(f"{parsed.scheme}://{host}") for host in hosts):
        shapes = " or ".join(s + "://host:port" + (",host:port" if several_hosts else "") for s in spec.allowed)
        raise ValueError(f"Option '{name}': {_shown(raw)} is not a valid URL; expected {shapes}.")
    user, password = userinfo(raw)
    if (user is not None or password is not None) and not userinfo_allowed:
        raise ValueError(f"Option '{name}': '{redacted(raw)}' holds a user name or password, which the source keeps out "
                         f"of URLs (they reach logs and error messages); {_CREDENTIALS_GO[name]}, and the URL as "
                         f"{without_userinfo(raw)}.")
    return raw.rstrip("/")


def _host_and_port_ok(one_host_url: str) -> bool:
    parsed = urlparse(one_host_url)
    try:
        return bool(parsed.hostname) and (parsed.port is None or 0 < parsed.port < 65536)
    except ValueError:
        return False


def _shown(raw: str) -> str:
    """A URL option's value for a message: quoted without its password; not at all where an '@' is left that no
    URL parser takes for the end of user-info (an unencoded '/', '?' or '#' in a password)."""
    shown = redacted(raw)
    if "@" in without_userinfo(raw):
        return "(value not shown: it holds an '@' outside a user-info)"
    return f"'{shown}'"


# Where a credential written into a URL option goes instead.
_ADMIN_CREDENTIALS = ('give the admin API\'s credentials with pulsar.admin.authPluginClassName and pulsar.admin.authParams '
                      '(a user and password: pulsar.admin.authPluginClassName=basic, pulsar.admin.authParams='
                      '{"userId": "...", "password": "..."}; they default to pulsar.client.*)')
_CREDENTIALS_GO = {"admin.url": _ADMIN_CREDENTIALS,
                   "service.url": "give the client's credentials with pulsar.client.authPluginClassName and pulsar.client.authParams"}


def quota_store(opts: Opts) -> QuotaStoreEndpoint | None:
    """quotaStore (a Redis URL, user name allowed, password refused) with quotaStorePassword, or None when unset or
    blank (the SQLite file). The password never reaches a URL, a repr or a message."""
    spec = _spec("quotaStore", ("store",))
    raw = str(opts.get(spec.key, "")).strip()
    password = secret(opts, "quotaStorePassword")
    if not raw:
        if password is not None:
            raise ValueError("Option 'quotaStorePassword' applies only with 'quotaStore' (a Redis server); set quotaStore, "
                             "or remove quotaStorePassword.")
        return None
    shown = _shown(raw)
    parsed = urlparse(raw)
    try:
        port_ok = parsed.port is None or 0 < parsed.port < 65536
        db_ok = parsed.path in ("", "/") or parsed.path[1:].isdigit()
    except ValueError:
        port_ok = db_ok = False
    if parsed.scheme not in spec.allowed or not parsed.hostname or not port_ok or not db_ok:
        raise ValueError(f"Option 'quotaStore': {shown} is not a valid store URL; expected "
                         f"{' or '.join(s + '://[user@]host:port[/db]' for s in spec.allowed)}, or unset for the SQLite file.")
    user, url_password = userinfo(raw)
    if url_password is not None:
        raise ValueError(f"Option 'quotaStore': {shown} holds a password, which Spark would show in query plans, the Spark "
                         "UI and its event log (it hides only values whose option name or value matches "
                         "spark.redaction.regex); give the password with option 'quotaStorePassword' (Spark hides its value) "
                         f"and the URL as {without_userinfo(raw).replace('://', '://' + (user + '@' if user else ''), 1)}.")
    return QuotaStoreEndpoint(without_userinfo(raw), user, password)


def secret(opts: Opts, name: str) -> str | None:
    """A secret option's value (never shown), or None when unset or blank."""
    value = str(opts.get(_spec(name, ("secret",)).key, ""))
    return value if value.strip() else None


def name_value(opts: Opts, name: str) -> str:
    """The default when unset; a given value (blank included) must match the spec's pattern."""
    spec = _spec(name, ("name",))
    value = str(opts.get(spec.key, spec.default)).strip()
    if not re.fullmatch(spec.pattern, value):
        raise ValueError(f"Option '{name}': '{value}' is not allowed; expected {spec.expected}.")
    return value


def path(opts: Opts, name: str) -> str:
    """A file path; blank means the default, whose <tmp> is the system's temp directory."""
    spec = _spec(name, ("path",))
    value = str(opts.get(spec.key, "")).strip()
    if value:
        return value
    default = str(spec.default).replace(USER, _user_name())
    return str(Path(tempfile.gettempdir()) / default[len(TMP) + 1:]) if default.startswith(TMP + "/") else default


def _user_name() -> str:
    """Who runs the query, for a per-user default path (a container user without a passwd entry: its uid)."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "user"


def key_path(opts: Opts, name: str) -> str | None:
    """A key file path; checked on the driver when it exists there (executors may mount it elsewhere)."""
    value = str(opts.get(_spec(name, ("key_path",)).key, "")).strip()
    if not value:
        return None
    if value.startswith("file://"):
        value = value[len("file://"):]
    if "-----BEGIN" in value:
        raise ValueError(f"Option '{name}': expected the path of a PEM file readable on every executor, not the key itself.")
    return value
