"""A small client for the Pulsar admin REST API (v2): the lookups planning needs.

Every call has a bounded timeout and turns failures into errors that name the URL
and topic. Authentication headers are kept out of every message and repr.

Once the API has answered at least once, a lookup (GET) that fails with a connection
error, a timeout or an HTTP 5xx is retried with exponential backoff for up to
`retry_timeout_s` after the first failure of the outage (a broker restart); a wrong
`admin.url` still fails at the first request.

A topic whose ownership moves between brokers (bundle unload, load shedding, rolling
restart) is answered with 307 to the new owner (followed, credentials kept) or 412/503
with a reason such as "Can't find owner" or "is being unloaded": such answers come from
a broker, so they are retried within the same budget from the very first request.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any
from urllib.parse import quote, urlparse

import requests

from .positions import BEFORE_EARLIEST, EntryPosition
from .topics import TopicName, namespace_rest_path

log = logging.getLogger(__name__)


class AdminError(RuntimeError):
    """The admin API could not answer; the message says what was asked and why it failed."""


class TopicNotFound(AdminError):
    pass


class TransactionsDisabled(AdminError):
    """The broker runs without a transaction coordinator: no topic of it holds transactions."""


TRANSACTIONS_DISABLED = re.compile(r"transactionCoordinatorEnabled", re.IGNORECASE)


class _Transient(AdminError):
    """A failure that may go away (connection, timeout, 5xx): retried once the API answered before."""

    def __init__(self, message: str, reason: str, from_broker: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.from_broker = from_broker  # a broker's own "topic is moving" answer: the URL is right


RETRY_FIRST_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 5.0
# What a Pulsar broker answers while a topic's ownership moves (bundle unload, load shedding, restarts).
OWNERSHIP_MOVING = re.compile(r"owner|unload|not ?ready|ServiceUnitNotReady|not served|temporarily unavailable"
                              r"|being (?:loaded|closed|fenced|transferred)", re.IGNORECASE)


class _OwnerRedirectSession(requests.Session):
    """A session that keeps credentials when a broker redirects a lookup (307) to the broker that
    owns the topic: requests drops them on any host or port change, and the owner then answers
    401. They are still dropped on a downgrade from https to http."""

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        return urlparse(old_url).scheme == "https" and urlparse(new_url).scheme != "https"


class PulsarAdmin:
    def __init__(self, admin_url: str, timeout_s: float = 10.0, auth_token: str | None = None,
                 tls_verify: bool | str = True, retry_timeout_s: float = 0.0, known_good: bool = False) -> None:
        self.base = admin_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retry_timeout_s = retry_timeout_s  # 0: no retries
        # Retries start only after the API has answered once, unless the URL is known good (read
        # tasks: the driver planned with it, so a failure there is an outage, not a wrong URL).
        self._answered = known_good
        self._failing_since: float | None = None  # start of the current outage (one budget for all calls)
        self.retries = 0
        self._session = _OwnerRedirectSession()
        self._session.verify = tls_verify
        if auth_token:
            self._session.headers["Authorization"] = f"Bearer {auth_token}"
        self.requests_made = 0  # visible to benchmarks: idle polls must not add to it

    def __repr__(self) -> str:  # never show headers (tokens)
        return f"PulsarAdmin({self.base!r})"

    def close(self) -> None:
        self._session.close()

    # -- plumbing ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, what: str, *, json: Any = None, params: dict | None = None,
              not_found: str | None = None, expect: str | type | None = None, api: str = "v2") -> Any:
        """`method` HEAD answers the response headers."""
        """`expect`: a key the JSON object must have, or the type of the JSON value. A broker that
        is stopping or starting answers some requests with 200 and an error object (a stack
        trace) instead: such an answer counts as a transient failure, never as "no partitions"."""
        attempt = 0
        while True:
            try:
                result = self._call_once(method, path, what, json=json, params=params, not_found=not_found, expect=expect, api=api)
            except _Transient as e:
                if not (self._answered or e.from_broker) or self.retry_timeout_s <= 0 or method not in ("GET", "HEAD"):
                    raise AdminError(str(e)) from None
                now = time.monotonic()
                if self._failing_since is None:
                    self._failing_since = now
                left = self._failing_since + self.retry_timeout_s - now
                if left <= 0:
                    raise AdminError(f"{e} Gave up after retrying for {self.retry_timeout_s:.0f} s (option 'adminRetryTimeoutMs').") from None
                attempt += 1
                delay = min(RETRY_FIRST_DELAY_S * 2 ** (attempt - 1), RETRY_MAX_DELAY_S, left)
                log.warning("admin API unavailable, retry %d in %.1f s (%s from %s while %s; retrying for up to %.0f s, "
                            "option adminRetryTimeoutMs)", attempt, delay, e.reason, self.base, what, self.retry_timeout_s)
                self.retries += 1
                time.sleep(delay)
                continue
            except AdminError:
                self._answered = True  # it answered (e.g. 404): the API is there
                self._failing_since = None
                raise
            if self._failing_since is not None:
                log.warning("admin API at %s answers again after %.1f s", self.base, time.monotonic() - self._failing_since)
            self._answered = True
            self._failing_since = None
            return result

    def _call_once(self, method: str, path: str, what: str, *, json: Any, params: dict | None, not_found: str | None,
                   expect: str | type | None, api: str) -> Any:
        url = f"{self.base}/admin/{api}/{path}"
        self.requests_made += 1
        try:
            resp = self._session.request(method, url, json=json, params=params, timeout=self.timeout_s)
        except requests.exceptions.Timeout:
            raise _Transient(f"The Pulsar admin API at {self.base} did not answer within {self.timeout_s:.0f} s while {what}; check 'admin.url'.",
                             f"no answer within {self.timeout_s:.0f} s") from None
        except requests.exceptions.RequestException as e:
            reason = type(e).__name__
            raise _Transient(f"Cannot reach the Pulsar admin API at {self.base} while {what} ({reason}); check option 'admin.url' (expected e.g. http://localhost:8080).", reason) from None
        if resp.status_code == 503 and TRANSACTIONS_DISABLED.search(resp.text):
            raise TransactionsDisabled(f"The broker at {self.base} runs without transactions (transactionCoordinatorEnabled=false).")
        # A HEAD answer has no body to give its reason: 307/412/503 there is taken as an ownership move.
        moving = resp.status_code in (307, 412, 503) and (method == "HEAD" or bool(OWNERSHIP_MOVING.search(resp.text)))
        if resp.status_code >= 500 or moving:
            detail = resp.text.strip()[:300]
            raise _Transient(f"The Pulsar admin API at {self.base} failed while {what}: HTTP {resp.status_code} {detail}",
                             f"HTTP {resp.status_code}" + (" (topic ownership moving)" if moving else ""), from_broker=moving)
        if resp.status_code == 404 and not_found is not None:
            raise TopicNotFound(not_found)
        if resp.status_code in (401, 403):
            raise AdminError(f"The Pulsar admin API at {self.base} refused {what} (HTTP {resp.status_code}); set credentials with 'pulsar.admin.authParams' or 'pulsar.client.authParams'.")
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

    # -- topics -----------------------------------------------------------------------------
    def partition_count(self, topic: TopicName) -> int:
        """Partitions of a partitioned topic; 0 for a non-partitioned topic. Raises TopicNotFound."""
        missing = f"Topic {topic} does not exist (neither partitioned nor non-partitioned) on {self.base}."
        meta = self._call("GET", f"{topic.rest_path}/partitions", f"reading the partitions of {topic}",
                          params={"checkAllowAutoCreation": "false"}, not_found=missing)
        count = int(meta.get("partitions", 0)) if meta else 0
        if count == 0 and not self.topic_exists(topic):
            raise TopicNotFound(missing)
        return count

    def topic_exists(self, topic: TopicName) -> bool:
        return str(topic) in self.list_topics(topic.namespace_name)

    def list_topics(self, namespace: str) -> list[str]:
        """All persistent topics of a namespace, partitions listed individually."""
        return list(self._call("GET", f"persistent/{namespace_rest_path(namespace)}", f"listing the topics of namespace {namespace}",
                               not_found=f"Namespace {namespace} does not exist on {self.base}.", expect=list))

    def internal_stats(self, partition: TopicName) -> dict[str, Any]:
        return self._call("GET", f"{partition.rest_path}/internalStats", f"reading the ledgers of {partition}",
                          not_found=f"Topic {partition} does not exist on {self.base}.", expect="ledgers")

    def partitioned_internal_stats(self, topic: TopicName) -> dict[str, dict[str, Any]]:
        """internalStats of every partition of a partitioned topic in one request."""
        body = self._call("GET", f"{topic.rest_path}/partitioned-internalStats", f"reading the ledgers of {topic}",
                          not_found=f"Topic {topic} does not exist on {self.base}.", expect="partitions")
        found = dict(body["partitions"] or {})
        count = int((body.get("metadata") or {}).get("partitions", 0) or 0)
        for i in range(count):
            name = topic.partition(i)
            if not isinstance(found.get(str(name)), dict) or "ledgers" not in found[str(name)]:
                # A partition the broker could not load just now (it is starting or stopping) is left
                # out of the answer: ask for it alone, so it is retried rather than taken as gone.
                try:
                    found[str(name)] = self.internal_stats(name)
                except TopicNotFound:
                    found.pop(str(name), None)
        return found

    def topic_is_stored(self, topic: TopicName) -> bool:
        """Whether the broker holds this (non-partitioned or partition) topic; never creates it."""
        try:
            self.internal_stats(topic)
        except TopicNotFound:
            return False
        return True

    def create_subscription(self, partition: TopicName, subscription: str, consumed_up_to: EntryPosition) -> None:
        """A durable subscription on one partition whose cursor has consumed everything up to and
        including `consumed_up_to`; an existing subscription is left as it is."""
        try:
            self._call("PUT", f"{partition.rest_path}/subscription/{quote(subscription, safe='')}",
                       f"creating subscription {subscription} on {partition}", json=_cursor_body(partition, consumed_up_to))
        except AdminError as e:
            if "already exists" not in str(e):
                raise

    def mark_consumed(self, partition: TopicName, subscription: str, up_to: EntryPosition) -> None:
        """Move a subscription's cursor so that every entry up to and including `up_to` is consumed."""
        self._call("POST", f"{partition.rest_path}/subscription/{quote(subscription, safe='')}/resetcursor",
                   f"moving subscription {subscription} of {partition} past {up_to}", json=_cursor_body(partition, up_to))

    def max_read_position(self, partition: TopicName) -> str | None:
        """The transaction buffer's max read position ("ledger:entry") while a transaction is open on the
        partition (the broker dispatches nothing past it), else None. Without an open transaction the
        position can lag the newest entries (it is refreshed lazily), so it is not a limit then.
        Raises TransactionsDisabled."""
        body = self._call("GET", f"transactions/transactionBufferStats/{partition.rest_path.split('/', 1)[1]}",
                          f"reading the transaction buffer of {partition}", api="v3",
                          not_found=f"Topic {partition} does not exist on {self.base}.", expect="maxReadPosition")
        return str(body["maxReadPosition"]) if int(body.get("ongoingTxnSize") or 0) > 0 else None

    def stats(self, partition: TopicName) -> dict[str, Any]:
        return self._call("GET", f"{partition.rest_path}/stats", f"reading the stats of {partition}",
                          not_found=f"Topic {partition} does not exist on {self.base}.")

    def partitioned_stats(self, topic: TopicName) -> dict[str, dict[str, Any]]:
        body = self._call("GET", f"{topic.rest_path}/partitioned-stats", f"reading the stats of {topic}",
                          params={"perPartition": "true"}, not_found=f"Topic {topic} does not exist on {self.base}.",
                          expect="partitions")
        return dict(body["partitions"] or {})

    def last_message_id(self, partition: TopicName) -> dict[str, Any]:
        return self._call("GET", f"{partition.rest_path}/lastMessageId", f"reading the last message id of {partition}",
                          not_found=f"Topic {partition} does not exist on {self.base}.")

    def entry_headers(self, partition: TopicName, ledger_id: int, entry_id: int) -> dict[str, str] | None:
        """The broker's metadata headers of one stored entry (chunk, transaction, encryption), or None
        when it is no longer stored. HEAD: the broker reads the entry but only headers travel."""
        try:
            return self._call("HEAD", f"{partition.rest_path}/ledger/{ledger_id}/entry/{entry_id}",
                              f"reading the metadata of entry {ledger_id}:{entry_id} of {partition}", not_found="gone")
        except TopicNotFound:
            return None

    def message_id_by_timestamp(self, partition: TopicName, timestamp_ms: int) -> dict[str, Any]:
        return self._call("GET", f"{partition.rest_path}/messageid/{timestamp_ms}",
                          f"finding the first message of {partition} published at or after {timestamp_ms}",
                          not_found=f"No message of {partition} was published at or after {timestamp_ms}.")

    # -- management (tests, demos) ----------------------------------------------------------
    def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        self._call("PUT", f"{topic.rest_path}/partitions", f"creating {topic} with {partitions} partitions", json=partitions)

    def update_partitions(self, topic: TopicName, partitions: int) -> None:
        self._call("POST", f"{topic.rest_path}/partitions", f"raising {topic} to {partitions} partitions", json=partitions)

    def create_topic(self, topic: TopicName) -> None:
        self._call("PUT", topic.rest_path, f"creating {topic}")

    def delete_topic(self, topic: TopicName, partitioned: bool) -> None:
        path = f"{topic.rest_path}/partitions" if partitioned else topic.rest_path
        self._call("DELETE", path, f"deleting {topic}", params={"force": "true"})

    # -- dispatch-rate policies -------------------------------------------------------------
    def dispatch_rate(self, topic: TopicName, applied: bool = True) -> dict[str, Any] | None:
        return self._call("GET", f"{topic.rest_path}/dispatchRate", f"reading the dispatch rate of {topic}",
                          params={"applied": str(applied).lower()}, not_found=f"Topic {topic} does not exist on {self.base}.")

    def subscription_dispatch_rate(self, topic: TopicName, applied: bool = True) -> dict[str, Any] | None:
        return self._call("GET", f"{topic.rest_path}/subscriptionDispatchRate", f"reading the subscription dispatch rate of {topic}",
                          params={"applied": str(applied).lower()}, not_found=f"Topic {topic} does not exist on {self.base}.")

    def set_dispatch_rate(self, topic: TopicName, rate: dict[str, Any]) -> None:
        self._call("POST", f"{topic.rest_path}/dispatchRate", f"setting the dispatch rate of {topic}", json=_full_rate(rate))

    def set_subscription_dispatch_rate(self, topic: TopicName, rate: dict[str, Any]) -> None:
        self._call("POST", f"{topic.rest_path}/subscriptionDispatchRate", f"setting the subscription dispatch rate of {topic}", json=_full_rate(rate))

    def remove_dispatch_rate(self, topic: TopicName) -> None:
        self._call("DELETE", f"{topic.rest_path}/dispatchRate", f"removing the dispatch rate of {topic}")

    def set_retention(self, topic: TopicName, minutes: int, size_mb: int) -> None:
        self._call("POST", f"{topic.rest_path}/retention", f"setting the retention of {topic}",
                   json={"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb})

    def trim_topic(self, partition: TopicName) -> None:
        """Ask the broker to delete ledgers that retention no longer keeps (closed ledgers only)."""
        self._call("POST", f"{partition.rest_path}/trim", f"trimming {partition}")

    def unload_topic(self, topic: TopicName) -> None:
        self._call("PUT", f"{topic.rest_path}/unload", f"unloading {topic}")


def _cursor_body(partition: TopicName, consumed_up_to: EntryPosition) -> dict[str, int]:
    """The broker places a cursor's read position at the given id (mark-delete just before it), so
    the entry after the last consumed one is sent; past a ledger's end the broker moves on itself."""
    if consumed_up_to == BEFORE_EARLIEST:
        return {"ledgerId": -1, "entryId": -1, "partitionIndex": partition.partition_index}
    return {"ledgerId": consumed_up_to.ledger_id, "entryId": consumed_up_to.entry_id + 1, "partitionIndex": partition.partition_index}


def _full_rate(rate: dict[str, Any]) -> dict[str, Any]:
    """The broker wants all four fields; missing ones mean 'no limit', 1 s, absolute."""
    return {
        "dispatchThrottlingRateInMsg": int(rate.get("dispatchThrottlingRateInMsg", -1)),
        "dispatchThrottlingRateInByte": int(rate.get("dispatchThrottlingRateInByte", -1)),
        "relativeToPublishRate": bool(rate.get("relativeToPublishRate", False)),
        "ratePeriodInSecond": int(rate.get("ratePeriodInSecond", 1)),
    }
