"""Executor side: what a read task reports. Its errors (a read that timed out, planned entries
deleted before the read, an encrypted topic without its key, a transaction that changed under
the plan) and the warnings for what it read past (lost entries under failOnDataLoss=false,
incomplete chunked messages), and the one scrub every error of a read task goes through, on either read path
(scrub_error: no secret of the credentials, no URL's password)."""

from __future__ import annotations

import logging
import time

from ..credentials import scrub
from ..data_loss_error import DataLossError as DataLossError  # where read tasks have always raised it from
from ..positions import Position
from ..read_task import ClientConfig, PartitionRange
from .range_entries import EncryptedEntryError

log = logging.getLogger(__name__)


class ReadTimeout(RuntimeError):
    pass


class PartitionDeleted(RuntimeError):
    """Every planned entry of the range is gone (the topic was deleted) while the task waited on the
    broker: stop retrying and report them (failOnDataLoss), not wait out pollTimeoutMs."""

    WHY = "the partition was deleted while it was read"


def report_missing(part: PartitionRange, missing: list[Position], why: str | None = None) -> None:
    """Planned entries deleted between planning and reading follow failOnDataLoss, as in planning."""
    if not missing:
        return
    why = why or "deleted after planning: retention, truncation or a deleted topic"
    lost = f"{len(missing)} planned entries of {part.partition} ({_span(missing)}) are no longer stored"
    if part.config.fail_on_data_loss:
        raise DataLossError(f"Data loss: {lost} ({why}). Set failOnDataLoss=false to continue without them.")
    log.warning("Data loss: %s; continuing without them because failOnDataLoss=false.", lost)


def _span(positions: list[Position]) -> str:
    first, last = positions[0], positions[-1]
    return f"{first[0]}:{first[1]}" if first == last else f"{first[0]}:{first[1]} .. {last[0]}:{last[1]}"


def gave_up_waiting(part: PartitionRange, owed: dict[Position, str], since: float) -> bool:
    """After incompleteChunkWaitMs, skip chunked messages whose last chunks never came."""
    if time.monotonic() - since < part.config.incomplete_chunk_wait_ms / 1000.0:
        return False
    for (ledger, entry), uuid in owed.items():
        log.warning("Skipping an incomplete chunked message of %s: it starts at entry %d:%d (producer uuid %s) but its "
                    "remaining chunks did not arrive within incompleteChunkWaitMs=%d ms; its producer most likely died "
                    "while sending it.", part.partition, ledger, entry, uuid, part.config.incomplete_chunk_wait_ms)
    return True


def read_timeout(part: PartitionRange, last: Position, held_back_at: Position | None = None) -> ReadTimeout:
    if held_back_at is not None:
        return ReadTimeout(
            f"Reading {part.partition}: the broker still holds back entry {held_back_at[0]}:{held_back_at[1]} after "
            f"pollTimeoutMs={part.config.poll_timeout_ms} ms: it lies past the topic's max read position, so the broker "
            "does not dispatch it. Likely causes: a transaction that stays open (it is dispatched once committed), or the "
            "topic's transaction buffer not ready on the broker. Check `pulsar-admin transactions transaction-buffer-stats` "
            "for the topic, or raise 'pollTimeoutMs'.")
    return ReadTimeout(
        f"Reading {part.partition}: the broker reports messages to dispatch, but none arrived within "
        f"pollTimeoutMs={part.config.poll_timeout_ms} ms after entry {last[0]}:{last[1]} (the planned range ends at "
        f"{part.end}). Likely causes: a broker-side dispatch-rate limit far below this range's size, an overloaded "
        "broker or bookie, or an encrypted topic read without its key. Raise 'pollTimeoutMs', check the topic's "
        "dispatch rate and the broker's health.")


def encrypted_without_key(part: PartitionRange, error: EncryptedEntryError) -> RuntimeError:
    return RuntimeError(f"Topic {part.partition} is end-to-end encrypted: {error} and no key was given. Set option "
                        "'encryption.privateKeyPath' to the PEM private key (readable on every executor), or "
                        "cryptoFailureAction=discard to skip what cannot be decrypted.")



def scrub_error(error: BaseException, cfg: ClientConfig) -> None:
    """Hide in `error` and the errors chained to it (Spark shows the whole traceback: driver log, the query's error,
    the event log) every secret of the task's credentials (the client's and the admin API's) and every URL password.
    Raised again by the caller: its type and traceback stay what they were."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        clean = scrub(text, cfg.credentials, cfg.admin.credentials)
        if clean != text:
            current.args = (clean,)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
