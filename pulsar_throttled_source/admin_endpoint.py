"""Where and how to reach the admin REST API (``AdminEndpoint``) and a Redis quota store (``QuotaStoreEndpoint``),
and the URL helpers that keep passwords out of every text: ``redacted`` (a URL without its password),
``without_userinfo`` (a URL without user name and password), ``userinfo`` (what it held), ``each_host`` (a URL
naming several hosts as one URL per host); credentials.scrub hides them in free texts. Credentials travel beside a URL, never inside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from .credentials import Credentials, TlsSettings


@dataclass(frozen=True)
class AdminEndpoint:
    """Where and how to reach the admin REST API: built once from the options (SourceOptions.admin),
    carried by every read task (ClientConfig.admin), opened by metadata.admin.PulsarAdmin."""

    url: str = ""  # never holds a user name or password (options refuse them)
    credentials: Credentials | None = None  # shows no secret in its repr
    tls: TlsSettings = TlsSettings()
    timeout_ms: int = 30_000  # per request


@dataclass(frozen=True)
class QuotaStoreEndpoint:
    """A Redis server holding quota buckets (option quotaStore): its URL without user-info, and the user name and
    password beside it (quotaStorePassword), the password never shown in a repr."""

    url: str  # redis://host:port/db or rediss://...
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def secrets(self) -> tuple[str, ...]:
        return (self.password,) if self.password else ()


def _netloc_span(url: str) -> tuple[int, int] | None:
    """Where the URL's authority (user-info@host:port) lies in `url`, as urllib splits it; None without one."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:  # e.g. an unbalanced '[' of an IPv6 host
        netloc = url.partition("://")[2].split("/", 1)[0] if "://" in url else ""
    if not netloc:
        return None
    start = url.find("//" + netloc)
    return (start + 2, start + 2 + len(netloc)) if start >= 0 else None


def userinfo(url: str) -> tuple[str | None, str | None]:
    """The URL's user name and password (percent-decoded), each None when absent. urllib takes the authority's
    user-info up to its last '@', so a password holding '@' or ':' is whole."""
    span = _netloc_span(url)
    if span is None or "@" not in url[span[0]:span[1]]:
        return None, None
    info = url[span[0]:span[1]].rpartition("@")[0]
    user, colon, password = info.partition(":")
    return unquote(user) or None, unquote(password) if colon else None


def redacted(url: str) -> str:
    """The URL with its password replaced by *** (redis://user:secret@host -> redis://user:***@host), for any
    legal URL (a password holding ':' or '@', an IPv6 host, a port); the rest of the text unchanged."""
    span = _netloc_span(url)
    if span is None:
        return url
    netloc = url[span[0]:span[1]]
    info, at, host = netloc.rpartition("@")
    if not at or ":" not in info:
        return url
    return url[:span[0]] + info.partition(":")[0] + ":***@" + host + url[span[1]:]


def each_host(url: str) -> list[str]:
    """The URL once for each host it names, in its order: a URL may name several, as Pulsar's clients and admin
    tools take a cluster's brokers (http://h1:8080,h2:8080/x -> [http://h1:8080/x, http://h2:8080/x]); user-info
    stays with the first. A URL of one host (or none): [url]. Empty hosts (a trailing ',') are left out."""
    span = _netloc_span(url)
    if span is None or "," not in url[span[0]:span[1]]:
        return [url]
    info, at, hosts = url[span[0]:span[1]].rpartition("@")
    named = [host for host in hosts.split(",") if host]
    return [url[:span[0]] + (info + at if i == 0 else "") + host + url[span[1]:] for i, host in enumerate(named)]


def without_userinfo(url: str) -> str:
    """The URL without user name and password (http://u:p@host:8080/x -> http://host:8080/x)."""
    span = _netloc_span(url)
    if span is None or "@" not in url[span[0]:span[1]]:
        return url
    return url[:span[0]] + url[span[0]:span[1]].rpartition("@")[2] + url[span[1]:]
