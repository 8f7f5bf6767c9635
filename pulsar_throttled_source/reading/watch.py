"""Executor side: a call to the broker that may never answer because the topic was deleted, watched:
ended by PartitionDeleted once the range's entries are all gone, instead of after the client's and
the source's own retries (tens of seconds to pollTimeoutMs)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..retry import client_error_transient

log = logging.getLogger(__name__)

GONE_CHECK_S = 1.0  # how often a call the broker is slow to answer looks whether the range's entries are gone


def unless_gone(call: Callable[[], Any], gone: Callable[[], bool] | None, watch: bool = True) -> Callable[[], Any]:
    """`call`, ended by PartitionDeleted once the range's entries are all gone (the topic was deleted).
    While the topic is being deleted the broker answers its lookups with "temporarily unavailable"
    and the client retries them itself until its operation timeout (30 s by default), so a `watch`ed
    call runs in a thread of its own and is looked at once a second, not only when it fails (for
    opening a reader, once per task; a call made per message is only checked when it fails)."""
    if gone is None:
        return call
    from .read_errors import PartitionDeleted

    def is_gone() -> bool:
        try:
            return gone()
        except Exception as e:  # the admin API is unreachable too (a broker restart): not known to be gone
            log.debug("Could not tell whether the range's entries are gone: %s", e)
            return False

    def checked() -> Any:
        try:
            return call()
        except Exception as e:
            if may_be_deleted(e) and is_gone():
                raise PartitionDeleted(PartitionDeleted.WHY) from e
            raise
    if not watch:
        return checked

    def watched() -> Any:
        outcome: dict[str, Any] = {}
        finished = threading.Event()

        def run() -> None:
            try:
                outcome["value"] = call()
            except BaseException as e:  # handed to the caller's thread
                outcome["error"] = e
            finally:
                finished.set()

        threading.Thread(target=run, name="pulsar-call", daemon=True).start()
        while not finished.wait(GONE_CHECK_S):
            if is_gone():
                threading.Thread(target=_close_when_done, args=(finished, outcome), daemon=True).start()
                raise PartitionDeleted(PartitionDeleted.WHY)
        if "error" in outcome:
            error = outcome["error"]
            if may_be_deleted(error) and is_gone():
                raise PartitionDeleted(PartitionDeleted.WHY) from error
            raise error
        return outcome["value"]
    return watched


def may_be_deleted(error: BaseException) -> bool:
    """A client error a deleted topic may cause: those of a broker that is not ready for the topic
    (retried), and TopicNotFound (a reader opened once the partitioned topic's metadata is gone)."""
    import pulsar

    return client_error_transient(error) or isinstance(error, pulsar.TopicNotFound)


def _close_when_done(finished: threading.Event, outcome: dict[str, Any]) -> None:
    """A reader the abandoned call still opens is closed, not leaked."""
    finished.wait()
    close = getattr(outcome.get("value"), "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # the topic is gone: closing may fail too
            pass
