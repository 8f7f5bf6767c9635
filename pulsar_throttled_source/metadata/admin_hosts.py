"""The hosts of option admin.url: one, or several as Pulsar's admin clients take a cluster's brokers
(http://broker-1:8080,broker-2:8080). A request goes to the host that answered last, and on to the next ones in the
URL's order when it gets no answer there (refused, unreachable, timed out): a broker that is down, even the one named
first, costs a failed connection, not the query. A host that answers, even with an error (5xx, 4xx), answered: its
answer stands (the retry policy deals with 503s and ownership moves). A request that may have reached a host before
it failed (a timeout after sending, a connection reset) goes on to the next one only if it reads (GET, HEAD): a
management call is never sent twice. The host that answered last is remembered for the process, so the sessions
opened after (every read task opens one) go there first: a host that hangs costs its timeout once, not per task."""

from __future__ import annotations

import threading

import requests
from urllib3.exceptions import NewConnectionError

from ..admin_endpoint import each_host

READS = ("GET", "HEAD")
# admin URL -> the index of its host that answered last, in this process.
_ANSWERED_LAST: dict[str, int] = {}
_ANSWERED_LAST_LOCK = threading.Lock()


class AdminHosts:
    """The admin URL's hosts (each as a URL of its own, without a trailing '/') and the one that answered last."""

    def __init__(self, admin_url: str) -> None:
        self.urls = [url.rstrip("/") for url in each_host(admin_url)]
        self._key = ",".join(self.urls)
        with _ANSWERED_LAST_LOCK:
            self._current = _ANSWERED_LAST.get(self._key, 0)

    @property
    def current(self) -> str:
        return self.urls[self._current]

    @property
    def several(self) -> bool:
        return len(self.urls) > 1

    def in_turn(self) -> list[str]:
        """Every host, the one that answered last first, then the others in the URL's order after it."""
        start = self._current
        return self.urls[start:] + self.urls[:start]

    def answered(self, url: str) -> None:
        """`url` answered: the next request goes there first."""
        index = self.urls.index(url)
        if index != self._current:
            with _ANSWERED_LAST_LOCK:
                self._current = _ANSWERED_LAST[self._key] = index


def may_try_next(method: str, error: requests.exceptions.RequestException) -> bool:
    """Whether a request that got no answer may go on to the next host: a read always, anything else only when it
    never reached the host (a refused or timed-out connection). A TLS failure is a setting to fix, not a host down."""
    if isinstance(error, requests.exceptions.SSLError):
        return False
    return method in READS or never_sent(error)


def never_sent(error: requests.exceptions.RequestException) -> bool:
    """The connection failed before the request was sent (requests wraps urllib3's NewConnectionError in a
    MaxRetryError as the ConnectionError's argument)."""
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return True
    cause = error.args[0] if error.args else None
    return isinstance(cause, NewConnectionError) or isinstance(getattr(cause, "reason", None), NewConnectionError)


def no_answer(error: requests.exceptions.RequestException, timeout_s: float) -> str:
    """Why a request got no answer, short: a timeout, else the error's kind."""
    if isinstance(error, requests.exceptions.Timeout):
        return f"no answer within {timeout_s:.0f} s"
    return type(error).__name__


def none_answered(failures: list[tuple[str, str]], what: str) -> str:
    """The error when no host of admin.url answered: each host and why, in the order they were tried."""
    tried = "; ".join(f"{url} ({reason})" for url, reason in failures)
    return (f"Cannot reach the Pulsar admin API at any host of option 'admin.url' while {what}: {tried}. Check option "
            "'admin.url' (several hosts as http://host1:8080,host2:8080).")
