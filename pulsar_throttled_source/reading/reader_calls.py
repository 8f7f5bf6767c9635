"""Executor side: the reader calls that ask the broker, on either read path: opening a reader on the worker's
shared client (client_cache) and asking whether messages are left, each retried within pollTimeoutMs while the
broker is unreachable or a topic's ownership moves, and failing with what to check; closing a reader."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..credentials import scrub
from ..read_task import ClientConfig, PartitionRange
from ..retry import GaveUp, Outage, call_with_retries, client_error_transient
from .client_cache import client_for, drop_client, drop_native_client, native_client_for, take_parked_native_reader
from .receiver_queue import receiver_queue_for
from .watch import unless_gone

if TYPE_CHECKING:
    from .native_reader import NativeReader

log = logging.getLogger(__name__)


def close_reader(reader: Any, failed: bool) -> None:
    """Close a reader of either path; after a failed read (broker gone longer than pollTimeoutMs, a broken
    connection) closing may fail too, and the caller drops the client anyway."""
    try:
        reader.close()
    except Exception:
        if not failed:
            raise


def open_reader(part: PartitionRange, start_id: Any, gone: Callable[[], bool] | None = None, inclusive: bool = False) -> Any:
    """Open a reader on the task's partition at `start_id` (`inclusive`: delivering that entry, else
    from the one after it). While the broker is unreachable (e.g.
    restarting) retry on a fresh client for up to pollTimeoutMs (the policy in `retry`), so a task
    planned just before a broker restart waits for it instead of failing."""
    import pulsar

    cfg = part.config
    kwargs = {"receiver_queue_size": receiver_queue_for(part, inclusive), **dict(cfg.reader_kwargs)}
    if inclusive:
        kwargs["start_message_id_inclusive"] = True
    if cfg.private_key_path:
        kwargs["crypto_key_reader"] = pulsar.CryptoKeyReader(cfg.public_key_path or "", cfg.private_key_path)
    if cfg.private_key_path or cfg.crypto_failure_action != "fail":  # discard/consume apply without a key too
        kwargs["crypto_failure_action"] = getattr(pulsar.ConsumerCryptoFailureAction, cfg.crypto_failure_action.upper())

    return _open_with_retries(part, lambda: client_for(cfg).create_reader(part.partition, start_id, **kwargs), drop_client, gone)


def open_native_reader(part: PartitionRange, start_id: bytes | None, gone: Callable[[], bool] | None = None,
                       inclusive: bool = False) -> NativeReader:
    """open_reader for the native read path: `start_id` serialized (None: the earliest)."""
    from .native_library import native_library
    from .native_reader import NativeReader

    cfg = part.config
    parked = take_parked_native_reader(part)
    if parked is not None:
        return parked

    def attempt() -> NativeReader:
        client = native_client_for(cfg)
        if client.loaded is not native_library():  # made by another build of the library (tests load several)
            drop_native_client(cfg)
            client = native_client_for(cfg)
        assert client.handle is not None, "the cache holds no closed client"
        return NativeReader.open(client.loaded, client.handle, cfg, part.partition, start_id,
                                 receiver_queue_for(part, inclusive), inclusive)

    return _open_with_retries(part, attempt, drop_native_client, gone)


def _open_with_retries(part: PartitionRange, open_once: Callable[[], Any], drop: Callable[[ClientConfig], None],
                       gone: Callable[[], bool] | None) -> Any:
    from .read_errors import PartitionDeleted

    cfg = part.config

    def attempt() -> Any:
        try:
            return open_once()
        except Exception:
            drop(cfg)  # the next attempt, or Spark's retry of this task, starts from a fresh client
            raise

    def log_retry(error: BaseException, attempt: int, delay: float) -> None:
        log.warning("Cannot open a reader on %s at %s (%s); retry %d in %.1f s (waiting up to pollTimeoutMs=%d ms)",
                    part.partition, cfg.service_url, type(error).__name__, attempt, delay, cfg.poll_timeout_ms)

    gave_up = ""
    try:
        return call_with_retries(unless_gone(attempt, gone), Outage(cfg.poll_timeout_ms / 1000.0, from_now=True),
                                 client_error_transient, log_retry)
    except PartitionDeleted:
        raise
    except GaveUp as e:
        error: BaseException = e.last
        gave_up = f" Gave up after retrying for {cfg.poll_timeout_ms} ms (option 'pollTimeoutMs')."
    except Exception as e:
        error = e
    import pulsar

    if isinstance(error, pulsar.AuthorizationError):
        raise RuntimeError(f"Cannot open a reader on {part.partition} at {cfg.service_url}: the role of the query's credentials "
                           "may not read it. A reader needs 'consume' on the topic or its namespace (pulsar-admin namespaces "
                           "grant-permission --role <role> --actions consume <tenant>/<namespace>).") from None
    raise RuntimeError(f"Cannot open a reader on {part.partition} at {cfg.service_url}: {scrub(str(error), cfg.credentials)}. "
                       f"Check option 'service.url' (the broker's pulsar://host:port or pulsar+ssl://host:port){_tls_hint(cfg)} and, "
                       "if the broker requires authentication, 'pulsar.client.authPluginClassName' and "
                       f"'pulsar.client.authParams'.{gave_up}") from None


def _tls_hint(cfg: ClientConfig) -> str:
    """For a TLS service URL: the options that decide whether its certificate is trusted."""
    if not cfg.service_url.startswith("pulsar+ssl://"):
        return ""
    return (", 'pulsar.client.tlsTrustCertsFilePath' (the CA that signed the broker's certificate; "
            "'pulsar.client.tlsValidateHostname=false' if the certificate does not name the host)")


def has_message_available(reader: Any, part: PartitionRange, gone: Callable[[], bool] | None = None) -> bool:
    """`reader.has_message_available()`, which asks the broker for the partition's last message id.
    While the topic's ownership moves (an unload, load shedding, a restart) the broker answers it
    with errors such as BrokerMetadataError ("Consumer not found") until the reader has reconnected
    by itself, so those are retried within pollTimeoutMs, as opening a reader is."""
    cfg = part.config

    def log_retry(error: BaseException, attempt: int, delay: float) -> None:
        log.warning("Reading %s: the broker did not say whether messages are left (%s; its ownership may be moving); "
                    "retry %d in %.1f s (waiting up to pollTimeoutMs=%d ms)", part.partition, type(error).__name__,
                    attempt, delay, cfg.poll_timeout_ms)

    try:
        return bool(call_with_retries(unless_gone(reader.has_message_available, gone, watch=False),
                                      Outage(cfg.poll_timeout_ms / 1000.0, from_now=True), client_error_transient, log_retry))
    except GaveUp as e:
        raise RuntimeError(f"Reading {part.partition}: the broker at {cfg.service_url} did not say whether messages are left "
                           f"({type(e.last).__name__}: {e.last}) for pollTimeoutMs={cfg.poll_timeout_ms} ms of retries. "
                           "Check the broker's health, or raise 'pollTimeoutMs'.") from None
