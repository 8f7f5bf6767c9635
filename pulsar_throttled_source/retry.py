"""The one retry policy for talking to a broker that may be away for a while (a restart, a topic
whose ownership moves between brokers): the admin API's lookups (planning on the driver, entry
lookups in read tasks) and read tasks opening their readers and asking them whether messages are
left all follow it.

- What is transient: connection errors and timeouts, HTTP 5xx, and what a broker answers while
  a topic's ownership moves (307 to the new owner, 412/503 naming the move); for the Pulsar
  client, the errors of an unreachable or not-yet-ready broker (`TRANSIENT_CLIENT_ERRORS`).
- How long: one budget per outage (`Outage`): adminRetryTimeoutMs for admin lookups, counted from
  the first failure and shared by every call made until the API answers again; pollTimeoutMs
  for a reader's calls to the broker, counted from the first attempt.
- Backoff: exponential from 0.5 s, doubling up to 5 s, never past the budget's end.

Built on tenacity; callers supply what to log (never a secret) and what to raise on giving up.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

import tenacity

T = TypeVar("T")

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0
_BACKOFF = tenacity.wait_exponential(multiplier=FIRST_DELAY_S, exp_base=2, max=MAX_DELAY_S)

# -- what is transient -------------------------------------------------------------------------
# Only lookups are retried: a management call (PUT/POST/DELETE) may have been applied before it failed.
RETRIED_METHODS = ("GET", "HEAD")
# What a Pulsar broker answers while a topic's ownership moves (bundle unload, load shedding, restarts).
OWNERSHIP_MOVING_STATUSES = (307, 412, 503)
OWNERSHIP_MOVING = re.compile(r"owner|unload|not ?ready|ServiceUnitNotReady|not served|temporarily unavailable"
                              r"|being (?:loaded|closed|fenced|transferred)", re.IGNORECASE)
# Pulsar client errors of a broker that is unreachable, restarting or not serving the topic yet.
TRANSIENT_CLIENT_ERRORS = ("ConnectError", "Timeout", "ServiceUnitNotReady", "LookupError", "NotConnected",
                           "TooManyLookupRequestException", "BrokerMetadataError", "BrokerPersistenceError")


def ownership_moving(status: int, method: str, body: str) -> bool:
    """Whether an HTTP answer says the topic is moving to another broker. A HEAD answer has no body
    to give its reason: 307/412/503 there is taken as a move."""
    return status in OWNERSHIP_MOVING_STATUSES and (method == "HEAD" or bool(OWNERSHIP_MOVING.search(body)))


def http_status_transient(status: int, method: str, body: str) -> bool:
    """A 5xx or an ownership move: the same request may succeed later."""
    return status >= 500 or ownership_moving(status, method, body)


def admin_failure_retried(method: str, budget_s: float, answered: bool, from_broker: bool) -> bool:
    """Whether a transient admin failure is retried. Only once the API has answered at least once (a
    wrong admin.url fails at the first request), unless the failure is a broker's own "the topic is
    moving" answer (the URL is right) or the caller knows the URL is good (`answered`)."""
    return budget_s > 0 and method in RETRIED_METHODS and (answered or from_broker)


def client_error_transient(error: BaseException) -> bool:
    """Whether a Pulsar client error is one of an unreachable or not-yet-ready broker."""
    import pulsar  # executors only: the driver never opens readers

    return isinstance(error, tuple(getattr(pulsar, name) for name in TRANSIENT_CLIENT_ERRORS))


# -- how long ------------------------------------------------------------------------------------
class Outage:
    """One outage's retry budget: it starts at the first failure (or at once, `from_now`) and ends at
    the next answer, so every call made during one outage shares it."""

    def __init__(self, budget_s: float, *, from_now: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget_s = budget_s
        self._clock = clock
        self.since: float | None = clock() if from_now else None

    def failed(self) -> None:
        if self.since is None:
            self.since = self._clock()

    def left_s(self) -> float:
        return self.budget_s if self.since is None else self.since + self.budget_s - self._clock()

    def ended(self) -> float | None:
        """The outage is over (an answer came): how long it lasted, None when there was none."""
        since, self.since = self.since, None
        return None if since is None else self._clock() - since


class GaveUp(Exception):
    """The budget ran out while the failures went on; `last` is the last failure."""

    def __init__(self, last: BaseException, budget_s: float) -> None:
        super().__init__(f"{last} (gave up after {budget_s:.0f} s)")
        self.last = last
        self.budget_s = budget_s


# -- the loop ------------------------------------------------------------------------------------
def call_with_retries(attempt: Callable[[], T], outage: Outage, transient: Callable[[BaseException], bool],
                      on_retry: Callable[[BaseException, int, float], Any], sleep: Callable[[float], Any] = time.sleep) -> T:
    """`attempt()` until it returns. A failure `transient` accepts is retried with backoff while the
    outage's budget lasts (`on_retry(failure, retry number, delay)` before each wait); then GaveUp.
    Any other failure is raised as it is, at once."""

    def wait(state: tenacity.RetryCallState) -> float:
        return max(0.0, min(_BACKOFF(state), outage.left_s()))

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(transient),
        after=lambda state: outage.failed(),  # the budget runs from the outage's first failure
        stop=lambda state: outage.left_s() <= 0,
        wait=wait,
        before_sleep=lambda state: on_retry(_failure(state), state.attempt_number, _delay(state)),
        sleep=sleep,
        reraise=False,
    )
    try:
        return retrying(attempt)
    except tenacity.RetryError as e:
        raise GaveUp(_failure_of(e.last_attempt), outage.budget_s) from None


def _delay(state: tenacity.RetryCallState) -> float:
    assert state.next_action is not None
    return state.next_action.sleep


def _failure(state: tenacity.RetryCallState) -> BaseException:
    assert state.outcome is not None
    return _failure_of(state.outcome)


def _failure_of(outcome: Any) -> BaseException:
    error = outcome.exception()
    assert error is not None
    return error
