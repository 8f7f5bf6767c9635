"""Names users know from Spark's Kafka source and from pulsar-spark: each accepted where it means exactly what one
of ours means (renamed here, before parsing), else refused, naming ours and the difference in one sentence.

The meanings are Spark's Kafka guide (structured-streaming-kafka-integration) and pulsar-spark's README and
PulsarOptions.scala. Names both sources share with us (startingOffsets, endingOffsets, startingTime, endingTime,
failOnDataLoss, pollTimeoutMs, maxTriggerDelay, topic, topics, topicsPattern, service.url, admin.url and the
pulsar.client./pulsar.reader./pulsar.admin. prefixes) are in the option table itself (spec.py).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

from ..protobuf_wire import message_id_fields

KAFKA = "Spark's Kafka source"
PULSAR_SPARK = "pulsar-spark"


@dataclass(frozen=True)
class Alias:
    """A name accepted for one of ours: the value is passed on (a boolean `inverted`), and `sets` adds options."""

    name: str  # as its source spells it
    source: str
    ours: str  # our option it becomes
    note: str  # its line in the names table (docs/guides/migrating.md): what carries over
    inverted: bool = False  # a boolean whose true is our false
    sets: tuple[tuple[str, str], ...] = ()  # our options it also sets, with their values

    @property
    def key(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Refused:
    """A name refused with our nearest option (None: none) and how it differs, in one sentence."""

    name: str  # as its source spells it; a trailing '*' is a prefix
    source: str
    ours: str | None
    difference: str

    @property
    def key(self) -> str:
        return self.name.lower().rstrip("*")


ALIASES: tuple[Alias, ...] = (
    Alias("subscribe", KAFKA, "topics", "a comma-separated list of topics; a short name is in public/default"),
    Alias("subscribePattern", KAFKA, "topicsPattern",
          "a regex the whole topic name must match; a pattern without tenant/namespace covers public/default"),
    Alias("startingTimestamp", KAFKA, "startingTime",
          "each partition starts at its first message published at or after this epoch-ms time; where there is none "
          "it starts at its newest entry (Kafka's startingOffsetsByTimestampStrategy=latest; Kafka's default fails)"),
    Alias("endingTimestamp", KAFKA, "endingTime",
          "batch queries: each partition ends before its first message published at or after this epoch-ms time; "
          "where there is none, at its newest entry (as Kafka's)"),
    Alias("kafkaConsumer.pollTimeoutMs", KAFKA, "pollTimeoutMs", "how long a read task waits for data that must exist"),
    Alias("predefinedSubscription", PULSAR_SPARK, "subscription",
          "a durable subscription of that name follows the query's commits and stays when the query stops",
          sets=(("durableSubscription", "true"),)),
    Alias("allowDifferentTopicSchemas", PULSAR_SPARK, "decodeSchema",
          "true reads every topic's raw bytes, whatever its schema (decodeSchema=false)", inverted=True),
    Alias("maxOffsetsPerTrigger", KAFKA, "maxMessagesPerTrigger",
          "a cap on the messages (rows) of each micro-batch across all partitions, split in proportion to their "
          "backlogs; exact inside batched entries"),
)

REFUSED: tuple[Refused, ...] = (
    Refused("minOffsetsPerTrigger", KAFKA, "minEntriesPerTrigger",
            "minOffsetsPerTrigger counts messages; minEntriesPerTrigger counts entries, and an entry holds many messages "
            "on a batched topic, so the same number waits for that many times more messages (maxOffsetsPerTrigger, "
            "maxMessagesPerTrigger here, does count messages)."),
    Refused("maxBytesPerTrigger", PULSAR_SPARK, "dispatchThrottlingRateInByte",
            "maxBytesPerTrigger caps each micro-batch's bytes; dispatchThrottlingRateInByte caps the bytes read per "
            "ratePeriodInSecond window, whatever the trigger interval."),
    Refused("assign", KAFKA, "topics",
            "assign names Kafka partition numbers per topic; a query here reads every partition of the topics it names."),
    Refused("startingOffsetsByTimestamp", KAFKA, "startingTime",
            "it takes a time per partition; startingTime takes one time for every partition."),
    Refused("endingOffsetsByTimestamp", KAFKA, "endingTime",
            "it takes a time per partition; endingTime takes one time for every partition."),
    Refused("startingOffsetsByTimestampStrategy", KAFKA, "startingTime",
            "where no message is at or after startingTime a partition starts at its newest entry (Kafka's 'latest'); "
            "there is no 'error' strategy, so remove the option."),
    Refused("fetchOffset.numRetries", KAFKA, "adminRetryTimeoutMs",
            "it counts retries; adminRetryTimeoutMs is how long failed admin lookups are retried, with backoff."),
    Refused("fetchOffset.retryIntervalMs", KAFKA, "adminRetryTimeoutMs",
            "the interval is not set here: adminRetryTimeoutMs is how long failed admin lookups are retried, with "
            "exponential backoff."),
    Refused("minPartitions", KAFKA, "maxEntriesPerTask",
            "it asks for a number of Spark tasks; maxEntriesPerTask splits a partition's range into tasks of at most "
            "that many entries."),
    Refused("maxRecordsPerPartition", KAFKA, "maxEntriesPerTask",
            "it counts records (messages); maxEntriesPerTask counts entries, which hold many messages on a batched topic."),
    Refused("groupIdPrefix", KAFKA, "subscription",
            "it prefixes generated consumer-group ids; 'subscription' names this query's subscription outright "
            "(its quotas are keyed on it)."),
    Refused("includeHeaders", KAFKA, None,
            "message properties are always read, into the 'properties' column (or '__messageProperties' with a "
            "schema): remove the option."),
    Refused("subscriptionPrefix", PULSAR_SPARK, "subscription",
            "it prefixes a random subscription name made per query; 'subscription' names it outright, and no "
            "subscription is created unless durableSubscription=true."),
    Refused("waitingForNonExistedTopic", PULSAR_SPARK, None,
            "a topic that does not exist fails the query, naming it; create the topic first."),
    Refused("kafka.bootstrap.servers", KAFKA, "service.url",
            "this source reads Pulsar: give the broker's pulsar:// (or pulsar+ssl://) URL, and admin.url its "
            "http(s):// admin API."),
    Refused("kafka.group.id", KAFKA, "subscription",
            "'subscription' names this query's subscription (its quotas are keyed on it)."),
    Refused("kafka.*", KAFKA, "pulsar.client.*",
            "Kafka consumer settings do not apply to Pulsar: pulsar-client's go under pulsar.client.* and "
            "pulsar.reader.* (credentials: pulsar.client.authPluginClassName and authParams)."),
)

BY_ALIAS: dict[str, Alias] = {a.key: a for a in ALIASES}
_REFUSED_NAMES: dict[str, Refused] = {r.key: r for r in REFUSED if not r.name.endswith("*")}
_REFUSED_PREFIXES: tuple[Refused, ...] = tuple(r for r in REFUSED if r.name.endswith("*"))


def refusal(key: str) -> Refused | None:
    """The refusal of a lowercased option name, by its name or by its prefix."""
    if key in _REFUSED_NAMES:
        return _REFUSED_NAMES[key]
    return next((r for r in _REFUSED_PREFIXES if key.startswith(r.key)), None)


def refusal_message(key: str, refused: Refused) -> str:
    shown = refused.name if not refused.name.endswith("*") else key
    nearest = f"the nearest option here is '{refused.ours}'" if refused.ours else "no option here does the same"
    return f"'{shown}' is {refused.source}'s option and is not taken here; {nearest}: {refused.difference}"


def resolve(opts: Mapping[str, str]) -> tuple[dict[str, str], dict[str, Alias]]:
    """The options with every accepted alias renamed to ours (keys lowercased, as Spark gives them), and which of
    ours were given by an alias. A refused name, or an alias given with one of the options it sets, is an error."""
    for key in opts:
        refused = refusal(key)
        if refused is not None:
            raise ValueError(f"Option {refusal_message(key, refused)}")
    out = dict(opts)
    given_as: dict[str, Alias] = {}
    for key in [k for k in opts if k in BY_ALIAS]:
        alias = BY_ALIAS[key]
        value = out.pop(key)
        if alias.inverted:
            flag = value.strip().lower()
            if flag not in ("true", "false"):
                raise ValueError(f"Option '{alias.name}': '{value}' is not allowed; expected true or false.")
            value = "false" if flag == "true" else "true"
        for ours, ours_value in ((alias.ours, value), *alias.sets):
            if ours.lower() in out:
                earlier = given_as.get(ours.lower())
                other = f"{earlier.source}'s '{earlier.name}'" if earlier else f"'{ours}'"
                raise ValueError(f"Options '{alias.name}' and {other} are both given: '{alias.name}' is {alias.source}'s "
                                 f"name for '{ours}' here ({alias.note}). Set only one of them.")
            out[ours.lower()] = ours_value
            given_as[ours.lower()] = alias
    return out, given_as


def explain(message: str, given_as: Mapping[str, Alias]) -> str:
    """An error message about one of our options that the user set by another name, saying so."""
    notes = [f"'{a.ours}' was given as {a.source}'s '{a.name}'" for key, a in given_as.items()
             if a.ours.lower() == key and f"'{a.ours}'" in message]
    return f"{message} ({'; '.join(notes)}.)" if notes else message


def foreign_position(value: object, option: str) -> str:
    """What to write instead of a startingOffsets/endingOffsets position in pulsar-spark's form (a serialized
    message id as a JSON array of bytes) or Kafka's (offsets by partition number); '' for anything else."""
    if isinstance(value, list) and value and all(isinstance(b, int) and not isinstance(b, bool) and -128 <= b <= 255 for b in value):
        fields = message_id_fields(bytes(b & 0xFF for b in value))
        if fields is not None:
            ledger, entry, batch = fields
            ending = option == "endingOffsets"
            if (ledger, entry) == (-1, -1):
                return (" That is pulsar-spark's MessageId.earliest, which no end may be." if ending else
                        " That is pulsar-spark's MessageId.earliest; here write \"earliest\".")
            if ledger == (1 << 63) - 1:
                return " That is pulsar-spark's MessageId.latest; here write \"latest\"."
            written = json.dumps({"ledgerId": ledger, "entryId": entry, **({"batchIndex": batch} if batch >= 0 else {})})
            what = "the first message not read" if ending else "the first message read"
            return f" That is pulsar-spark's serialized message id; here write it as {written} ({what})."
    if isinstance(value, Mapping) and value and all(str(k).lstrip("-").isdigit() for k in value):
        return (" That looks like Kafka's offsets by partition number: here each partition is named in full (e.g. "
                "persistent://public/default/orders-partition-0) and its position is a ledger and entry id (a row's "
                "messageId column holds them).")
    return ""


def describe_names() -> str:
    """Kafka's and pulsar-spark's names as help() shows them (the data source's docstring), from the same table
    as the names table (docs/guides/migrating.md)."""
    lines = []
    for a in ALIASES:
        sets = "".join(f", {k}={v}" for k, v in a.sets)
        text = f"accepted as {a.ours}{' (inverted)' if a.inverted else ''}{sets}: {a.note}."
        lines.append(f"  {a.name} ({a.source})\n" + textwrap.fill(text, 100, initial_indent=" " * 6, subsequent_indent=" " * 6))
    for r in REFUSED:
        text = f"refused{f' (nearest here: {r.ours})' if r.ours else ''}: {r.difference}"
        lines.append(f"  {r.name} ({r.source})\n" + textwrap.fill(text, 100, initial_indent=" " * 6, subsequent_indent=" " * 6))
    return "\n".join(lines)
