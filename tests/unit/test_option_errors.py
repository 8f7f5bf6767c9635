"""Bad options fail at load() with a message that names the option and what is allowed.

These are the pure option-parsing cases of tests/integration/test_bad_input.py, run through the
DataSource constructor (what Spark calls at load()) without Spark or a broker. The integration
file keeps a few of them end to end, and every case that needs the broker or Spark.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from pulsar_throttled_source.datasource import PulsarThrottledDataSource

TOPIC = "persistent://public/default/bad-input"
UNIQUE = "0123456789"
SECRET = "hunter2"

# (id, options added to a valid base (None removes one), substrings of the message)
# "{topic}", "{unique}" and "{empty_file}" are filled in per run; ids as in test_bad_input.py.
CASES: list[tuple[str, dict[str, str | None], list[str]]] = [
    # quotas and periods
    ("quota-not-a-number", {"dispatchThrottlingRatePerTopicInMsg": "fast"},
     ["'dispatchThrottlingRatePerTopicInMsg'", "'fast' is not a positive integer, or -1 for no limit"]),
    ("quota-zero", {"dispatchThrottlingRateInMsg": "0"}, ["'dispatchThrottlingRateInMsg': 0 is not allowed", "positive integer, or -1 for no limit"]),
    ("quota-negative", {"dispatchThrottlingRatePerSubscriptionInByte": "-7"},
     ["'dispatchThrottlingRatePerSubscriptionInByte': -7 is not allowed", "positive integer, or -1"]),
    ("quota-fraction", {"dispatchThrottlingRatePerTopicInByte": "1.5"}, ["'dispatchThrottlingRatePerTopicInByte': '1.5' is not a positive integer"]),
    ("period-negative", {"ratePeriodInSecond": "-1"}, ["'ratePeriodInSecond': -1 is not allowed", "positive integer (seconds)"]),
    ("period-zero", {"ratePeriodInSecond": "0"}, ["'ratePeriodInSecond': 0 is not allowed"]),
    ("policy-refresh-zero", {"policyRefreshIntervalMs": "0"}, ["'policyRefreshIntervalMs'", "positive integer (milliseconds)"]),
    ("metadata-refresh-negative", {"metadataRefreshIntervalMs": "-5"}, ["'metadataRefreshIntervalMs'", "non-negative integer (milliseconds)"]),
    ("max-entries-per-trigger-zero", {"maxEntriesPerTrigger": "0"}, ["'maxEntriesPerTrigger'", "positive integer (entries)"]),
    ("ending-time-and-offsets", {"endingOffsets": "latest", "endingTime": "1700000000000"},
     ["'endingOffsets' and 'endingTime' are exclusive"]),
    ("ending-time-negative", {"endingTime": "-5"}, ["'endingTime': -5 is not allowed", "epoch time in milliseconds"]),
    ("min-entries-per-trigger-zero", {"minEntriesPerTrigger": "0"}, ["'minEntriesPerTrigger': 0 is not allowed", "positive integer (entries)"]),
    ("trigger-floor-over-max-entries", {"minEntriesPerTrigger": "50", "maxEntriesPerTrigger": "20"},
     ["'minEntriesPerTrigger' (50) and 'maxEntriesPerTrigger' (20) do not fit", "at most 20"]),
    ("trigger-floor-over-source-quota", {"minEntriesPerTrigger": "50", "dispatchThrottlingRateInMsg": "20"},
     ["'minEntriesPerTrigger' (50) and 'dispatchThrottlingRateInMsg' (20 messages per window)"]),
    ("trigger-delay-without-floor", {"maxTriggerDelay": "30s"}, ["'maxTriggerDelay' applies only with 'minEntriesPerTrigger'"]),
    ("trigger-delay-bad-unit", {"minEntriesPerTrigger": "5", "maxTriggerDelay": "30 parsecs"},
     ["'maxTriggerDelay': '30 parsecs' is not allowed", "ms, s, m, min, h, d"]),
    ("trigger-delay-zero", {"minEntriesPerTrigger": "5", "maxTriggerDelay": "0"}, ["'maxTriggerDelay': '0' is not allowed", "positive duration"]),
    ("small-batch-tasks-negative", {"smallBatchTasks": "-1"},
     ["'smallBatchTasks': -1 is not allowed", "non-negative integer (tasks; 0 = one task per partition)"]),
    ("small-batch-tasks-text", {"smallBatchTasks": "cores"}, ["'smallBatchTasks': 'cores' is not a non-negative integer"]),
    ("max-tasks-per-trigger-negative", {"maxTasksPerTrigger": "-2"},
     ["'maxTasksPerTrigger': -2 is not allowed", "non-negative integer (tasks; 0 = no limit)"]),
    ("max-tasks-per-trigger-text", {"maxTasksPerTrigger": "all cores"}, ["'maxTasksPerTrigger': 'all cores' is not a non-negative integer"]),
    ("max-rows-per-batch-text", {"maxRowsPerArrowBatch": "many"}, ["'maxRowsPerArrowBatch': 'many' is not a positive integer"]),
    ("threshold-negative", {"nonBacklogThresholdEntries": "-3"}, ["'nonBacklogThresholdEntries'", "non-negative integer"]),
    ("poll-timeout-zero", {"pollTimeoutMs": "0"}, ["'pollTimeoutMs': 0 is not allowed", "positive integer (milliseconds)"]),
    ("admin-timeout-text", {"adminTimeoutMs": "soon"}, ["'adminTimeoutMs': 'soon' is not a positive integer"]),
    # modes and switches
    ("mode-unknown", {"throttlingMode": "turbo"}, ["'throttlingMode': 'turbo' is not allowed", "one of precise, batch"]),
    ("both-modes-true", {"preciseDispatcherFlowControl": "true", "dispatchThrottlingOnBatchMessageEnabled": "true"},
     ["'preciseDispatcherFlowControl' and 'dispatchThrottlingOnBatchMessageEnabled' are mutually exclusive", "throttlingMode=precise|batch"]),
    ("mode-contradicts-alias", {"throttlingMode": "batch", "preciseDispatcherFlowControl": "true"}, ["'throttlingMode'=batch contradicts", "set only one"]),
    ("quota-source-unknown", {"quotaSource": "zookeeper"}, ["'quotaSource': 'zookeeper'", "one of options, broker, both"]),
    ("boolean-not-boolean", {"failOnDataLoss": "maybe"}, ["'failOnDataLoss': 'maybe' is not allowed; expected true or false"]),
    ("relative-not-boolean", {"relativeToPublishRate": "1"}, ["'relativeToPublishRate': '1'", "true or false"]),
    # starting positions
    ("offsets-malformed-json", {"startingOffsets": '{"{topic}-partition-0": {"ledgerId": 1,'},
     ["'startingOffsets': not 'earliest', 'latest' or valid JSON", "expected e.g."]),
    ("offsets-not-an-object", {"startingOffsets": "[1, 2]"}, ["'startingOffsets': the JSON must be a non-empty object"]),
    ("offsets-missing-entry", {"startingOffsets": '{"{topic}-partition-0": {"ledgerId": 1}}'},
     ["'startingOffsets' for partition {topic}-partition-0", "\"entryId\": <int>"]),
    ("offsets-negative-position", {"startingOffsets": '{"{topic}-partition-0": {"ledgerId": 1, "entryId": -1}}'},
     ["'startingOffsets' for partition {topic}-partition-0: ledgerId and entryId must be >= 0"]),
    ("offsets-and-time", {"startingOffsets": "earliest", "startingTime": "1700000000000"}, ["'startingOffsets' and 'startingTime' are exclusive"]),
    ("time-not-a-number", {"startingTime": "yesterday"}, ["'startingTime': 'yesterday'", "epoch time in milliseconds"]),
    # topics
    ("topic-and-topics", {"topics": "{topic},other"}, ["Exactly one of the options 'topic', 'topics', 'topicsPattern' must be set; found: topic, topics"]),
    ("no-topic", {"topic": None}, ["Exactly one of the options 'topic', 'topics', 'topicsPattern'", "found: none"]),
    ("topic-non-persistent", {"topic": "non-persistent://public/default/x"},
     ["'topic': topic 'non-persistent://public/default/x' is non-persistent", "only persistent topics"]),
    ("topic-malformed", {"topic": "a/b"}, ["'topic': invalid topic name 'a/b'", "persistent://tenant/namespace/topic"]),
    ("pattern-invalid-regex", {"topic": None, "topicsPattern": "persistent://public/default/orders-(["}, ["'topicsPattern'", "is not a valid regular expression"]),
    ("pattern-regex-namespace", {"topic": None, "topicsPattern": "persistent://public/def.*/orders"}, ["'topicsPattern'", "tenant and namespace", "must be literal"]),
    # URLs
    ("service-url-http", {"service.url": "http://127.0.0.1:6650"}, ["'service.url': 'http://127.0.0.1:6650' is not a valid URL", "pulsar://host:port"]),
    ("admin-url-no-scheme", {"admin.url": "localhost:8080"}, ["'admin.url': 'localhost:8080' is not a valid URL", "http://host:port"]),
    ("admin-url-bad-port", {"admin.url": "http://127.0.0.1:99999"}, ["'admin.url'", "is not a valid URL"]),
    # option names and pass-through settings
    ("unknown-option", {"startingOffset": "earliest"},
     ["Unknown option(s) (Spark hands option names over lowercased)", "'startingoffset': did you mean 'startingOffsets' (earliest, latest"]),
    ("kafka-option", {"minOffsetsPerTrigger": "1000"},
     ["'minOffsetsPerTrigger' is Spark's Kafka source's option and is not taken here", "'minEntriesPerTrigger'"]),
    ("max-messages-per-trigger-zero", {"maxMessagesPerTrigger": "0"}, ["'maxMessagesPerTrigger'", "positive integer (messages)"]),
    ("alias-and-ours", {"predefinedSubscription": "a", "subscription": "b"},
     ["Options 'predefinedSubscription' and 'subscription' are both given"]),
    ("unknown-client-setting", {"pulsar.client.noSuchThing": "1"},
     ["'pulsar.client.nosuchthing' is not a setting of pulsar-client", "allowed: ", "pulsar.client.operationtimeoutseconds"]),
    ("client-setting-bad-type", {"pulsar.client.operationTimeoutSeconds": "soon"}, ["'pulsar.client.operationtimeoutseconds': 'soon' is not an integer"]),
    ("reader-setting-bad-type", {"pulsar.reader.receiverQueueSize": "big"}, ["'pulsar.reader.receiverqueuesize': 'big' is not an integer"]),
    ("unknown-admin-setting", {"pulsar.admin.proxy": "x"}, ["'pulsar.admin.proxy' is not an admin setting", "pulsar.admin.authParams"]),
    ("auth-params-unsupported", {"pulsar.client.authParams": f"user=me,password={SECRET}"},
     ["'pulsar.client.authParams': expected 'token:<jwt>'", "file:///path/to/token", "(value not shown)"]),
    ("auth-token-file-missing", {"pulsar.client.authParams": "file:///no/such/token-{unique}"},
     ["'pulsar.client.authParams': cannot read the token file /no/such/token-{unique}"]),
    ("auth-token-file-empty", {"pulsar.admin.authParams": "file://{empty_file}"}, ["'pulsar.admin.authParams': the token file {empty_file} is empty"]),
    ("admin-auth-plugin-unsupported", {"pulsar.admin.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationSasl"},
     ["'pulsar.admin.authPluginClassName'", "is not supported (Kerberos (SASL) is not in pulsar-client", "expected token, tls, oauth2, basic or athenz"]),
    ("auth-plugin-unsupported", {"pulsar.client.authPluginClassName": "com.example.MyAuth"},
     ["'pulsar.client.authPluginClassName': 'com.example.MyAuth' is not supported; expected token, tls, oauth2",
      "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2"]),
    ("subscription-invalid", {"subscription": "bad name!"}, ["'subscription': 'bad name!' is not allowed", "letters, digits"]),
]


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(topic|unique|empty_file)\}", lambda m: values[m.group(1)], text)


def load(opts: dict[str, str]) -> PulsarThrottledDataSource:
    """What Spark does at load(): the options in a case-insensitive dict (keys lowercased), the constructor, then
    schema(), which parses them as a read's (a write parses them as its own, at writer())."""
    options = CaseInsensitiveDict()
    options.update(opts)
    source = PulsarThrottledDataSource(options)
    assert source.parsed is not None
    return source


def base_options(tmp_path: Path) -> dict[str, str]:
    """The valid base of test_bad_input.py, with a broker nobody needs to reach."""
    return {"service.url": "pulsar://127.0.0.1:6650", "admin.url": "http://127.0.0.1:8080", "metadataRefreshIntervalMs": "200",
            "topic": TOPIC, "quotaStatePath": str(tmp_path / "quota.sqlite")}


def test_the_table_is_large_and_names_are_unique():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


def test_the_base_options_load():
    assert load(base_options(Path("/tmp"))).parsed.topics[0].local == "bad-input"


@pytest.mark.parametrize("extra,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_option_fails_at_load_and_says_what_is_allowed(tmp_path, extra, expected):
    empty_file = tmp_path / "empty.token"
    empty_file.write_text("\n")
    values = {"topic": TOPIC, "unique": UNIQUE, "empty_file": str(empty_file)}
    opts = base_options(tmp_path)
    for key, value in extra.items():
        if value is None:
            opts.pop(key, None)
        else:
            opts[key] = _fill(value, values)
    with pytest.raises(ValueError) as err:
        load(opts)
    message = str(err.value)
    for part in expected:
        assert _fill(part, values) in message, f"expected {_fill(part, values)!r} in:\n{message}"
    assert SECRET not in message
