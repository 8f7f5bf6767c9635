"""pulsar.producer.*: the producer's settings, passed on to `Client.create_producer` as given.

Each name is checked against create_producer's parameters (any spelling the other pass-through prefixes
accept: batchingEnabled, batching_enabled, batching.enabled) and its string converted to the parameter's
type, enums by their member names (compressionType=LZ4), so a typo fails at the write's start rather
than in a task. What the sink decides itself is refused by name; `messageRoutingMode` is applied by the
sink's own routing (writing.routing), since the sink sends to one producer per partition.

The sink's defaults, each replaced by a given setting and never overriding one: batching on and a full
queue blocking the task (the Java client's batching default; a task waits rather than fails). Under
deliveryGuarantee=effectivelyOnce batches are cut at fixed rows (writing.batch_cuts; ProducerSettings.effectively_once):
a setting that would cut them elsewhere is refused by name, batchingEnabled=false or chunkingEnabled=true send unbatched.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..options.passthrough import short_name
from .batch_cuts import NO_PUBLISH_DELAY_MS, CutRule

PRODUCER = "pulsar.producer."
SINK_DEFAULTS = (("batching_enabled", True), ("block_if_queue_full", True))
ROUTING_MODES = ("RoundRobinDistribution", "UseSinglePartition")
# Arguments the sink gives itself, or that are not strings: refused with why.
_RESERVED = {
    "topic": "the topic comes from option 'topic' or a topic column",
    "schema": "the sink declares the topic's own schema (from the admin API) and encodes payloads with it",
    "properties": "producer properties are not supported by the sink yet",
    "encryption_key": "end-to-end encryption is not supported by the sink yet",
    "crypto_key_reader": "end-to-end encryption is not supported by the sink yet",
    "message_router": "a router is code, not an option; a `partition` column chooses partitions per row",
    "producer_name": "every task writes with a producer of its own, and two of one name on a partition fence each other",
    "initial_sequence_id": "sequence ids are the producer's own (each task has a producer of its own)",
}


@dataclass(frozen=True)
class ProducerSettings:
    """create_producer's keyword arguments (the given ones and the sink's defaults) and how rows without a key
    or a partition are spread: round robin, or one partition per task (UseSinglePartition)."""

    kwargs: tuple[tuple[str, Any], ...]
    routing_mode: str = "RoundRobinDistribution"
    given: frozenset[str] = frozenset()  # the arguments set by pulsar.producer.* (the rest are the sink's defaults)
    cuts: CutRule | None = None  # effectivelyOnce: where batches are cut (writing.batch_cuts)

    @property
    def send_timeout_s(self) -> float:
        """pulsar.producer.sendTimeoutMillis in seconds (pulsar-client's default: 30 s; 0: none): what both senders pace
        their sends by (writing.confirmations, the native sender's pns_task_pace)."""
        return float(dict(self.kwargs).get("send_timeout_millis", 30_000)) / 1000

    @property
    def confirmation_wait_s(self) -> float | None:
        """How long a task waits for its sends' confirmations after the flush: the send timeout plus a margin (None:
        without limit, as sends never time out)."""
        timeout_s = self.send_timeout_s
        return None if not timeout_s else timeout_s + 30

    def effectively_once(self) -> ProducerSettings:
        """The settings of an effectively-once write: batches cut at fixed rows (writing.batch_cuts), every
        batchingMaxMessages rows (default 1000) or once their payloads reach batchingMaxAllowedSizeInBytes (default
        128 KiB), never by time. A given setting that would cut them elsewhere is refused, naming it; batchingEnabled=false
        (or chunkingEnabled=true, which needs it) sends unbatched, a batch of one row."""
        kwargs, given = dict(self.kwargs), self.given
        if ("batching_enabled" in given and not kwargs["batching_enabled"]) or (
                kwargs.get("chunking_enabled") and "batching_enabled" not in given):
            kwargs |= {"batching_enabled": False}
            return ProducerSettings(tuple(sorted(kwargs.items())), self.routing_mode, given, CutRule(1, 1))
        rule = CutRule(int(kwargs.get("batching_max_messages", DEFAULT_MAX_MESSAGES)),
                       int(kwargs.get("batching_max_allowed_size_in_bytes", DEFAULT_MAX_BYTES)))
        error = _cuts_conflict(kwargs, given, rule)
        if error:
            raise ValueError(f"{error}. deliveryGuarantee=effectivelyOnce cuts batches at fixed rows (a retry must cut them "
                             "where the first attempt did); remove the option, or write with deliveryGuarantee=atLeastOnce.")
        kwargs |= {"batching_enabled": True, "batching_max_messages": rule.max_messages,
                   "batching_max_allowed_size_in_bytes": BYTES_NEVER_CUT_BY_CLIENT, "batching_max_publish_delay_ms": NO_PUBLISH_DELAY_MS}
        return ProducerSettings(tuple(sorted(kwargs.items())), self.routing_mode, given, rule)


DEFAULT_MAX_MESSAGES, DEFAULT_MAX_BYTES = 1000, 128 * 1024  # pulsar-client's batching defaults
# The client's own byte cut comes before the row that would pass its limit (it depends on that row's size, which a
# retry may not share when that row failed): off, the sender cuts after the row that reaches the limit instead.
BYTES_NEVER_CUT_BY_CLIENT = 1 << 40


def _cuts_conflict(kwargs: dict[str, Any], given: frozenset[str], rule: CutRule) -> str:
    """Why a given setting cannot be used with effectivelyOnce's cuts ('' when none)."""
    if "batching_max_publish_delay_ms" in given:
        return "Option 'pulsar.producer.batchingMaxPublishDelayMs' cannot be used with deliveryGuarantee=effectivelyOnce: it cuts batches by time"
    if "batching_type" in given and getattr(kwargs["batching_type"], "name", str(kwargs["batching_type"])) != "Default":
        return ("Option 'pulsar.producer.batchingType' cannot be KeyBased with deliveryGuarantee=effectivelyOnce: it sends a batch "
                "per key, out of the rows' order")
    if "block_if_queue_full" in given and not kwargs["block_if_queue_full"]:
        return ("Option 'pulsar.producer.blockIfQueueFull'=false cannot be used with deliveryGuarantee=effectivelyOnce: a full "
                "queue sends the open batch early")
    if rule.max_messages < 1 or rule.max_bytes < 1:
        name = "batchingMaxMessages" if rule.max_messages < 1 else "batchingMaxAllowedSizeInBytes"
        return f"Option 'pulsar.producer.{name}' must be at least 1 with deliveryGuarantee=effectivelyOnce"
    pending = int(kwargs.get("max_pending_messages", DEFAULT_MAX_MESSAGES))
    if 0 < pending < rule.max_messages:
        return (f"Option 'pulsar.producer.maxPendingMessages'={pending} is below the batch size ({rule.max_messages}, option "
                "'pulsar.producer.batchingMaxMessages') with deliveryGuarantee=effectivelyOnce: a batch must fit the producer's queue")
    return ""


def producer_settings(opts: Mapping[str, str]) -> ProducerSettings:
    import pulsar

    params = {p.name.replace("_", "").lower(): p for p in inspect.signature(pulsar.Client.create_producer).parameters.values()
              if p.name != "self" and p.kind is not p.VAR_KEYWORD}
    kwargs: dict[str, Any] = {}
    routing = ROUTING_MODES[0]
    for key, raw in sorted(opts.items()):
        if not key.startswith(PRODUCER):
            continue
        param = params.get(short_name(key, PRODUCER))
        if param is None:
            allowed = ", ".join(PRODUCER + camel(p.name) for _, p in sorted(params.items()) if p.name not in _RESERVED)
            raise ValueError(f"Option '{key}' is not a setting of pulsar-client's producer; allowed: {allowed}.")
        if param.name in _RESERVED:
            raise ValueError(f"Option '{key}' cannot be set: {_RESERVED[param.name]}.")
        if param.name == "message_routing_mode":
            routing = _routing_mode(key, raw)
            continue
        kwargs[param.name] = _converted(key, str(raw).strip(), param)
    given = frozenset(kwargs)
    for name, value in SINK_DEFAULTS:
        kwargs.setdefault(name, value)
    return ProducerSettings(tuple(sorted(kwargs.items())), routing, given)


def camel(name: str) -> str:
    """A create_producer argument as the Java client's settings are spelt (batching_enabled: batchingEnabled)."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _routing_mode(key: str, raw: str) -> str:
    for mode in ROUTING_MODES:
        if mode.lower() == str(raw).strip().lower() or (mode == "UseSinglePartition" and str(raw).strip().lower() == "singlepartition"):
            return mode
    raise ValueError(f"Option '{key}': '{raw}' is not allowed; expected {' or '.join(ROUTING_MODES)} (how rows without a key or a "
                     "partition column are spread; a key always chooses its partition as a Java producer does).")


def _converted(key: str, text: str, param: inspect.Parameter) -> Any:
    default = param.default
    members = getattr(type(default), "__members__", None)
    if isinstance(default, enum.Enum) or (members and not isinstance(default, bool | int | float | str)):
        for name, member in (members or {}).items():
            if name.lower() == text.lower():
                return member
        raise ValueError(f"Option '{key}': '{text}' is not allowed; expected one of {', '.join(members or {})}.")
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Option '{key}': '{text}' is not allowed; expected true or false.")
        return text.lower() == "true"
    kind = type(default) if default is not None else str
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"Option '{key}': '{text}' is not {'an integer' if kind is int else 'a number'}.") from None
    if not text:
        raise ValueError(f"Option '{key}': a value is required.")
    return text
