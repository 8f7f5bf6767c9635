"""HTTP plumbing for the Pulsar admin REST API: session, credentials, TLS, owner redirects, error
mapping and retries (the policy is in `retry`). The lookups themselves are in `admin`.

Every call has a bounded timeout and turns failures into errors that name the URL and what was
being done. Authentication headers are kept out of every message, log line and repr.

Once the API has answered at least once, a lookup (GET, HEAD) that fails with a connection error,
a timeout or an HTTP 5xx is retried for up to `retry_timeout_s` after the first failure of the
outage (a broker restart); a wrong `admin.url` still fails at the first request.

A topic whose ownership moves between brokers (bundle unload, load shedding, rolling restart) is
answered with 307 to the new owner (followed, credentials kept only to the cluster's own hosts:
owner_redirects) or 412/503 with a reason such as
"Can't find owner" or "is being unloaded": such answers come from a broker, so they are retried
within the same budget from the very first request. So is an owner a redirect leads to that does not
answer (a broker killed: until its metadata session expires the others still redirect to it), named
as the topic's owner in logs and errors, not as admin.url.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any, TypeVar

import requests

from ..admin_endpoint import AdminEndpoint, userinfo, without_userinfo
from ..credentials import BasicAuth, Credentials, TlsSettings, scrub
from ..retry import GaveUp, Outage, admin_failure_retried, call_with_retries, http_status_transient, ownership_moving
from .admin_answers import broker_reason, permission_needed, redirect_target, request_kind, tls_failure
from .admin_auth import AuthenticationFailed, authenticator
from .admin_hosts import AdminHosts, may_try_next, no_answer, none_answered
from .owner_redirects import ClusterHosts, OwnerRedirectSession

log = logging.getLogger(__name__)


class AdminError(RuntimeError):
    """The admin API could not answer; the message says what was asked and why it failed."""


class TopicNotFound(AdminError):
    pass


class AdminPermissionDenied(AdminError):
    """The credentials were accepted, but their role may not make this call."""


class TransactionsDisabled(AdminError):
    """The broker runs without a transaction coordinator: no topic of it holds transactions."""


TRANSACTIONS_DISABLED = re.compile(r"transactionCoordinatorEnabled", re.IGNORECASE)


class _Transient(AdminError):
    """A failure that may go away (connection, timeout, 5xx, ownership move)."""

    def __init__(self, message: str, reason: str, from_broker: bool = False, source: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.from_broker = from_broker  # a broker's own "topic is moving" answer (or redirect): the URL is right
        self.source = source  # who failed, when not admin.url itself (the owner a redirect led to)


NO_CLIENT_TLS = TlsSettings()  # the system's trust store, hostnames checked, no client certificate
POOLED_CONNECTIONS = 16  # >= request_pool.CONCURRENT_REQUESTS + lookup_scheduler.CONCURRENT_LOOKUPS + the planning thread


_Session = TypeVar("_Session", bound="AdminHttp")


class AdminHttp:
    """One admin API endpoint: `call` sends a request and answers its JSON body."""

    @classmethod
    def at(cls: type[_Session], endpoint: AdminEndpoint, retry_timeout_s: float = 0.0, known_good: bool = False) -> _Session:
        """A session on `endpoint` (see __init__ for the retries)."""
        return cls(endpoint.url, endpoint.timeout_ms / 1000.0, endpoint.credentials, endpoint.tls,
                   retry_timeout_s=retry_timeout_s, known_good=known_good)

    def __init__(self, admin_url: str, timeout_s: float = 10.0, credentials: Credentials | None = None,
                 tls: TlsSettings = NO_CLIENT_TLS, retry_timeout_s: float = 0.0, known_good: bool = False) -> None:
        # The URL shown in reprs, logs and errors never holds user-info: options refuse it; a URL given here with
        # one authenticates with it (as requests would), beside the URL.
        user, password = userinfo(admin_url)
        if credentials is None and (user or password):
            credentials = BasicAuth(user or "", password or "")
        self._hosts = AdminHosts(without_userinfo(admin_url))  # one, or several: http://h1:8080,h2:8080
        self._credentials = credentials
        self.timeout_s = timeout_s
        self.retry_timeout_s = retry_timeout_s  # 0: no retries
        # Retries start only after the API has answered once, unless the URL is known good (read
        # tasks: the driver planned with it, so a failure there is an outage, not a wrong URL).
        self._answered = known_good
        self._outage = Outage(retry_timeout_s)  # one budget for all calls made during one outage
        self._session = OwnerRedirectSession()
        self._session.hosts = ClusterHosts(without_userinfo(admin_url), self._ask)  # where a redirect may take the credentials
        # Planning asks from several threads at once (catalog refresh, entry lookups): keep a
        # connection for each, or urllib3 discards and reopens them (its default keeps 10).
        adapter = _Adapter(tls.validate_hostname, pool_maxsize=POOLED_CONNECTIONS)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        # Given with every request, not as the session's: requests lets REQUESTS_CA_BUNDLE or
        # CURL_CA_BUNDLE replace a session's CA file (psf/requests#3829), never a request's.
        self._verify = tls.verify
        self._session.cert = tls.client_cert  # mTLS: the client certificate and key files
        self._session.auth = authenticator(credentials)
        # Visible to benchmarks: idle polls must not add to them; requests per kind (the path's last
        # segment) and the time the broker took to answer them.
        self.requests_made = 0
        self.requests_by_kind: Counter[str] = Counter()
        self.request_seconds = 0.0

    def __repr__(self) -> str:  # never show headers (tokens)
        return f"{type(self).__name__}({','.join(self._hosts.urls)!r})"

    @property
    def base(self) -> str:
        """The admin URL's host that answered last (its first until one answered), as the URL requests go to."""
        return self._hosts.current

    def close(self) -> None:
        self._session.close()

    def call(self, method: str, path: str, what: str, *, json: Any = None, params: dict | None = None,
             not_found: str | None = None, expect: str | type | None = None, api: str = "v2") -> Any:
        """Send `method` to /admin/{api}/{path} and answer the JSON body (HEAD: the response headers).
        `what` says what is being done, for messages. `not_found`: raise TopicNotFound with this
        message on 404. `expect`: a key the JSON object must have, or the type of the JSON value. A
        broker that is stopping or starting answers some requests with 200 and an error object (a
        stack trace) instead: such an answer counts as a transient failure, never as "no partitions".
        Every error leaves scrubbed (credentials.scrub): no secret of the credentials, no URL's password."""
        try:
            return self._call(method, path, what, json=json, params=params, not_found=not_found, expect=expect, api=api)
        except AdminError as e:
            e.args = (scrub(str(e), self._credentials),)
            raise

    def _call(self, method: str, path: str, what: str, *, json: Any, params: dict | None, not_found: str | None,
              expect: str | type | None, api: str) -> Any:
        def retried(error: BaseException) -> bool:
            return isinstance(error, _Transient) and admin_failure_retried(method, self.retry_timeout_s, self._answered,
                                                                           error.from_broker)

        def log_retry(error: BaseException, attempt: int, delay: float) -> None:
            reason = error.reason if isinstance(error, _Transient) else type(error).__name__
            source = error.source if isinstance(error, _Transient) and error.source else self.base
            log.warning("admin API unavailable, retry %d in %.1f s (%s from %s while %s; retrying for up to %.0f s, "
                        "option adminRetryTimeoutMs)", attempt, delay, reason, source, what, self.retry_timeout_s)

        try:
            result = call_with_retries(lambda: self._call_once(method, path, what, json=json, params=params, not_found=not_found,
                                                               expect=expect, api=api), self._outage, retried, log_retry)
        except GaveUp as e:
            raise AdminError(f"{e.last} Gave up after retrying for {self.retry_timeout_s:.0f} s (option 'adminRetryTimeoutMs').") from None
        except _Transient as e:  # not retried: never answered before, no budget, or not a lookup
            raise AdminError(str(e)) from None
        except AdminError:
            self._answered = True  # it answered (e.g. 404): the API is there
            self._outage.ended()
            raise
        lasted = self._outage.ended()
        if lasted is not None:
            log.warning("admin API at %s answers again after %.1f s", self.base, lasted)
        self._answered = True
        return result

    def get_text(self, url: str, what: str, credentials: Credentials | None = None) -> str:
        """GET a page of the broker's web service beside the admin API (its Prometheus /metrics), with `credentials`
        (a proxy's in front of it), else this session's, and its TLS; one attempt, no retries (a caller that cannot
        read it goes on without). Raises AdminError."""
        shown = without_userinfo(url)  # a password in the URL reaches no log, error or progress report
        try:
            resp = self._session.get(url, timeout=self.timeout_s, verify=self._verify, auth=authenticator(credentials))
        except (AuthenticationFailed, requests.exceptions.RequestException) as e:
            raise AdminError(f"Cannot read {shown} while {what} ({type(e).__name__})") from None
        if resp.status_code >= 400:
            raise AdminError(f"{shown} answered HTTP {resp.status_code} while {what}")
        return resp.text

    def _ask(self, path: str) -> Any:
        """GET the admin URL's own {path} (credentials go there), redirects not followed: the JSON, else raises."""
        resp = self._session.get(f"{self.base}/{path}", timeout=self.timeout_s, verify=self._verify, allow_redirects=False)
        if resp.status_code != 200:
            raise requests.exceptions.HTTPError(f"HTTP {resp.status_code}")
        return resp.json()

    def _call_once(self, method: str, path: str, what: str, *, json: Any, params: dict | None, not_found: str | None,
                   expect: str | type | None, api: str) -> Any:
        self.requests_made += 1
        self.requests_by_kind[request_kind(path)] += 1
        resp = self._request(method, f"admin/{api}/{path}", what, json=json, params=params)
        if resp.status_code == 503 and TRANSACTIONS_DISABLED.search(resp.text):
            raise TransactionsDisabled(f"The broker at {self.base} runs without transactions (transactionCoordinatorEnabled=false).")
        if http_status_transient(resp.status_code, method, resp.text):
            moving = ownership_moving(resp.status_code, method, resp.text)
            detail = resp.text.strip()[:300]
            raise _Transient(f"The Pulsar admin API at {self.base} failed while {what}: HTTP {resp.status_code} {detail}",
                             f"HTTP {resp.status_code}" + (" (topic ownership moving)" if moving else ""), from_broker=moving)
        if resp.status_code == 404 and not_found is not None:
            raise TopicNotFound(not_found)
        if resp.status_code in (401, 403):
            reason = broker_reason(resp)
            # Pulsar answers an authenticated role without the permission 401 on topic operations, 403 on
            # namespace ones, with a reason "Unauthorized to validate...Operation for operation [...]".
            if resp.status_code == 403 or reason.startswith("Unauthorized to"):
                raise AdminPermissionDenied(
                    f"The Pulsar admin API at {self.base} refused {what} (HTTP {resp.status_code}: the role of the credentials "
                    f"has no permission for it: {reason[:200]}). It needs {permission_needed(path)}; the documentation's "
                    "Secured clusters guide (docs/guides/secured-clusters.md, 'Least privilege') lists what each feature needs.")
            raise AdminError(f"The Pulsar admin API at {self.base} refused {what} (HTTP 401: not authenticated); set credentials "
                             "with 'pulsar.client.authPluginClassName' and 'pulsar.client.authParams' (or 'pulsar.admin.authParams').")
        if resp.status_code >= 400:
            detail = resp.text.strip()[:300]
            raise AdminError(f"The Pulsar admin API at {self.base} failed while {what}: HTTP {resp.status_code} {detail}")
        if method == "HEAD":
            return dict(resp.headers)
        if not resp.content and expect is None:
            return None
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            raise AdminError(f"The Pulsar admin API at {self.base} returned non-JSON while {what}; is 'admin.url' the broker's HTTP admin address?") from None
        # "stackTrace": a Java exception serialized as a 200 answer (seen while the broker stops).
        if (isinstance(body, dict) and "stackTrace" in body) or expect is not None and not (
                isinstance(body, expect) if isinstance(expect, type) else isinstance(body, dict) and expect in body):
            raise _Transient(f"The Pulsar admin API at {self.base} gave an incomplete answer while {what}: {resp.text.strip()[:200]}",
                             "incomplete answer")
        return body


    def _request(self, method: str, url_path: str, what: str, **kwargs: Any) -> requests.Response:
        """Send the request to the admin URL's hosts in turn (admin_hosts) until one answers: its answer. No host
        answering: a _Transient naming each host and why (one host: as it failed)."""
        failures: list[tuple[str, str]] = []
        for base in self._hosts.in_turn():
            try:
                resp = self._session.request(method, f"{base}/{url_path}", timeout=self.timeout_s, verify=self._verify,
                                             **kwargs)
            except AuthenticationFailed as e:
                raise AdminError(str(e)) from None
            except requests.exceptions.SSLError as e:
                raise AdminError(tls_failure(base, what, str(e))) from None
            except requests.exceptions.RequestException as e:
                # The owner a host redirected to failed (that host answered), or a call that may have been sent.
                if not self._hosts.several or redirect_target(base, e) is not None or not may_try_next(method, e):
                    raise self._unreachable(e, what, base) from None
                failures.append((base, no_answer(e, self.timeout_s)))
                continue
            if failures:
                log.warning("The Pulsar admin API answers at %s while %s; no answer from %s (a host of option "
                            "'admin.url'): the next requests go to %s first.", base, what,
                            ", ".join(f"{url} ({reason})" for url, reason in failures), base)
            self._hosts.answered(base)
            self.request_seconds += resp.elapsed.total_seconds()
            return resp
        raise _Transient(none_answered(failures, what), "no host of 'admin.url' answered")

    def _unreachable(self, error: requests.exceptions.RequestException, what: str, base: str) -> _Transient:
        """A request that got no answer, from `base` (admin.url, or its host that was asked) or from the broker it
        redirected to: a redirect means admin.url answered (it is right: retried from the first request, like an
        ownership move), and the one that did not answer is the topic's owner (a broker that died or stops), named
        as such."""
        timed_out = isinstance(error, requests.exceptions.Timeout)
        reason = no_answer(error, self.timeout_s)
        owner = redirect_target(base, error)
        if owner is not None:
            return _Transient(f"The Pulsar admin API at {base} redirected to {owner} (the broker owning the topic), "
                              f"which {'did not answer in time' if timed_out else 'cannot be reached'} while {what} "
                              f"({reason}): a broker that stopped or died gives its topics to another.",
                              reason, from_broker=True, source=f"{owner} (the topic's owner, redirected to by {base})")
        if timed_out:
            return _Transient(f"The Pulsar admin API at {base} did not answer within {self.timeout_s:.0f} s while {what}; "
                              "check 'admin.url'.", reason)
        return _Transient(f"Cannot reach the Pulsar admin API at {base} while {what} ({reason}); check option 'admin.url' "
                          "(expected e.g. http://localhost:8080).", reason)


class _Adapter(requests.adapters.HTTPAdapter):
    """Connections that check the certificate's host name unless told not to (tlsValidateHostname=false)."""

    def __init__(self, validate_hostname: bool, **kwargs: Any) -> None:
        self._validate_hostname = validate_hostname
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if not self._validate_hostname:
            kwargs["assert_hostname"] = False
        super().init_poolmanager(*args, **kwargs)
