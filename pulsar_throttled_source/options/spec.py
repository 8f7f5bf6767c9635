"""The one table of options: name, kind, default, bounds, allowed values, meaning.

The parser reads defaults, bounds and allowed values from here (values.py reads one option by
its spec), and the documentation's option reference is generated from it (tools/readme_table.py), so a default
or a meaning is written once. Rules that involve several options live in parse.py.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

# How a value is read (values.py): int (bounded), quota (positive or -1), bool, choice, url,
# store (a Redis URL without a password), secret (a value never shown: its name makes Spark hide it),
# name (a string with an allowed pattern), duration (milliseconds, or a number and a unit as Spark's
# time strings: 30s, 15m), path (blank: the default), key_path (a PEM file path),
# and kinds read by a cross-option rule in parse.py: topic(s), pattern, start, prefix (pulsar.*.*).
Kind = Literal["int", "quota", "bool", "choice", "url", "store", "secret", "name", "path", "key_path", "topic", "topics", "pattern", "start", "end",
               "prefix", "duration"]

MS = "milliseconds"
QUOTA_EXPECTED = "a positive integer, or -1 for no limit"
TMP = "<tmp>"  # a path default under this is placed in the system's temp directory at parse time
USER = "<user>"  # ... and this is the name of the user running the query (one folder per user)


@dataclass(frozen=True)
class OptionSpec:
    name: str  # as documented; Spark hands it over lowercased
    kind: Kind
    default: str | int | bool | None  # the value when unset (None: no value, or decided by a rule)
    meaning: str  # the option reference's "Meaning" cell (docs/reference/options.md)
    minimum: int | None = None  # int, quota: the smallest allowed value (a quota's -1 aside)
    maximum: int | None = None  # int: the largest allowed value (a percentage's 100)
    expected: str = ""  # what an allowed value is, as error messages put it
    allowed: tuple[str, ...] = ()  # choice: the values; url: the schemes
    pattern: str = ""  # name: a regular expression the whole value must match
    shown: str | None = None  # the option reference's default, when not the default itself
    required: bool = False  # no default: a query without it fails at load() (parse.broker_urls)

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def readme_default(self) -> str:
        if self.shown is not None:
            return self.shown
        if self.default is None:
            return ""
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


def _int(name: str, default: int | None, minimum: int, expected: str, meaning: str) -> OptionSpec:
    return OptionSpec(name, "int", default, meaning, minimum=minimum, expected=expected)


def _percent(name: str, default: int, minimum: int, maximum: int, meaning: str) -> OptionSpec:
    return OptionSpec(name, "int", default, meaning, minimum=minimum, maximum=maximum,
                      expected=f"an integer percentage from {minimum} to {maximum}")


def _quota(name: str, meaning: str) -> OptionSpec:
    return OptionSpec(name, "quota", -1, meaning, minimum=1, expected=QUOTA_EXPECTED)


def _bool(name: str, default: bool | None, meaning: str) -> OptionSpec:
    return OptionSpec(name, "bool", default, meaning, expected="true or false")


def _choice(name: str, default: str, allowed: tuple[str, ...], meaning: str) -> OptionSpec:
    return OptionSpec(name, "choice", default, meaning, allowed=allowed)


# In the order help() lists them (the option reference groups them by purpose: tools/readme_table.py).
SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("service.url", "url", None, "Pulsar service URL the executors read from: pulsar://host:6650, or pulsar+ssl://host:6651 with TLS. "
               "Required: there is no default broker.", allowed=("pulsar", "pulsar+ssl"), required=True),
    OptionSpec("admin.url", "url", None, "Pulsar admin (HTTP) URL used for planning (partitions, ledgers, stats, policies): http://host:8080, "
               "or https://host:8443 with TLS; several brokers as http://host1:8080,host2:8080 (a host that does not answer: the next is "
               "asked). Required: there is no default broker.", allowed=("http", "https"), required=True),
    OptionSpec("topic", "topic", None, "One topic to read (partitioned or not). Exactly one of topic, topics, topicsPattern."),
    OptionSpec("topics", "topics", None, "Comma-separated topics to read."),
    OptionSpec("topicsPattern", "pattern", None, "Regex over the persistent topics of one namespace, e.g. persistent://public/default/orders-.*; new matching topics are picked up."),
    OptionSpec("subscription", "name", "pulsar-throttled", "The subscription name this query reads as; subscription quotas are keyed on it.",
               pattern=r"[A-Za-z0-9_.\-]+", expected="letters, digits, '_', '-', '.'"),
    OptionSpec("startingOffsets", "start", "latest", "earliest, latest, or JSON {partition: {\"ledgerId\":L,\"entryId\":E} | \"earliest\" | \"latest\"}; a position is the first entry to read. A batch query (spark.read) starts at earliest unless this or startingTime is set; its positions may add \"batchIndex\":B, the first message to read inside a batched entry."),
    OptionSpec("endingOffsets", "end", "latest", "Batch queries (spark.read) only: latest (the newest readable entry when the query is planned), or JSON {partition: {\"ledgerId\":L,\"entryId\":E} | \"latest\"}; a position is the first entry not read (exclusive, as Kafka's endingOffsets); with \"batchIndex\":B, the first message not read inside a batched entry."),
    _int("startingTime", None, 0, "an epoch time in milliseconds (a non-negative integer)",
         "Start at the first message published at or after this epoch-ms time (exclusive with startingOffsets)."),
    _int("endingTime", None, 0, "an epoch time in milliseconds (a non-negative integer)",
         "Batch queries (spark.read) only: end before the first message published at or after this epoch-ms time, so the messages published before it are read (exclusive, as Kafka's endingTimestamp; exclusive with endingOffsets)."),
    _bool("failOnDataLoss", True, "Fail when data between the checkpoint and the oldest stored entry is gone (retention, deleted topic); false logs a warning and continues."),
    _bool("durableSubscription", False, "true: a durable subscription named by 'subscription' (required then) follows the query's commits, so retention keeps what the query has not read; remove it when retiring the query (pulsar-admin topics unsubscribe)."),
    _int("pollTimeoutMs", 120_000, 1, f"a positive integer ({MS})", "How long a read task waits for an entry that must exist before failing."),
    _int("incompleteChunkWaitMs", 60_000, 0, f"a non-negative integer ({MS})",
         "How long a read task waits for the rest of a chunked message whose first chunk its range holds; then the message is skipped with a WARN naming it (its producer died mid-message)."),
    _int("adminTimeoutMs", 30_000, 1, f"a positive integer ({MS})", "Timeout of each admin API request."),
    _int("adminRetryTimeoutMs", 60_000, 0, f"a non-negative integer ({MS}; 0 = no retries)",
         "How long planning retries admin lookups that fail with a connection error, timeout or HTTP 5xx (e.g. a broker restart), with exponential backoff, once the API has answered at least once; 0: no retries."),
    _int("metadataRefreshIntervalMs", 1_000, 0, f"a non-negative integer ({MS})",
         "How often partition lists and ledger layouts are fetched again, in the background while the query plans (a plan never waits on the broker): new data is seen at most this plus one fetch late; idle polls in between ask nothing. 0: fetched by every plan."),
    _int("maxEntriesPerTrigger", None, 1, "a positive integer (entries)",
         "Cap on entries per micro-batch across all partitions (Spark's ReadMaxRows), on top of quotas."),
    _int("maxMessagesPerTrigger", None, 1, "a positive integer (messages)",
         "Cap on messages (rows) per micro-batch across all partitions, split over them in proportion to their backlogs, on top of quotas and maxEntriesPerTrigger; exact inside batched entries (a batch may end in the middle of one, the next reads on from there). Kafka's maxOffsetsPerTrigger is accepted for it. Trigger.Once reads everything; Trigger.AvailableNow keeps the cap."),
    _int("minEntriesPerTrigger", None, 1, "a positive integer (entries)",
         "Trigger floor in entries, not messages as Kafka's minOffsetsPerTrigger (PySpark 4.2+): a trigger whose batch would hold fewer entries (summed over all partitions, after quotas and maxEntriesPerTrigger) runs no batch until it would hold this many or maxTriggerDelay has passed; it never lets a batch over a quota."),
    OptionSpec("maxTriggerDelay", "duration", "15m",
               "With minEntriesPerTrigger: the longest wait since the last batch (or the query's first trigger) before a batch under the floor runs; milliseconds, or a number and a unit ms, s, m, min, h, d (e.g. 30s).",
               expected="a positive duration: milliseconds (e.g. 30000), or a number and a unit ms, s, m, min, h, d (e.g. 30s, 15m)"),
    _bool("progressPerPartition", False, "Add each partition's lag (newest readable entry, entries, messages and seconds behind, the level holding it back) to the query progress report (see Query progress); off by default, so 1,000 partitions do not put 1,000 objects in every progress event."),
    _int("maxRowsPerArrowBatch", 10_000, 1, "a positive integer (rows)", "Rows per Arrow record batch produced by a read task (bounds task memory)."),
    _int("maxEntriesPerTask", 0, 0, "a non-negative integer (entries; 0 = no split)",
         "Split a partition's range into tasks of at most this many entries (0: one task per partition)."),
    _int("smallBatchTasks", 2, 0, "a non-negative integer (tasks; 0 = one task per partition)",
         "Streams: a micro-batch of more partitions than this that reads at most 4 MiB per task runs as this many tasks, each reading several partitions' ranges in turn, so its per-task fixed costs (Spark's Python runner, ~120 ms a task) are paid once per core, not once per partition. Set it to the cores the query's executors have (the source cannot ask Spark for them). The default 2 suits 2 cores: a small batch on 4 partitions then runs in one wave of tasks instead of two, taking about 30 % less time from trigger to commit (bench/batch_timeline.py). Larger batches keep one task per partition unless maxTasksPerTrigger is set; batch queries always do; 0: always one task per partition."),
    _int("maxTasksPerTrigger", 0, 0, "a non-negative integer (tasks; 0 = no limit)",
         "Streams: at most this many Spark tasks per micro-batch, whatever its size; a batch of more partitions (or maxEntriesPerTask pieces) runs as this many tasks, each reading several ranges in turn, balanced by their bytes. Set it to the cores the query's executors have when the partitions outnumber them: each batch then runs in one wave of tasks and pays the per-task fixed costs once per core. On 2 cores and 4 partitions, large micro-batches read about 1.1-1.3x faster than with one task per partition (bench/jvm_connector.py, bench/batch_timeline.py). On more cores than this it reads with fewer tasks than it could: 0 (the default) keeps one task per partition."),
    _quota("dispatchThrottlingRateInMsg", "Source-wide message quota per period, shared by all partitions of the query (-1: none)."),
    _quota("dispatchThrottlingRateInByte", "Source-wide byte quota per period (-1: none)."),
    _quota("dispatchThrottlingRatePerTopicInMsg", "Per-partition topic quota in messages per period, shared by every query with the same quota store: this user's queries on this host (quotaStatePath), or queries on any host naming the same quotaStore (-1: none)."),
    _quota("dispatchThrottlingRatePerTopicInByte", "Per-partition topic quota in bytes per period (-1: none)."),
    _quota("dispatchThrottlingRatePerSubscriptionInMsg", "Per-partition quota of this subscription in messages per period (-1: none)."),
    _quota("dispatchThrottlingRatePerSubscriptionInByte", "Per-partition quota of this subscription in bytes per period (-1: none)."),
    _int("ratePeriodInSecond", 1, 1, "a positive integer (seconds)", "Length of a quota window in seconds; windows are aligned to the epoch."),
    _choice("throttlingMode", "precise", ("precise", "batch"),
            "precise (messages estimated from messages per entry) or batch (one entry counts as one message)."),
    _bool("preciseDispatcherFlowControl", None, "Pulsar alias: true selects throttlingMode=precise."),
    _bool("dispatchThrottlingOnBatchMessageEnabled", None, "Pulsar alias: true selects throttlingMode=batch."),
    _bool("relativeToPublishRate", False, "Quotas are added to each partition's current publish rate (PIP-52)."),
    _bool("dispatchThrottlingOnNonBacklogConsumerEnabled", True,
          "false turns throttling off for a partition whose backlog is at most nonBacklogThresholdEntries."),
    _int("nonBacklogThresholdEntries", 0, 0, "a non-negative integer (entries)",
         "Backlog (entries) at or under which a partition counts as caught up for auto-off."),
    _choice("quotaSource", "options", ("options", "broker", "both"),
            "options, broker (the broker's applied dispatch-rate policies) or both (ANDed)."),
    _int("policyRefreshIntervalMs", 30_000, 1, f"a positive integer ({MS})", "How often broker policies are re-read with quotaSource=broker|both, and the publish counters (messages per entry) where no quota needs them live."),
    _bool("adaptiveThrottling", False,
          "Experimental: the quotas become ceilings and the source admits m x each of them, m moved in "
          "[adaptiveThrottlingMinPercent %, 100 %] by a congestion controller once per adaptiveThrottlingWindow, shared "
          "through the quota store by every query naming the same admin.url (docs/THROTTLING.md, \"Adaptive throttling\"). "
          "Needs a quota to scale. Signals: entry lookup latency, pending adds, other subscriptions throttled, batch "
          "duration with adaptiveThrottlingTriggerInterval, publish latency with adaptiveThrottlingMetricsUrl."),
    _percent("adaptiveThrottlingMinPercent", 10, 1, 100,
             "With adaptiveThrottling: the floor of m, in percent of the quotas; the source never admits less."),
    _percent("adaptiveThrottlingDecreasePercent", 50, 1, 99,
             "With adaptiveThrottling: how much m loses in a window where a stress signal fired (m x (1 - p/100))."),
    _percent("adaptiveThrottlingIncreasePercent", 5, 1, 100,
             "With adaptiveThrottling: how much m gains, in points of the quotas, in a window where no signal fired "
             "(from the floor of 10 % to 100 % in 18 windows at the defaults)."),
    OptionSpec("adaptiveThrottlingWindow", "duration", "10s",
               "With adaptiveThrottling: the controller's window (one decision per window and cluster, epoch aligned); "
               "milliseconds, or a number and a unit ms, s, m, min, h, d.",
               expected="a positive duration: milliseconds (e.g. 10000), or a number and a unit ms, s, m, min, h, d (e.g. 10s)"),
    OptionSpec("adaptiveThrottlingTriggerInterval", "duration", None,
               "With adaptiveThrottling: the query's ProcessingTime trigger interval (Spark does not tell a source); when "
               "set, batches taking over 1.25 x it are a stress signal (batchDuration). Unset: that signal is off.",
               expected="a positive duration: milliseconds (e.g. 5000), or a number and a unit ms, s, m, min, h, d (e.g. 5s)"),
    OptionSpec("adaptiveThrottlingMetricsUrl", "url", None,
               "With adaptiveThrottling: the broker's Prometheus metrics page (e.g. http://broker:8080/metrics/), read once "
               "per window with the admin API's credentials; the p99 publish latency of the broker's last stats period "
               "(pulsar_broker_publish_latency, else pulsar_storage_write_latency_le_*) is then a stress signal "
               "(publishLatency). It changes once per statsUpdateFrequencyInSecs / managedLedgerStatsPeriodSeconds (60 s by "
               "default; lower them on the broker, e.g. to 5 s, for it to act sooner). Needs the adaptive extra "
               "(prometheus-client).",
               allowed=("http", "https")),
    _bool("adaptiveThrottlingSlowStart", True,
          "With adaptiveThrottling: a cluster's first window starts m at adaptiveThrottlingMinPercent and each window with "
          "no signal fired doubles it, until the first decrease (then additive increases); false starts m at 100 %, the "
          "ceilings, for ceilings known to be safe. A restarted query resumes from the stored m either way."),
    _percent("adaptiveThrottlingPublishLatencyPercent", 100, 10, 1000,
             "With adaptiveThrottlingMetricsUrl: how far the broker's p99 publish latency of a stats period may rise over "
             "its running minimum before publishLatency fires, in percent (100: twice the minimum; 50 keeps producers "
             "within about 1.5x their quiet latency). It fires only above 5 ms."),
    OptionSpec("quotaStatePath", "path", f"{TMP}/pulsar-throttled-{USER}/quota.sqlite",
               "SQLite file holding the quota buckets shared by this user's queries on this host (its folder is private to the user; buckets unused for a day are purged)."),
    OptionSpec("quotaStore", "store", None,
               "Where topic and subscription quota buckets live: unset for the SQLite file at quotaStatePath (queries on this host), or a Redis server shared by queries on any host, redis://[user@]host:port[/db] (rediss:// for TLS), its password in quotaStorePassword (a password in the URL is refused: Spark would show it).",
               allowed=("redis", "rediss"), shown="(SQLite)"),
    OptionSpec("quotaStorePassword", "secret", None,
               "With quotaStore: the Redis server's password (Spark hides the value of an option whose name holds \"password\" "
               "in query plans, the Spark UI and its event log; the source shows it nowhere)."),
    OptionSpec("encryption.privateKeyPath", "key_path", None, "PEM private key (a path readable on every executor) to read end-to-end encrypted topics; without it an encrypted topic fails the query at once, naming it."),
    OptionSpec("encryption.publicKeyPath", "key_path", None, "Matching PEM public key path, if your key reader setup needs one (readers only need the private key)."),
    _choice("cryptoFailureAction", "fail", ("fail", "discard", "consume"),
            "When a message cannot be decrypted: fail (the query fails, naming the entry), discard (skipped by the client, with a WARN), or consume (delivered still encrypted)."),
    _choice("readPath", "auto", ("auto", "native", "python"),
            "How read tasks read: native (Arrow columns filled by the package pulsar-throttled-source-native over libpulsar's C API, no Python object per message; the task fails if it cannot load), python (the pulsar-client loop), or auto (native where it loads and supports the query's pulsar.client/pulsar.reader settings, else python with one WARN saying why)."),
    _bool("decodeSchema", True, "Decode topics that have a schema (AVRO, JSON, STRING) into columns: a record's fields as top-level columns (or a typed value), metadata as __key, __topic, ...; false keeps the raw layout (value bytes) for every topic."),
    _choice("decodeErrorMode", "failfast", ("failfast", "permissive"),
            "When a payload cannot be decoded with the topic's schema (Spark's modes): failfast (the query fails, naming the message id), or permissive (its fields are null and its raw bytes go to a __corruptRecord column)."),
    OptionSpec("pulsar.client.*", "prefix", None, "Passed to pulsar.Client (e.g. pulsar.client.operationTimeoutSeconds, pulsar.client.authParams)."),
    OptionSpec("pulsar.reader.*", "prefix", None, "Passed to Client.create_reader (e.g. pulsar.reader.receiverQueueSize: "
               "your own queue replaces the sixteenth of its range a throttled query's reader asks for, and the broker "
               "reads up to that queue past each range)."),
    OptionSpec("pulsar.admin.*", "prefix", None, "The admin API's own credentials and TLS checks, where they differ from the client's "
               "(which it uses by default): pulsar.admin.authPluginClassName, pulsar.admin.authParams, "
               "pulsar.admin.tlsTrustCertsFilePath, pulsar.admin.tlsAllowInsecureConnection, pulsar.admin.tlsValidateHostname."),
)

BY_NAME: dict[str, OptionSpec] = {s.name: s for s in SPECS}
BY_KEY: dict[str, OptionSpec] = {s.key: s for s in SPECS if s.kind != "prefix"}  # lowercased name -> spec
PREFIX_OPTIONS: tuple[str, ...] = tuple(s.name[:-1] for s in SPECS if s.kind == "prefix")  # "pulsar.client." ...

# Documented options: name -> (default shown in the option reference, meaning); what tests and examples check names against.
OPTIONS: dict[str, tuple[str, str]] = {s.name: (s.readme_default, s.meaning) for s in SPECS}


@dataclass(frozen=True)
class SettingSpec:
    """A setting under pulsar.client. / pulsar.admin. that the source reads itself (not passed to pulsar-client)."""

    prefix: str
    name: str
    secret: bool  # its value never appears in repr or an error message

    @property
    def key(self) -> str:
        """Lowercased, without '_' or '.': the spelling every accepted variant (authParams, auth_params) reduces to."""
        return self.name.lower()


SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("pulsar.client.", "authPluginClassName", False),
    SettingSpec("pulsar.client.", "authParams", True),
    SettingSpec("pulsar.client.", "authToken", True),
    SettingSpec("pulsar.admin.", "authParams", True),
    SettingSpec("pulsar.admin.", "authPluginClassName", False),
    SettingSpec("pulsar.admin.", "tlsTrustCertsFilePath", False),
    SettingSpec("pulsar.admin.", "tlsAllowInsecureConnection", False),
    SettingSpec("pulsar.admin.", "tlsValidateHostname", False),
    SettingSpec("pulsar.admin.", "authToken", True),
)


def settings(prefix: str) -> tuple[SettingSpec, ...]:
    return tuple(s for s in SETTINGS if s.prefix == prefix)


def describe_options() -> str:
    """Every option as help() shows it (the data source's docstring), from the same specs as the option reference."""
    lines = []
    for spec in SPECS:
        default = " (required)" if spec.required else f" (default: {spec.readme_default})" if spec.readme_default else ""
        lines.append(f"  {spec.name}{default}\n" + textwrap.fill(spec.meaning.replace("`", ""), 100, initial_indent=" " * 6,
                                                                 subsequent_indent=" " * 6))
    return "\n".join(lines)
