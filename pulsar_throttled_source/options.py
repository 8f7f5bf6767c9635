"""Parse and validate the source's options into one frozen dataclass.

Spark hands options over lowercased and as strings. Every check names the option
and what is allowed, so a typo fails the query at start, not hours later.
Secrets (auth parameters, tokens) are kept out of repr and error messages.
"""

from __future__ import annotations

import inspect
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from .positions import EntryPosition
from .throttling.model import QuotaConfig, Rate
from .topics import TopicName

QuotaSource = Literal["options", "broker", "both"]

# Documented options: name -> (default shown in the README, meaning). The README's option
# table is checked against this dict by a test, so it is the one list of what exists.
OPTIONS: dict[str, tuple[str, str]] = {
    "service.url": ("pulsar://localhost:6650", "Pulsar service URL the executors read from."),
    "admin.url": ("http://localhost:8080", "Pulsar admin (HTTP) URL used for planning: partitions, ledgers, stats, policies."),
    "topic": ("", "One topic to read (partitioned or not). Exactly one of topic, topics, topicsPattern."),
    "topics": ("", "Comma-separated topics to read."),
    "topicsPattern": ("", "Regex over the persistent topics of one namespace, e.g. persistent://public/default/orders-.*; new matching topics are picked up."),
    "subscription": ("pulsar-throttled", "The subscription name this query reads as; subscription quotas are keyed on it."),
    "startingOffsets": ("latest", "earliest, latest, or JSON {partition: {\"ledgerId\":L,\"entryId\":E} | \"earliest\" | \"latest\"}; a position is the first entry to read."),
    "startingTime": ("", "Start at the first message published at or after this epoch-ms time (exclusive with startingOffsets)."),
    "failOnDataLoss": ("true", "Fail when data between the checkpoint and the oldest stored entry is gone (retention, deleted topic); false logs a warning and continues."),
    "durableSubscription": ("false", "true: a durable subscription named by 'subscription' (required then) follows the query's commits, so retention keeps what the query has not read; remove it when retiring the query (pulsar-admin topics unsubscribe)."),
    "pollTimeoutMs": ("120000", "How long a read task waits for an entry that must exist before failing."),
    "incompleteChunkWaitMs": ("60000", "How long a read task waits for the rest of a chunked message whose first chunk its range holds; then the message is skipped with a WARN naming it (its producer died mid-message)."),
    "adminTimeoutMs": ("30000", "Timeout of each admin API request."),
    "adminRetryTimeoutMs": ("60000", "How long planning retries admin lookups that fail with a connection error, timeout or HTTP 5xx (e.g. a broker restart), with exponential backoff, once the API has answered at least once; 0: no retries."),
    "metadataRefreshIntervalMs": ("1000", "How long planning reuses partition lists and ledger layouts: the bound on how late new data is seen, and what keeps idle polls off the broker."),
    "maxEntriesPerTrigger": ("", "Cap on entries per micro-batch across all partitions (Spark's ReadMaxRows), on top of quotas."),
    "maxRowsPerArrowBatch": ("10000", "Rows per Arrow record batch produced by a read task (bounds task memory)."),
    "maxEntriesPerTask": ("0", "Split a partition's range into tasks of at most this many entries (0: one task per partition)."),
    "dispatchThrottlingRateInMsg": ("-1", "Source-wide message quota per period, shared by all partitions of the query (-1: none)."),
    "dispatchThrottlingRateInByte": ("-1", "Source-wide byte quota per period (-1: none)."),
    "dispatchThrottlingRatePerTopicInMsg": ("-1", "Per-partition topic quota in messages per period, shared by every query on this host (-1: none)."),
    "dispatchThrottlingRatePerTopicInByte": ("-1", "Per-partition topic quota in bytes per period (-1: none)."),
    "dispatchThrottlingRatePerSubscriptionInMsg": ("-1", "Per-partition quota of this subscription in messages per period (-1: none)."),
    "dispatchThrottlingRatePerSubscriptionInByte": ("-1", "Per-partition quota of this subscription in bytes per period (-1: none)."),
    "ratePeriodInSecond": ("1", "Length of a quota window in seconds; windows are aligned to the epoch."),
    "throttlingMode": ("precise", "precise (messages estimated from messages per entry) or batch (one entry counts as one message)."),
    "preciseDispatcherFlowControl": ("", "Pulsar alias: true selects throttlingMode=precise."),
    "dispatchThrottlingOnBatchMessageEnabled": ("", "Pulsar alias: true selects throttlingMode=batch."),
    "relativeToPublishRate": ("false", "Quotas are added to each partition's current publish rate (PIP-52)."),
    "dispatchThrottlingOnNonBacklogConsumerEnabled": ("true", "false turns throttling off for a partition whose backlog is at most nonBacklogThresholdEntries."),
    "nonBacklogThresholdEntries": ("0", "Backlog (entries) at or under which a partition counts as caught up for auto-off."),
    "quotaSource": ("options", "options, broker (the broker's applied dispatch-rate policies) or both (ANDed)."),
    "policyRefreshIntervalMs": ("30000", "How often broker policies are re-read with quotaSource=broker|both."),
    "quotaStatePath": ("<tmp>/pulsar-throttled-quota.sqlite", "SQLite file holding the shared quota buckets of this host."),
    "encryption.privateKeyPath": ("", "PEM private key (a path readable on every executor) to read end-to-end encrypted topics; without it an encrypted topic fails the query at once, naming it."),
    "encryption.publicKeyPath": ("", "Matching PEM public key path, if your key reader setup needs one (readers only need the private key)."),
    "cryptoFailureAction": ("fail", "When a message cannot be decrypted: fail (the query fails, naming the entry), discard (skipped by the client, with a WARN), or consume (delivered still encrypted)."),
    "pulsar.client.*": ("", "Passed to pulsar.Client (e.g. pulsar.client.operationTimeoutSeconds, pulsar.client.authParams)."),
    "pulsar.reader.*": ("", "Passed to Client.create_reader (e.g. pulsar.reader.receiverQueueSize)."),
    "pulsar.admin.*": ("", "Admin API settings: pulsar.admin.authParams (token:... / file:...), pulsar.admin.tlsTrustCertsFilePath."),
}

PREFIX_OPTIONS = ("pulsar.client.", "pulsar.reader.", "pulsar.admin.")
_BY_LOWER = {name.lower(): name for name in OPTIONS if not name.endswith("*")}

# Client/reader arguments that the source controls itself or that are not strings.
_CLIENT_RESERVED = {"service_url", "authentication", "logger"}
_READER_RESERVED = {"topic", "start_message_id", "reader_listener", "schema", "start_message_id_inclusive", "crypto_key_reader", "crypto_failure_action"}
_AUTH_KEYS = {"authpluginclassname", "authparams", "authtoken"}
_ADMIN_KEYS = {"authpluginclassname", "authparams", "authtoken", "tlstrustcertsfilepath", "tlsallowinsecureconnection"}


def _kwarg_names(func: Any, reserved: set[str]) -> dict[str, tuple[str, Any]]:
    """lowercased-no-underscore name -> (python kwarg, default) for a pulsar-client call."""
    sig = inspect.signature(func)
    return {
        p.name.replace("_", "").lower(): (p.name, p.default)
        for p in sig.parameters.values()
        if p.name != "self" and p.name not in reserved and p.kind is not p.VAR_KEYWORD
    }


class Secret(str):
    """A string that never shows its value in repr or str formatting of containers."""

    def __repr__(self) -> str:
        return "'***'"


@dataclass(frozen=True)
class StartSpec:
    """Where a new query starts: 'earliest', 'latest', a publish time, or per-partition positions."""

    kind: Literal["earliest", "latest", "time", "positions"]
    time_ms: int | None = None
    # partition -> first entry to read (inclusive), or "earliest"/"latest"
    positions: tuple[tuple[str, EntryPosition | str], ...] = ()


@dataclass(frozen=True)
class SourceOptions:
    service_url: str
    admin_url: str
    topics: tuple[TopicName, ...]
    topics_pattern: re.Pattern[str] | None
    pattern_namespace: str | None
    subscription: str
    start: StartSpec
    fail_on_data_loss: bool
    durable_subscription: bool
    poll_timeout_ms: int
    incomplete_chunk_wait_ms: int
    admin_timeout_ms: int
    admin_retry_timeout_ms: int
    metadata_refresh_ms: int
    max_entries_per_trigger: int | None
    max_rows_per_arrow_batch: int
    max_entries_per_task: int
    quota: QuotaConfig
    topic_rate: Rate
    subscription_rate: Rate
    quota_source: QuotaSource
    policy_refresh_ms: int
    quota_state_path: str
    private_key_path: str | None
    public_key_path: str | None
    crypto_failure_action: str
    client_kwargs: tuple[tuple[str, Any], ...] = field(repr=False)
    reader_kwargs: tuple[tuple[str, Any], ...]
    auth_plugin: str | None
    auth_params: Secret | None = field(repr=False)
    admin_auth_token: Secret | None = field(repr=False)
    admin_tls_trust: str | None = None
    admin_tls_insecure: bool = False

    @property
    def admin_tls_verify(self) -> bool | str:
        return False if self.admin_tls_insecure else (self.admin_tls_trust or True)

    @property
    def has_option_quotas(self) -> bool:
        return not (self.quota.source.is_unlimited() and self.topic_rate.is_unlimited() and self.subscription_rate.is_unlimited())

    @property
    def uses_broker_quotas(self) -> bool:
        return self.quota_source in ("broker", "both")

    @property
    def throttled(self) -> bool:
        return self.uses_broker_quotas or (self.quota_source in ("options", "both") and self.has_option_quotas)


def _int(opts: Mapping[str, str], name: str, default: int, *, minimum: int | None = None, allow_minus_one: bool = False,
         what: str = "an integer") -> int:
    raw = opts.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"Option '{name}': '{raw}' is not {what}.") from None
    if allow_minus_one and value == -1:
        return value
    if minimum is not None and value < minimum:
        raise ValueError(f"Option '{name}': {value} is not allowed; expected {what}.")
    return value


def _quota(opts: Mapping[str, str], name: str) -> int:
    return _int(opts, name, -1, minimum=1, allow_minus_one=True, what="a positive integer, or -1 for no limit")


def _bool(opts: Mapping[str, str], name: str, default: bool | None) -> bool | None:
    raw = opts.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected true or false.")


def _durable(opts: Mapping[str, str]) -> bool:
    durable = bool(_bool(opts, "durableSubscription", False))
    if durable and not opts.get("subscription", "").strip():
        raise ValueError("Option 'durableSubscription': a durable subscription needs option 'subscription' set to a name of "
                         "this query's own (e.g. orders-ingest); the default name would be shared by every query.")
    return durable


def _key_path(opts: Mapping[str, str], name: str) -> str | None:
    """A key file path; checked on the driver when it exists there (executors may mount it elsewhere)."""
    value = opts.get(name.lower(), "").strip()
    if not value:
        return None
    if value.startswith("file://"):
        value = value[len("file://"):]
    if "-----BEGIN" in value:
        raise ValueError(f"Option '{name}': expected the path of a PEM file readable on every executor, not the key itself.")
    return value


def _choice(opts: Mapping[str, str], name: str, default: str | None, allowed: tuple[str, ...]) -> str | None:
    raw = opts.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    text = str(raw).strip().lower()
    if text not in allowed:
        raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected one of {', '.join(allowed)}.")
    return text


def _url(opts: Mapping[str, str], name: str, default: str, schemes: tuple[str, ...]) -> str:
    raw = str(opts.get(name.lower(), default)).strip()
    parsed = urlparse(raw)
    try:
        port_ok = parsed.port is None or 0 < parsed.port < 65536
    except ValueError:
        port_ok = False
    if parsed.scheme not in schemes or not parsed.hostname or not port_ok:
        raise ValueError(f"Option '{name}': '{raw}' is not a valid URL; expected {' or '.join(s + '://host:port' for s in schemes)}.")
    return raw.rstrip("/")


def _convert(name: str, raw: str, default: Any) -> Any:
    text = str(raw).strip()
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected true or false.")
        return text.lower() == "true"
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"Option '{name}': '{raw}' is not an integer.") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"Option '{name}': '{raw}' is not a number.") from None
    return text


def _prefixed(opts: Mapping[str, str], prefix: str, allowed: dict[str, tuple[str, Any]], skip: set[str]) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for key, raw in sorted(opts.items()):
        if not key.startswith(prefix):
            continue
        short = key[len(prefix):].replace("_", "").replace(".", "").lower()
        if short in skip:
            continue
        if short not in allowed:
            names = ", ".join(sorted(prefix + k for k in allowed))
            raise ValueError(f"Option '{key}' is not a setting of pulsar-client; allowed: {names}.")
        kwarg, default = allowed[short]
        out.append((kwarg, _convert(key, raw, default)))
    return tuple(out)


def _start_spec(opts: Mapping[str, str]) -> StartSpec:
    raw_offsets = opts.get("startingoffsets")
    raw_time = opts.get("startingtime")
    if raw_offsets not in (None, "") and raw_time not in (None, ""):
        raise ValueError("Options 'startingOffsets' and 'startingTime' are exclusive; set only one of them.")
    if raw_time not in (None, ""):
        ms = _int(opts, "startingTime", 0, minimum=0, what="an epoch time in milliseconds (a non-negative integer)")
        return StartSpec("time", time_ms=ms)
    text = str(raw_offsets or "latest").strip()
    if text.lower() in ("earliest", "latest"):
        return StartSpec(text.lower())  # type: ignore[arg-type]
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"Option 'startingOffsets': not 'earliest', 'latest' or valid JSON ({e.msg} at position {e.pos}); "
                         "expected e.g. {\"persistent://public/default/t-partition-0\": {\"ledgerId\": 12, \"entryId\": 0}}.") from None
    if not isinstance(spec, dict) or not spec:
        raise ValueError("Option 'startingOffsets': the JSON must be a non-empty object mapping partition topic names to positions.")
    positions: list[tuple[str, EntryPosition | str]] = []
    for partition, value in spec.items():
        name = str(TopicName.parse(partition, "startingOffsets"))
        if isinstance(value, str) and value.lower() in ("earliest", "latest"):
            positions.append((name, value.lower()))
        elif value in (-2, -1) and isinstance(value, int):  # Kafka-style shorthands
            positions.append((name, "earliest" if value == -2 else "latest"))
        else:
            try:
                positions.append((name, EntryPosition.from_json(value, f"Option 'startingOffsets' for partition {name}")))
            except ValueError as e:
                raise ValueError(f"{e}; or \"earliest\" / \"latest\".") from None
            if positions[-1][1].entry_id < 0 or positions[-1][1].ledger_id < 0:  # type: ignore[union-attr]
                raise ValueError(f"Option 'startingOffsets' for partition {name}: ledgerId and entryId must be >= 0 (use \"earliest\" for the beginning).")
    return StartSpec("positions", positions=tuple(positions))


def _topics(opts: Mapping[str, str]) -> tuple[tuple[TopicName, ...], re.Pattern[str] | None, str | None]:
    given = [k for k in ("topic", "topics", "topicspattern") if str(opts.get(k, "")).strip()]
    if len(given) != 1:
        found = ", ".join(_BY_LOWER[k] for k in given) if given else "none"
        raise ValueError(f"Exactly one of the options 'topic', 'topics', 'topicsPattern' must be set; found: {found}.")
    if given[0] == "topic":
        return (TopicName.parse(opts["topic"], "topic"),), None, None
    if given[0] == "topics":
        names = [t for t in (s.strip() for s in opts["topics"].split(",")) if t]
        if not names:
            raise ValueError("Option 'topics': expected a comma-separated list of topic names.")
        parsed = tuple(dict.fromkeys(TopicName.parse(t, "topics") for t in names))
        return parsed, None, None
    text = str(opts["topicspattern"]).strip()
    if "://" not in text:
        text = f"persistent://public/default/{text}" if "/" not in text else f"persistent://{text}"
    match = re.match(r"^persistent://([^/]+)/([^/]+)/(.+)$", text)
    if not match:
        raise ValueError(f"Option 'topicsPattern': '{opts['topicspattern']}' must name one namespace, e.g. persistent://public/default/orders-.*")
    if any(ch in match.group(1) + match.group(2) for ch in "*+?[](){}|\\^$"):
        raise ValueError(f"Option 'topicsPattern': the tenant and namespace of '{opts['topicspattern']}' must be literal; only the topic part is a regex.")
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise ValueError(f"Option 'topicsPattern': '{opts['topicspattern']}' is not a valid regular expression ({e}).") from None
    return (), pattern, f"{match.group(1)}/{match.group(2)}"


def _mode(opts: Mapping[str, str]) -> str:
    mode = _choice(opts, "throttlingMode", None, ("precise", "batch"))
    precise = _bool(opts, "preciseDispatcherFlowControl", None)
    batch = _bool(opts, "dispatchThrottlingOnBatchMessageEnabled", None)
    if precise and batch:
        raise ValueError("Options 'preciseDispatcherFlowControl' and 'dispatchThrottlingOnBatchMessageEnabled' are mutually exclusive; "
                         "set at most one to true (or use throttlingMode=precise|batch).")
    alias = "precise" if precise else "batch" if batch else None
    if mode and alias and mode != alias:
        raise ValueError(f"Option 'throttlingMode'={mode} contradicts the alias that selects {alias}; set only one of them.")
    return mode or alias or "precise"


def _auth_params(raw: str | None, option: str) -> Secret | None:
    """Accept 'token:<jwt>', 'file:///path' or a JSON {"token": ...}; return the token."""
    if raw is None or not str(raw).strip():
        return None
    text = str(raw).strip()
    if text.startswith("token:"):
        return Secret(text[len("token:"):])
    if text.startswith("file://"):
        path = Path(text[len("file://"):])
        try:
            token = path.read_text().strip()
        except OSError:
            raise ValueError(f"Option '{option}': cannot read the token file {path}.") from None
        if not token:
            raise ValueError(f"Option '{option}': the token file {path} is empty.")
        return Secret(token)
    if text.startswith("{"):
        try:
            token = json.loads(text).get("token")
        except (json.JSONDecodeError, AttributeError):
            token = None
        if token:
            return Secret(str(token))
    raise ValueError(f"Option '{option}': expected 'token:<jwt>', 'file:///path/to/token' or {{\"token\": \"...\"}} (value not shown).")


def _setting(opts: Mapping[str, str], prefix: str, short: str) -> str | None:
    """The value of a pulsar.client./pulsar.admin. setting under any spelling the prefix check accepts
    (authParams, auth_params, auth.params): a spelling that passes validation is never silently ignored."""
    for key, value in opts.items():
        if key.startswith(prefix) and key[len(prefix):].replace("_", "").replace(".", "").lower() == short and str(value).strip():
            return str(value).strip()
    return None


def _token_setting(opts: Mapping[str, str], prefix: str) -> Secret | None:
    params, token = _setting(opts, prefix, "authparams"), _setting(opts, prefix, "authtoken")
    return _auth_params(params or (f"token:{token}" if token else None), f"{prefix}authParams")


def parse_options(raw: Mapping[str, str]) -> SourceOptions:
    import pulsar  # imported here so that option errors stay fast to produce in tests

    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in raw.items()}
    unknown = [k for k in opts if k not in _BY_LOWER and not k.startswith(PREFIX_OPTIONS) and k not in ("path",)]
    if unknown:
        raise ValueError(f"Unknown option(s) {', '.join(repr(k) for k in sorted(unknown))}; see the README's option table for what is allowed.")

    topics, pattern, namespace = _topics(opts)
    subscription = opts.get("subscription", "pulsar-throttled").strip()
    if not subscription or not re.fullmatch(r"[A-Za-z0-9_.\-]+", subscription):
        raise ValueError(f"Option 'subscription': '{subscription}' is not allowed; expected letters, digits, '_', '-', '.'.")

    period = _int(opts, "ratePeriodInSecond", 1, minimum=1, what="a positive integer (seconds)")
    relative = bool(_bool(opts, "relativeToPublishRate", False))
    mode = _mode(opts)
    source_rate = Rate(_quota(opts, "dispatchThrottlingRateInMsg"), _quota(opts, "dispatchThrottlingRateInByte"), period, relative)
    topic_rate = Rate(_quota(opts, "dispatchThrottlingRatePerTopicInMsg"), _quota(opts, "dispatchThrottlingRatePerTopicInByte"), period, relative)
    sub_rate = Rate(_quota(opts, "dispatchThrottlingRatePerSubscriptionInMsg"), _quota(opts, "dispatchThrottlingRatePerSubscriptionInByte"), period, relative)
    throttle_non_backlog = bool(_bool(opts, "dispatchThrottlingOnNonBacklogConsumerEnabled", True))
    threshold = _int(opts, "nonBacklogThresholdEntries", 0, minimum=0, what="a non-negative integer (entries)")
    quota_source = _choice(opts, "quotaSource", "options", ("options", "broker", "both"))
    quota = QuotaConfig(source=source_rate, mode=mode, throttle_non_backlog=throttle_non_backlog,  # type: ignore[arg-type]
                        non_backlog_threshold_entries=threshold, query_id=subscription)

    max_per_trigger_raw = opts.get("maxentriespertrigger", "").strip()
    max_per_trigger = _int(opts, "maxEntriesPerTrigger", 0, minimum=1, what="a positive integer (entries)") if max_per_trigger_raw else None

    client_args = _kwarg_names(pulsar.Client.__init__, _CLIENT_RESERVED)
    reader_args = _kwarg_names(pulsar.Client.create_reader, _READER_RESERVED)
    client_kwargs = _prefixed(opts, "pulsar.client.", client_args, _AUTH_KEYS)
    reader_kwargs = _prefixed(opts, "pulsar.reader.", reader_args, set())
    for key in opts:
        if key.startswith("pulsar.admin.") and key[len("pulsar.admin."):].replace(".", "").replace("_", "") not in _ADMIN_KEYS:
            raise ValueError(f"Option '{key}' is not an admin setting; allowed: pulsar.admin.authParams, pulsar.admin.authPluginClassName, "
                             "pulsar.admin.tlsTrustCertsFilePath, pulsar.admin.tlsAllowInsecureConnection.")

    auth_plugin = _setting(opts, "pulsar.client.", "authpluginclassname")
    for prefix, plugin in (("pulsar.client.", auth_plugin), ("pulsar.admin.", _setting(opts, "pulsar.admin.", "authpluginclassname"))):
        if plugin and "token" not in plugin.lower():
            raise ValueError(f"Option '{prefix}authPluginClassName': '{plugin}' is not supported; expected org.apache.pulsar.client.impl.auth.AuthenticationToken.")
    token = _token_setting(opts, "pulsar.client.")
    admin_token = _token_setting(opts, "pulsar.admin.") or token

    return SourceOptions(
        service_url=_url(opts, "service.url", "pulsar://localhost:6650", ("pulsar", "pulsar+ssl")),
        admin_url=_url(opts, "admin.url", "http://localhost:8080", ("http", "https")),
        topics=topics,
        topics_pattern=pattern,
        pattern_namespace=namespace,
        subscription=subscription,
        start=_start_spec(opts),
        fail_on_data_loss=bool(_bool(opts, "failOnDataLoss", True)),
        durable_subscription=_durable(opts),
        poll_timeout_ms=_int(opts, "pollTimeoutMs", 120_000, minimum=1, what="a positive integer (milliseconds)"),
        incomplete_chunk_wait_ms=_int(opts, "incompleteChunkWaitMs", 60_000, minimum=0, what="a non-negative integer (milliseconds)"),
        admin_timeout_ms=_int(opts, "adminTimeoutMs", 30_000, minimum=1, what="a positive integer (milliseconds)"),
        admin_retry_timeout_ms=_int(opts, "adminRetryTimeoutMs", 60_000, minimum=0, what="a non-negative integer (milliseconds; 0 = no retries)"),
        metadata_refresh_ms=_int(opts, "metadataRefreshIntervalMs", 1_000, minimum=0, what="a non-negative integer (milliseconds)"),
        max_entries_per_trigger=max_per_trigger,
        max_rows_per_arrow_batch=_int(opts, "maxRowsPerArrowBatch", 10_000, minimum=1, what="a positive integer (rows)"),
        max_entries_per_task=_int(opts, "maxEntriesPerTask", 0, minimum=0, what="a non-negative integer (entries; 0 = no split)"),
        quota=quota,
        topic_rate=topic_rate,
        subscription_rate=sub_rate,
        quota_source=quota_source,  # type: ignore[arg-type]
        policy_refresh_ms=_int(opts, "policyRefreshIntervalMs", 30_000, minimum=1, what="a positive integer (milliseconds)"),
        quota_state_path=opts.get("quotastatepath", "").strip() or str(Path(tempfile.gettempdir()) / "pulsar-throttled-quota.sqlite"),
        private_key_path=_key_path(opts, "encryption.privateKeyPath"),
        public_key_path=_key_path(opts, "encryption.publicKeyPath"),
        crypto_failure_action=str(_choice(opts, "cryptoFailureAction", "fail", ("fail", "discard", "consume"))),
        client_kwargs=client_kwargs,
        reader_kwargs=reader_kwargs,
        auth_plugin=auth_plugin,
        auth_params=token,
        admin_auth_token=admin_token,
        admin_tls_trust=opts.get("pulsar.admin.tlstrustcertsfilepath") or None,
        admin_tls_insecure=bool(_bool(opts, "pulsar.admin.tlsAllowInsecureConnection", False)),
    )
