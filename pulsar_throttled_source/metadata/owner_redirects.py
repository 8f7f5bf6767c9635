"""Where the admin API's credentials may follow a redirect: a broker answers a lookup of a topic it does not own
with 307 to the owner, usually another host, and the owner needs the credentials (requests drops them on any host
change, and the owner then answers 401). They follow only to the cluster's own hosts: the admin URL's hosts, and
the brokers the cluster names, as the admin API lists them (GET /admin/v2/brokers/<cluster>, a superuser's call)
or as a lookup of the redirected topic answers (its owner's web service URLs, which any role that may read the
topic may ask). Hosts are compared by name, any port: a broker's id names its plain HTTP port, its redirects may
name its TLS one. A redirect elsewhere, or from https to http, goes without them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests

from ..admin_endpoint import each_host

log = logging.getLogger(__name__)

BROKER_LIST_REFRESH_S = 30.0  # the cluster's broker list is asked again at most this often (brokers come and go)
_TOPIC_DOMAINS = ("persistent", "non-persistent")


def host_of(url: str) -> str | None:
    """The lowercased host name of a URL (an IPv6 address without brackets); None when it has none."""
    try:
        return urlsplit(url).hostname or None
    except ValueError:
        return None


def _broker_id(text: str) -> str | None:
    """The host of a broker's id as the admin API lists it: host:port (its web service), or a URL."""
    return host_of(text if "://" in text else f"http://{text}")


def topic_of(url: str) -> str | None:
    """The topic an admin or lookup URL names (/admin/v2/persistent/<tenant>/<ns>/<topic>/...,
    /lookup/v2/topic/persistent/<tenant>/<ns>/<topic>), as persistent://<tenant>/<ns>/<topic>; else None."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    for at in range(len(parts) - 3):
        if parts[at] in _TOPIC_DOMAINS and at > 0 and parts[at - 1] in ("v2", "topic"):
            return f"{parts[at]}://{parts[at + 1]}/{parts[at + 2]}/{parts[at + 3]}"
    return None


class ClusterHosts:
    """The hosts a redirect may take credentials to. `ask(path)` sends a GET to the admin URL (its own host,
    where credentials always go) without following redirects and answers the JSON, or raises."""

    def __init__(self, admin_url: str, ask: Callable[[str], Any], clock: Callable[[], float] = time.monotonic) -> None:
        # Every host the admin URL names (it may name several: http://h1:8080,h2:8080).
        self._known: set[str] = {host for url in each_host(admin_url) if (host := host_of(url))}
        self._ask = ask
        self._clock = clock
        self._listed_at: float | None = None
        self._lock = threading.Lock()

    def holds(self, url: str) -> bool:
        """Whether `url` is on the admin URL's host or a broker of the cluster (asked when not yet known)."""
        target = host_of(url)
        if target is None:
            return False
        with self._lock:
            if target in self._known:
                return True
            self._learn_brokers()
            if target not in self._known:
                self._learn_owner(topic_of(url))
            return target in self._known

    def _learn_brokers(self) -> None:
        now = self._clock()
        if self._listed_at is not None and now - self._listed_at < BROKER_LIST_REFRESH_S:
            return
        self._listed_at = now
        try:
            for cluster in self._ask("admin/v2/clusters") or []:
                for broker in self._ask(f"admin/v2/brokers/{cluster}") or []:
                    found = _broker_id(str(broker))
                    if found:
                        self._known.add(found)
        except (requests.exceptions.RequestException, ValueError, TypeError) as e:  # e.g. 401: not a superuser
            log.debug("the cluster's broker list is not available (%s); redirects are checked by lookups", type(e).__name__)

    def _learn_owner(self, topic: str | None) -> None:
        if topic is None:
            return
        try:
            answer = self._ask("lookup/v2/topic/" + topic.replace("://", "/", 1))
        except (requests.exceptions.RequestException, ValueError, TypeError) as e:
            log.debug("the lookup of %s failed (%s)", topic, type(e).__name__)
            return
        for key in ("httpUrl", "httpUrlTls"):
            found = host_of(str(answer.get(key) or "")) if isinstance(answer, dict) else None
            if found:
                self._known.add(found)


class OwnerRedirectSession(requests.Session):
    """A session that keeps credentials when a broker redirects a request to a host of the cluster (`hosts`),
    and drops them on any other redirect and on a downgrade from https to http."""

    hosts: ClusterHosts | None = None

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        if urlsplit(old_url).scheme == "https" and urlsplit(new_url).scheme != "https":
            return True
        if self.hosts is not None and self.hosts.holds(new_url):
            return False
        log.warning("The admin API redirected a request to %s, which is not a broker of the cluster (neither admin.url's "
                    "host nor one the cluster names): the request goes there without the query's credentials.",
                    host_of(new_url) or "a URL without a host")
        return True
