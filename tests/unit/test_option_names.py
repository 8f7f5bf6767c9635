"""Names users know (issue 55): Kafka's and pulsar-spark's option names accepted where they mean exactly one of
ours, refused naming ours otherwise, and an unknown name answered with the closest options and what they do.

Through the DataSource constructor with PySpark's CaseInsensitiveDict, as Spark calls it at load(): no Spark, no
broker. tests/integration/test_bad_input.py reads a topic through spark.readStream by a Kafka name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from pulsar_throttled_source.datasource import PulsarThrottledDataSource
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.options.aliases import ALIASES, REFUSED
from pulsar_throttled_source.options.names import suggestions
from tools import readme_table

NAMES_PAGE = (Path(__file__).resolve().parents[2] / "docs" / readme_table.NAMES_PAGE).read_text()
BASE = {"service.url": "pulsar://127.0.0.1:6650", "admin.url": "http://127.0.0.1:8080", "quotaStatePath": "/tmp/unused.sqlite"}


def load(opts: dict[str, str]) -> PulsarThrottledDataSource:
    """What Spark does at load(): the options in a case-insensitive dict, the constructor, then the read's parse."""
    options = CaseInsensitiveDict()
    options.update({**BASE, **opts})
    source = PulsarThrottledDataSource(options)
    assert source.parsed is not None
    return source


def error_of(opts: dict[str, str]) -> str:
    with pytest.raises(ValueError) as err:
        load(opts)
    return str(err.value)


# (their options, our options that mean exactly the same)
SAME: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("subscribe", {"subscribe": "orders, payments"}, {"topics": "orders,payments"}),
    ("subscribePattern", {"subscribePattern": "orders-.*"}, {"topicsPattern": "orders-.*"}),
    ("startingTimestamp", {"topic": "orders", "startingTimestamp": "1700000000000"}, {"topic": "orders", "startingTime": "1700000000000"}),
    ("endingTimestamp", {"topic": "orders", "endingTimestamp": "1700000000000"}, {"topic": "orders", "endingTime": "1700000000000"}),
    ("kafkaConsumer.pollTimeoutMs", {"topic": "orders", "kafkaConsumer.pollTimeoutMs": "5000"}, {"topic": "orders", "pollTimeoutMs": "5000"}),
    ("predefinedSubscription", {"topic": "orders", "predefinedSubscription": "orders-ingest"},
     {"topic": "orders", "subscription": "orders-ingest", "durableSubscription": "true"}),
    ("allowDifferentTopicSchemas-true", {"topic": "orders", "allowDifferentTopicSchemas": "true"}, {"topic": "orders", "decodeSchema": "false"}),
    ("allowDifferentTopicSchemas-false", {"topic": "orders", "allowDifferentTopicSchemas": "False"}, {"topic": "orders", "decodeSchema": "true"}),
    ("maxOffsetsPerTrigger", {"topic": "orders", "maxOffsetsPerTrigger": "1000"}, {"topic": "orders", "maxMessagesPerTrigger": "1000"}),
]


def test_every_accepted_name_is_tested():
    assert {a.name for a in ALIASES} == {case[0].split("-")[0] for case in SAME}


@pytest.mark.parametrize("theirs,ours", [c[1:] for c in SAME], ids=[c[0] for c in SAME])
def test_an_accepted_name_parses_as_ours(theirs, ours):
    assert load(theirs).parsed == load(ours).parsed


def test_the_accepted_name_changes_what_is_parsed():
    """The comparison above is not vacuous: the alias's value arrives."""
    parsed = load({"subscribe": "orders,payments", "predefinedSubscription": "orders-ingest", "allowDifferentTopicSchemas": "true"}).parsed
    assert [t.local for t in parsed.topics] == ["orders", "payments"]
    assert parsed.subscription == "orders-ingest" and parsed.durable_subscription and not parsed.decode_schema


@pytest.mark.parametrize("theirs,ours", [
    ({"subscribe": "orders"}, {"topics": "payments"}),
    ({"topic": "orders", "startingTimestamp": "1"}, {"startingTime": "2"}),
    ({"topic": "orders", "predefinedSubscription": "a"}, {"subscription": "b"}),
    ({"topic": "orders", "predefinedSubscription": "a"}, {"durableSubscription": "true"}),
    ({"topic": "orders", "allowDifferentTopicSchemas": "true"}, {"decodeSchema": "false"}),
    ({"topic": "orders", "maxOffsetsPerTrigger": "7"}, {"maxMessagesPerTrigger": "7"}),
], ids=["subscribe", "startingTimestamp", "predefinedSubscription", "predefinedSubscription-durable", "allowDifferentTopicSchemas",
        "maxOffsetsPerTrigger"])
def test_an_accepted_name_and_ours_together_are_an_error_naming_both(theirs, ours):
    message = error_of({**theirs, **ours})
    alias = next(iter(k for k in theirs if k != "topic"))
    assert f"Options '{alias}' and '{next(iter(ours))}' are both given" in message, message
    assert "Set only one of them" in message


def test_an_error_about_an_option_given_by_another_name_says_which():
    message = error_of({"topic": "orders", "startingTimestamp": "yesterday"})
    assert "'startingTime': 'yesterday'" in message and "given as Spark's Kafka source's 'startingTimestamp'" in message
    message = error_of({"topic": "orders", "subscribe": "payments"})
    assert "found: topic, topics" in message and "'topics' was given as Spark's Kafka source's 'subscribe'" in message
    assert "expected true or false" in error_of({"topic": "orders", "allowDifferentTopicSchemas": "yes"})


@pytest.mark.parametrize("refused", REFUSED, ids=[r.name for r in REFUSED])
def test_a_refused_name_names_ours_and_the_difference(refused):
    name = refused.name.replace("*", "ssl.truststore.location")
    message = error_of({"topic": "orders", name: "1"})
    assert f"'{name}' is {refused.source}'s option and is not taken here" in message, message
    assert (f"the nearest option here is '{refused.ours}'" if refused.ours else "no option here does the same") in message
    assert refused.difference in message


def test_max_offsets_per_trigger_is_the_message_cap():
    """Kafka's maxOffsetsPerTrigger counts messages, as maxMessagesPerTrigger does: accepted, never the entry cap."""
    parsed = load({"topic": "orders", "maxOffsetsPerTrigger": "1000"}).parsed
    assert parsed.max_messages_per_trigger == 1000 and parsed.max_entries_per_trigger is None
    message = error_of({"topic": "orders", "minOffsetsPerTrigger": "1000"})
    assert "'minOffsetsPerTrigger'" in message  # the documented spelling, though Spark hands it over lowercased
    assert "counts messages; minEntriesPerTrigger counts entries" in message


def test_an_unknown_name_from_spark_is_shown_lowercased_and_says_why():
    message = error_of({"topic": "orders", "maxEntriesPerTriger": "5"})
    assert "Unknown option(s) (Spark hands option names over lowercased)" in message
    assert "'maxentriespertriger': did you mean 'maxEntriesPerTrigger' (Cap on entries per micro-batch" in message
    assert "help(PulsarThrottledDataSource)" in message


def test_an_unknown_name_given_directly_keeps_its_case():
    """The status command and direct callers hand parse_options the names as written."""
    with pytest.raises(ValueError) as err:
        parse_options({"topic": "orders", "maxEntriesPerTriger": "5", "zzzQuux": "1"})
    message = str(err.value)
    assert "lowercased" not in message
    assert "- 'maxEntriesPerTriger': did you mean 'maxEntriesPerTrigger'" in message
    assert "- 'zzzQuux': no option has a similar name." in message


@pytest.mark.parametrize("typo,expected", [
    ("startingoffset", ["startingOffsets"]),
    ("max_entries_per_trigger", ["maxEntriesPerTrigger", "minEntriesPerTrigger"]),
    ("serviceurl", ["service.url"]),
    ("topicpattern", ["topicsPattern"]),
    ("throttlemode", ["throttlingMode"]),
    ("subscriptionname", ["subscription"]),
    ("startingtimestamps", ["startingTime"]),  # near a Kafka name that is accepted: ours
])
def test_suggestions_are_the_closest_names(typo, expected):
    assert [name for name in suggestions(typo) if isinstance(name, str)] == expected


def test_a_misspelt_refused_name_gets_its_refusal():
    """minOffsetPerTrigger must not be steered to minEntriesPerTrigger without saying how they differ."""
    message = error_of({"topic": "orders", "minOffsetPerTrigger": "1000"})
    assert "- 'minoffsetpertrigger': close to 'minOffsetsPerTrigger' is Spark's Kafka source's option" in message
    assert "counts messages; minEntriesPerTrigger counts entries" in message


def test_the_docs_names_table_is_the_generated_one():
    """docs/guides/migrating.md (Coming from Spark's Kafka source or pulsar-spark) holds the generated table."""
    assert readme_table.page_alias_table(NAMES_PAGE) == readme_table.render_aliases(), readme_table.__doc__
    for alias in ALIASES:
        assert f"| `{alias.name}` | {alias.source} | `{alias.ours}`" in NAMES_PAGE
    for refused in REFUSED:
        assert f"| `{refused.name}` | {refused.source} |" in NAMES_PAGE


@pytest.mark.parametrize("option,value,expected", [
    ("startingOffsets", [8, 11, 16, 101, 24, 1, 32, 1],
     "That is pulsar-spark's serialized message id; here write it as {\"ledgerId\": 11, \"entryId\": 101, \"batchIndex\": 1} (the first message read)"),
    ("endingOffsets", [8, 12, 16, 40],
     "here write it as {\"ledgerId\": 12, \"entryId\": 40} (the first message not read)"),
    ("startingOffsets", [8, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 16, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1],
     "That is pulsar-spark's MessageId.earliest; here write \"earliest\""),
    ("endingOffsets", [8, -1, -1, -1, -1, -1, -1, -1, -1, 127, 16, -1, -1, -1, -1, -1, -1, -1, -1, 127],
     "That is pulsar-spark's MessageId.latest; here write \"latest\""),
    ("startingOffsets", {"0": 23, "1": -1}, "That looks like Kafka's offsets by partition number"),
], ids=["pulsar-spark-batched", "pulsar-spark-end", "pulsar-spark-earliest", "pulsar-spark-latest", "kafka"])
def test_a_position_in_kafka_or_pulsar_spark_form_says_what_to_write(option, value, expected):
    import json

    message = error_of({"topic": "orders", option: json.dumps({"persistent://public/default/orders-partition-0": value})})
    assert f"Option '{option}' for partition persistent://public/default/orders-partition-0" in message
    assert expected in message, message


def test_the_message_id_fields_are_the_python_clients():
    import pulsar

    from pulsar_throttled_source.protobuf_wire import message_id_fields

    assert message_id_fields(pulsar.MessageId(3, 12, 40, 2).serialize()) == (12, 40, 2)
    assert message_id_fields(pulsar.MessageId(-1, 7, 9, -1).serialize()) == (7, 9, -1)
    assert message_id_fields(b"\x12\x03abc") is None


def test_help_on_the_data_source_shows_kafkas_and_pulsar_sparks_names():
    import pydoc

    shown = pydoc.render_doc(PulsarThrottledDataSource, renderer=pydoc.plaintext)
    for name in [a.name for a in ALIASES] + [r.name for r in REFUSED]:
        assert f"  {name} (" in shown, name
    assert "accepted as subscription, durableSubscription=true" in shown and "refused (nearest here: minEntriesPerTrigger): minOffsetsPerTrigger counts messages" in shown
