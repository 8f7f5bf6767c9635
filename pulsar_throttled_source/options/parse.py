"""parse_options: the options Spark hands over (strings, names lowercased) -> one frozen SourceOptions.

Single options are read by their spec (values.py); the rules that involve several options are the
small functions below. Checks run in a fixed order, so the first error reported is stable.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from typing import Any

from ..admin_endpoint import userinfo, without_userinfo
from ..credentials import BasicAuth
from ..quota_settings import AdaptiveConfig, QuotaConfig, Rate
from ..topics import TopicName
from . import aliases, auth, passthrough, values
from .model import QuotaSource, SourceOptions
from .names import unknown_options_message
from .spec import BY_KEY, BY_NAME, PREFIX_OPTIONS
from .start_end import end_spec, start_spec

Opts = Mapping[str, str]
_NOT_OPTIONS = ("path",)  # what DataFrameReader.load(path) adds
_TOPIC_OPTIONS = ("topic", "topics", "topicsPattern")


def parse_options(raw: Mapping[str, str], *, reads: bool = True) -> SourceOptions:
    """`reads`: False for a caller that only asks the admin API (the status command): service.url may be unset."""
    lowered = {str(k).lower(): ("" if v is None else str(v)) for k, v in raw.items()}
    opts, given_as = aliases.resolve(lowered)  # Kafka's and pulsar-spark's names: ours, or refused naming ours
    check_known(opts, raw)
    try:
        return _parsed(opts, reads)
    except ValueError as e:
        if given_as:  # an error about an option given by another name says so
            e.args = (aliases.explain(str(e), given_as), *e.args[1:])
        raise


def _parsed(opts: Opts, reads: bool) -> SourceOptions:
    service_url, admin_url = broker_urls(opts, reads)
    topics, pattern, namespace = topic_selection(opts)
    subscription = values.name_value(opts, "subscription")
    period = values.number(opts, "ratePeriodInSecond")
    relative = values.flag(opts, "relativeToPublishRate")
    mode = throttling_mode(opts)

    def rate(msgs: str, byte: str) -> Rate:
        return Rate(values.number(opts, msgs), values.number(opts, byte), period, relative)

    source_rate = rate("dispatchThrottlingRateInMsg", "dispatchThrottlingRateInByte")
    topic_rate = rate("dispatchThrottlingRatePerTopicInMsg", "dispatchThrottlingRatePerTopicInByte")
    sub_rate = rate("dispatchThrottlingRatePerSubscriptionInMsg", "dispatchThrottlingRatePerSubscriptionInByte")
    quota = QuotaConfig(source=source_rate, mode=mode,  # type: ignore[arg-type]
                        throttle_non_backlog=values.flag(opts, "dispatchThrottlingOnNonBacklogConsumerEnabled"),
                        non_backlog_threshold_entries=values.number(opts, "nonBacklogThresholdEntries"))
    quota_source: QuotaSource = values.choice(opts, "quotaSource")  # type: ignore[assignment]
    max_per_trigger = values.integer(opts, "maxEntriesPerTrigger")
    min_per_trigger = trigger_floor(opts, max_per_trigger, source_rate)
    adaptive = adaptive_throttling(opts, quota_source, (source_rate, topic_rate, sub_rate))

    client_kwargs = passthrough.client_kwargs(opts)
    reader_kwargs = passthrough.reader_kwargs(opts)
    passthrough.check_admin_settings(opts)
    credentials = auth.credentials(opts, passthrough.CLIENT)
    admin_credentials = auth.admin_credentials(opts, credentials)

    return SourceOptions(
        service_url=service_url,
        admin_url=admin_url,
        topics=topics,
        topics_pattern=pattern,
        pattern_namespace=namespace,
        subscription=subscription,
        start=start_spec(opts),
        end=end_spec(opts),
        fail_on_data_loss=values.flag(opts, "failOnDataLoss"),
        durable_subscription=durable_subscription(opts),
        poll_timeout_ms=values.number(opts, "pollTimeoutMs"),
        incomplete_chunk_wait_ms=values.number(opts, "incompleteChunkWaitMs"),
        admin_timeout_ms=values.number(opts, "adminTimeoutMs"),
        admin_retry_timeout_ms=values.number(opts, "adminRetryTimeoutMs"),
        metadata_refresh_ms=values.number(opts, "metadataRefreshIntervalMs"),
        max_entries_per_trigger=max_per_trigger,
        max_messages_per_trigger=values.integer(opts, "maxMessagesPerTrigger"),
        max_rows_per_arrow_batch=values.number(opts, "maxRowsPerArrowBatch"),
        max_entries_per_task=values.number(opts, "maxEntriesPerTask"),
        small_batch_tasks=values.number(opts, "smallBatchTasks"),
        max_tasks_per_trigger=values.number(opts, "maxTasksPerTrigger"),
        quota=quota,
        topic_rate=topic_rate,
        subscription_rate=sub_rate,
        quota_source=quota_source,
        policy_refresh_ms=values.number(opts, "policyRefreshIntervalMs"),
        quota_state_path=values.path(opts, "quotaStatePath"),
        quota_store=values.quota_store(opts),
        private_key_path=values.key_path(opts, "encryption.privateKeyPath"),
        public_key_path=values.key_path(opts, "encryption.publicKeyPath"),
        crypto_failure_action=str(values.choice(opts, "cryptoFailureAction")),
        read_path=str(values.choice(opts, "readPath")),
        decode_schema=values.flag(opts, "decodeSchema"),
        corrupt_records=values.choice(opts, "decodeErrorMode") == "permissive",
        client_kwargs=client_kwargs,
        reader_kwargs=reader_kwargs,
        credentials=credentials,
        admin_credentials=admin_credentials,
        admin_tls=auth.admin_tls(opts, dict(client_kwargs), admin_credentials),
        min_entries_per_trigger=min_per_trigger,
        max_trigger_delay_ms=values.duration_ms(opts, "maxTriggerDelay"),
        progress_per_partition=values.flag(opts, "progressPerPartition"),
        adaptive=adaptive,
    )


def check_known(opts: Opts, given: Mapping[str, object] | None = None) -> None:
    """Every option is in the table or under a pass-through prefix: a misspelt name fails instead of being ignored,
    with the closest names and what they do (names.py); `given` spells the names as the caller did."""
    unknown = [k for k in opts if k not in BY_KEY and not k.startswith(PREFIX_OPTIONS) and k not in _NOT_OPTIONS]
    if unknown:
        raise ValueError(unknown_options_message(unknown, given or opts))


def broker_urls(opts: Opts, reads: bool = True) -> tuple[str, str]:
    """service.url and admin.url, both required: a default of localhost would have a query talk to whatever answers
    there (a Spark master's UI on :8080). Without `reads`, an unset service.url is "" (never used)."""
    needed = ("service.url", "admin.url") if reads else ("admin.url",)
    missing = [name for name in needed if not values.is_set(opts, name)]
    if missing:
        raise ValueError(f"Option{'s' if len(missing) > 1 else ''} {' and '.join(repr(n) for n in missing)} "
                         f"{'are' if len(missing) > 1 else 'is'} required (there is no default broker): "
                         f"{BROKER_URLS_EXPECTED}.")
    service_url = values.url(opts, "service.url", several_hosts=True) if values.is_set(opts, "service.url") else ""
    return service_url, values.url(opts, "admin.url", several_hosts=True)


BROKER_URLS_EXPECTED = ("'service.url' is where the executors read, pulsar://host:6650 (pulsar+ssl://host:6651 with TLS); "
                        "'admin.url' is the broker's admin API, used for planning, http://host:8080 (https://host:8443 with TLS)")


def topic_selection(opts: Opts) -> tuple[tuple[TopicName, ...], re.Pattern[str] | None, str | None]:
    """Exactly one of topic, topics, topicsPattern: (topics, None, None) or ((), pattern, its namespace)."""
    given = [name for name in _TOPIC_OPTIONS if values.is_set(opts, name)]
    if len(given) != 1:
        raise ValueError(f"Exactly one of the options 'topic', 'topics', 'topicsPattern' must be set; found: {', '.join(given) or 'none'}.")
    if given[0] == "topic":
        return (TopicName.parse(opts["topic"], "topic"),), None, None
    if given[0] == "topics":
        names = [t for t in (s.strip() for s in opts["topics"].split(",")) if t]
        if not names:
            raise ValueError("Option 'topics': expected a comma-separated list of topic names.")
        return tuple(dict.fromkeys(TopicName.parse(t, "topics") for t in names)), None, None
    return topics_pattern(opts[BY_NAME["topicsPattern"].key])


def topics_pattern(raw: str) -> tuple[tuple[TopicName, ...], re.Pattern[str], str]:
    """A regex over the topics of one literal namespace; a bare or namespace-less pattern defaults like a topic name."""
    text = raw.strip()
    if "://" not in text:
        text = f"persistent://public/default/{text}" if "/" not in text else f"persistent://{text}"
    match = re.match(r"^persistent://([^/]+)/([^/]+)/(.+)$", text)
    if not match:
        raise ValueError(f"Option 'topicsPattern': '{raw}' must name one namespace, e.g. persistent://public/default/orders-.*")
    if any(ch in match.group(1) + match.group(2) for ch in "*+?[](){}|\\^$"):
        raise ValueError(f"Option 'topicsPattern': the tenant and namespace of '{raw}' must be literal; only the topic part is a regex.")
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise ValueError(f"Option 'topicsPattern': '{raw}' is not a valid regular expression ({e}).") from None
    return (), pattern, f"{match.group(1)}/{match.group(2)}"


def throttling_mode(opts: Opts) -> str:
    """throttlingMode, or one of its Pulsar aliases set to true; they may not contradict each other."""
    mode = values.choice(opts, "throttlingMode", unset="")
    precise = values.boolean(opts, "preciseDispatcherFlowControl")
    batch = values.boolean(opts, "dispatchThrottlingOnBatchMessageEnabled")
    if precise and batch:
        raise ValueError("Options 'preciseDispatcherFlowControl' and 'dispatchThrottlingOnBatchMessageEnabled' are mutually exclusive; "
                         "set at most one to true (or use throttlingMode=precise|batch).")
    alias = "precise" if precise else "batch" if batch else None
    if mode and alias and mode != alias:
        raise ValueError(f"Option 'throttlingMode'={mode} contradicts the alias that selects {alias}; set only one of them.")
    return mode or alias or str(BY_NAME["throttlingMode"].default)


def trigger_floor(opts: Opts, max_per_trigger: int | None, source_rate: Rate) -> int | None:
    """minEntriesPerTrigger, which a limit known at load must be able to admit in one trigger (the per-partition
    quotas are checked at the first trigger, when the partitions are known); maxTriggerDelay needs it."""
    floor = values.integer(opts, "minEntriesPerTrigger")
    if floor is None:
        if values.is_set(opts, "maxTriggerDelay"):
            raise ValueError("Option 'maxTriggerDelay' applies only with 'minEntriesPerTrigger' (the delay a batch under "
                             "that floor may wait); set minEntriesPerTrigger too, or remove maxTriggerDelay.")
        return None
    if max_per_trigger is not None:
        check_reachable(floor, "maxEntriesPerTrigger", max_per_trigger)
    # A message quota admits at most that many entries (an entry holds one message or more); a relative one grows
    # with the publish rate, and a broker policy is known only at run time.
    if values.choice(opts, "quotaSource") != "broker" and source_rate.msgs > 0 and not source_rate.relative_to_publish_rate:
        check_reachable(floor, "dispatchThrottlingRateInMsg", source_rate.msgs, " messages per window")
    return floor


ADAPTIVE_KNOBS = ("adaptiveThrottlingMinPercent", "adaptiveThrottlingDecreasePercent", "adaptiveThrottlingIncreasePercent",
                  "adaptiveThrottlingWindow", "adaptiveThrottlingTriggerInterval", "adaptiveThrottlingMetricsUrl",
                  "adaptiveThrottlingPublishLatencyPercent", "adaptiveThrottlingSlowStart")


def adaptive_throttling(opts: Opts, quota_source: str, option_rates: tuple[Rate, ...]) -> AdaptiveConfig | None:
    """A read's adaptiveThrottling (adaptive_config): the controller scales quotas, so with none to scale it has no
    ceiling, an error."""
    config = adaptive_config(opts)
    if config is not None and quota_source == "options" and all(rate.is_unlimited() for rate in option_rates):
        raise ValueError("Option 'adaptiveThrottling': the controller scales the configured quotas, and none is set; set a "
                         "dispatchThrottlingRate* option (the ceiling) or quotaSource=broker|both, or remove adaptiveThrottling.")
    return config


def adaptive_config(opts: Opts) -> AdaptiveConfig | None:
    """adaptiveThrottling=true and its knobs, or None (a read's and a write's). Each knob is read (and checked) first; set
    without the switch it would silently do nothing: an error."""
    config = AdaptiveConfig(min_multiplier=values.number(opts, "adaptiveThrottlingMinPercent") / 100,
                            decrease=values.number(opts, "adaptiveThrottlingDecreasePercent") / 100,
                            increase=values.number(opts, "adaptiveThrottlingIncreasePercent") / 100,
                            window_ms=values.duration_ms(opts, "adaptiveThrottlingWindow"),
                            trigger_interval_ms=(values.duration_ms(opts, "adaptiveThrottlingTriggerInterval")
                                                 if values.is_set(opts, "adaptiveThrottlingTriggerInterval") else None),
                            **metrics_page(opts),
                            publish_latency_ratio=1 + values.number(opts, "adaptiveThrottlingPublishLatencyPercent") / 100,
                            slow_start=values.flag(opts, "adaptiveThrottlingSlowStart"))
    if not values.flag(opts, "adaptiveThrottling"):
        stray = [name for name in ADAPTIVE_KNOBS if values.is_set(opts, name)]
        if stray:
            raise ValueError(f"Option '{stray[0]}' applies only with 'adaptiveThrottling'=true; set adaptiveThrottling=true, "
                             f"or remove {', '.join(stray)}.")
        return None
    return config


def metrics_page(opts: Opts) -> dict[str, Any]:
    """adaptiveThrottlingMetricsUrl, checked, as metrics_url (never with user-info) and metrics_credentials (the URL's
    user and password, for a proxy in front of the page: Spark hides the value of an option whose name holds "url");
    its parser (prometheus-client) is an extra: missing, a clear error now."""
    if not values.is_set(opts, "adaptiveThrottlingMetricsUrl"):
        return {}
    url = values.url(opts, "adaptiveThrottlingMetricsUrl", userinfo_allowed=True)
    if importlib.util.find_spec("prometheus_client") is None:
        raise ValueError("Option 'adaptiveThrottlingMetricsUrl' needs the prometheus-client package to read the broker's "
                         "metrics: pip install 'pulsar-throttled-source[adaptive]', or remove the option.")
    user, password = userinfo(url)
    return {"metrics_url": without_userinfo(url),
            "metrics_credentials": BasicAuth(user or "", password or "") if user or password else None}


def durable_subscription(opts: Opts) -> bool:
    """A durable subscription needs a name of the query's own: the default name would be shared by every query."""
    durable = values.flag(opts, "durableSubscription")
    if durable and not values.is_set(opts, "subscription"):
        raise ValueError("Option 'durableSubscription': a durable subscription needs option 'subscription' set to a name of "
                         "this query's own (e.g. orders-ingest); the default name would be shared by every query.")
    return durable


def check_reachable(min_entries: int, option: str, most_per_trigger: int, how: str = "") -> None:
    """A limit that can never admit the floor in one trigger would make every batch wait for maxTriggerDelay:
    refuse it, naming both options. `most_per_trigger` is the most entries `option` lets one trigger plan."""
    if most_per_trigger < min_entries:
        raise ValueError(f"Options 'minEntriesPerTrigger' ({min_entries}) and '{option}' ({most_per_trigger}{how}) do not fit: "
                         f"'{option}' admits at most {most_per_trigger} entries per trigger, so no batch could reach the floor "
                         f"and every one would wait for maxTriggerDelay. Lower minEntriesPerTrigger to at most "
                         f"{most_per_trigger}, or raise '{option}'.")
