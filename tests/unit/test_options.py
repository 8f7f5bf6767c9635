"""Option parsing: defaults, aliases, and a clear error for each kind of bad input."""

from __future__ import annotations

import re

import pytest
from builders import URLS

from pulsar_throttled_source.admin_endpoint import QuotaStoreEndpoint, without_userinfo
from pulsar_throttled_source.credentials import TlsSettings, TokenAuth
from pulsar_throttled_source.options import SETTINGS, SPECS, parse_options, values
from pulsar_throttled_source.positions import EntryPosition
from tools import readme_table

BASE = {**URLS, "topic": "orders"}


def parse(**extra):
    return parse_options({k.lower(): v for k, v in {**BASE, **extra}.items()})


def test_defaults():
    o = parse()
    assert o.service_url == "pulsar://localhost:6650" and o.admin_url == "http://localhost:8080"
    assert [str(t) for t in o.topics] == ["persistent://public/default/orders"]
    assert o.subscription == "pulsar-throttled" and o.start.kind == "latest"
    assert o.fail_on_data_loss and o.poll_timeout_ms == 120000
    assert o.quota.mode == "precise" and not o.throttled and o.quota_source == "options"


def test_quota_state_is_private_to_the_user_by_default(tmp_path, monkeypatch):
    import getpass
    import os
    import stat
    import tempfile

    from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = parse().quota_state_path
    assert path == str(tmp_path / f"pulsar-throttled-{getpass.getuser()}" / "quota.sqlite")
    SqliteQuotaStore(path)
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    monkeypatch.setattr(getpass, "getuser", lambda: (_ for _ in ()).throw(KeyError("no passwd entry")))
    assert parse().quota_state_path == str(tmp_path / f"pulsar-throttled-{os.getuid()}" / "quota.sqlite")


def test_quota_store_is_the_sqlite_file_unless_a_redis_url_is_given():
    assert parse().quota_store is None and parse(quotaStore=" ").quota_store is None
    o = parse(quotaStore="redis://redis.example:6379/2", quotaStorePassword="pw-123")
    assert o.quota_store == QuotaStoreEndpoint("redis://redis.example:6379/2", None, "pw-123") and "pw-123" not in repr(o)
    assert parse(quotaStore="rediss://reader@redis.example:6380").quota_store == QuotaStoreEndpoint("rediss://redis.example:6380", "reader")
    for bad in ("http://redis.example:6379", "redis://redis.example:99999", "redis://:6379", "redis://redis.example:6379/x"):
        with pytest.raises(ValueError, match=r"Option 'quotaStore': '.*' is not a valid store URL; expected "
                                             r"redis://\[user@\]host:port\[/db\] or rediss://"):
            parse(quotaStore=bad)
    with pytest.raises(ValueError, match="Option 'quotaStorePassword' applies only with 'quotaStore'"):
        parse(quotaStorePassword="pw-123")


@pytest.mark.parametrize("url", ["redis://:pw-123@redis.example:6379/2", "rediss://reader:pw-123@redis.example:6380",
                                 "redis://:p@ss:pw-123@[::1]:6379/0", "redis://:pw-123@redis.example:99999"])
def test_a_password_in_the_quota_store_url_is_refused_saying_where_it_goes(url):
    """Spark shows quotaStore's value in explain() (its name matches neither spark.redaction.regex nor
    spark.sql.redaction.options.regex): a password in it is refused, never echoed, and quotaStorePassword named."""
    with pytest.raises(ValueError, match=r"Option 'quotaStore': '.*:\*\*\*@.*' (holds a password|is not a valid)") as error:
        parse(quotaStore=url)
    assert "pw-123" not in str(error.value) and "p@ss" not in str(error.value)
    if "99999" not in url:
        assert "option 'quotaStorePassword'" in str(error.value)
    if url.startswith("rediss://reader"):
        assert "and the URL as rediss://reader@redis.example:6380" in str(error.value)


@pytest.mark.parametrize("option,url,goes", [
    ("admin.url", "http://reader:pw-123@broker.example:8080", "pulsar.admin.authPluginClassName=basic"),
    ("admin.url", "https://reader:p@w:pw-123@[2001:db8::1]:8443/", "pulsar.admin.authParams"),
    ("admin.url", "http://reader@broker.example:8080", "pulsar.admin.authParams"),
    ("service.url", "pulsar://reader:pw-123@broker.example:6650", "pulsar.client.authParams"),
])
def test_user_info_in_a_url_option_is_refused_saying_where_credentials_go(option, url, goes):
    with pytest.raises(ValueError, match=rf"Option '{re.escape(option)}': .* holds a user name or password") as error:
        parse(**{option: url})
    message = str(error.value)
    assert "pw-123" not in message and "p@w" not in message and goes in message
    assert without_userinfo(url).rstrip("/") in message


def test_quota_options_and_aliases():
    o = parse(dispatchThrottlingRatePerTopicInMsg="50", dispatchThrottlingOnBatchMessageEnabled="true", ratePeriodInSecond="5")
    assert o.topic_rate.msgs == 50 and o.topic_rate.period_s == 5 and o.quota.mode == "batch" and o.throttled
    assert parse(preciseDispatcherFlowControl="true").quota.mode == "precise"
    assert parse(throttlingMode="BATCH").quota.mode == "batch"


def test_service_and_admin_urls_are_required_naming_both_and_what_they_look_like():
    """No default broker: localhost:8080 may be another server (a Spark standalone master's UI)."""
    for given, missing in (({}, "Options 'service.url' and 'admin.url' are required"),
                           ({"service.url": "pulsar://h:6650"}, "Option 'admin.url' is required"),
                           ({"admin.url": "http://h:8080"}, "Option 'service.url' is required"),
                           ({"service.url": " ", "admin.url": "http://h:8080"}, "Option 'service.url' is required")):
        with pytest.raises(ValueError) as e:
            parse_options({"topic": "orders", **given})
        text = str(e.value)
        assert text.startswith(missing), text
        for shape in ("pulsar://host:6650", "pulsar+ssl://", "http://host:8080", "https://"):
            assert shape in text, (shape, text)
    # Checked before everything else: a query with no URLs and no topic hears about the URLs first.
    with pytest.raises(ValueError, match="^Options 'service.url' and 'admin.url' are required"):
        parse_options({})
    # The status command asks the admin API only: admin.url is required there, service.url is not.
    with pytest.raises(ValueError, match="^Option 'admin.url' is required"):
        parse_options({"topic": "orders"}, reads=False)
    assert parse_options({"topic": "orders", "admin.url": "http://h:8080"}, reads=False).service_url == ""


def test_topics_list_and_pattern():
    o = parse_options({**URLS, "topics": "a, b,a", "service.url": "pulsar://h:1"})
    assert [t.local for t in o.topics] == ["a", "b"]
    o = parse_options({**URLS, "topicspattern": "persistent://public/default/orders-.*"})
    assert o.topics_pattern is not None and o.pattern_namespace == "public/default"
    assert o.topics_pattern.fullmatch("persistent://public/default/orders-1")


def test_starting_offsets_json_and_time():
    o = parse(startingOffsets='{"persistent://public/default/orders-partition-0": {"ledgerId": 5, "entryId": 3}, "orders-partition-1": "earliest", "orders-partition-2": -1}')
    assert dict(o.start.positions) == {
        "persistent://public/default/orders-partition-0": EntryPosition(5, 3),
        "persistent://public/default/orders-partition-1": "earliest",
        "persistent://public/default/orders-partition-2": "latest"}
    assert parse(startingTime="1700000000000").start.time_ms == 1700000000000


def test_client_and_reader_passthrough_and_secret_hidden():
    o = parse(**{"pulsar.client.operationTimeoutSeconds": "7", "pulsar.reader.receiverQueueSize": "500",
                 "pulsar.client.authParams": "token:SECRET-TOKEN-123"})
    assert dict(o.client_kwargs) == {"operation_timeout_seconds": 7, "tls_validate_hostname": True}
    assert dict(o.reader_kwargs) == {"receiver_queue_size": 500}
    assert o.credentials == o.admin_credentials == TokenAuth(token="SECRET-TOKEN-123")
    assert "SECRET-TOKEN-123" not in repr(o)


BAD = [
    ({}, "Exactly one of the options 'topic', 'topics', 'topicsPattern'"),
    ({"topics": "x"}, "found: topic, topics"),
    ({"dispatchThrottlingRatePerTopicInMsg": "0"}, "'dispatchThrottlingRatePerTopicInMsg': 0 is not allowed; expected a positive integer, or -1"),
    ({"dispatchThrottlingRateInByte": "lots"}, "'dispatchThrottlingRateInByte': 'lots' is not a positive integer"),
    ({"dispatchThrottlingRatePerSubscriptionInMsg": "-5"}, "'dispatchThrottlingRatePerSubscriptionInMsg': -5 is not allowed"),
    ({"dispatchThrottlingRatePerTopicInByte": "1.5"}, "'dispatchThrottlingRatePerTopicInByte'"),
    ({"ratePeriodInSecond": "0"}, "'ratePeriodInSecond': 0 is not allowed; expected a positive integer"),
    ({"ratePeriodInSecond": "-1"}, "'ratePeriodInSecond': -1 is not allowed"),
    ({"throttlingMode": "fast"}, "'throttlingMode': 'fast' is not allowed; expected one of precise, batch"),
    ({"preciseDispatcherFlowControl": "true", "dispatchThrottlingOnBatchMessageEnabled": "true"}, "mutually exclusive"),
    ({"throttlingMode": "precise", "dispatchThrottlingOnBatchMessageEnabled": "true"}, "contradicts"),
    ({"quotaSource": "zookeeper"}, "'quotaSource': 'zookeeper' is not allowed; expected one of options, broker, both"),
    ({"startingOffsets": "{not json"}, "'startingOffsets': not 'earliest', 'latest' or valid JSON"),
    ({"startingOffsets": "[]"}, "'startingOffsets': the JSON must be a non-empty object"),
    ({"startingOffsets": '{"orders-partition-0": {"ledgerId": 1}}'}, "'startingOffsets' for partition"),
    ({"startingOffsets": "earliest", "startingTime": "5"}, "exclusive"),
    ({"startingTime": "yesterday"}, "'startingTime'"),
    ({"failOnDataLoss": "maybe"}, "'failOnDataLoss': 'maybe' is not allowed; expected true or false"),
    ({"service.url": "http://x:6650"}, "'service.url': 'http://x:6650' is not a valid URL; expected pulsar://host:port"),
    ({"admin.url": "localhost:8080"}, "'admin.url'"),
    ({"admin.url": "http://host:99999"}, "'admin.url'"),
    ({"pollTimeoutMs": "0"}, "'pollTimeoutMs': 0 is not allowed"),
    ({"nonBacklogThresholdEntries": "-3"}, "'nonBacklogThresholdEntries'"),
    ({"dispatchThrottlingOnNonBacklogConsumerEnabled": "yes"}, "'dispatchThrottlingOnNonBacklogConsumerEnabled'"),
    ({"relativeToPublishRate": "1"}, "'relativeToPublishRate'"),
    ({"maxEntriesPerTrigger": "0"}, "'maxEntriesPerTrigger'"),
    ({"subscription": "bad name!"}, "'subscription'"),
    ({"startingOffset": "earliest"}, "- 'startingoffset': did you mean 'startingOffsets'"),
    ({"pulsar.client.noSuchThing": "1"}, "'pulsar.client.nosuchthing' is not a setting of pulsar-client"),
    ({"pulsar.reader.receiverQueueSize": "big"}, "'pulsar.reader.receiverqueuesize': 'big' is not an integer"),
    ({"pulsar.client.authParams": "password=hunter2"}, "'pulsar.client.authParams': expected 'token:<jwt>'"),
    ({"policyRefreshIntervalMs": "-1"}, "'policyRefreshIntervalMs'"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_option_names_the_option_and_what_is_allowed(extra, message):
    opts = URLS if not extra and message.startswith("Exactly") else BASE
    raw = {**opts, **extra}
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_options({k.lower(): v for k, v in raw.items()})


def test_invalid_pattern():
    with pytest.raises(ValueError, match="'topicsPattern'.*not a valid regular expression"):
        parse_options({**URLS, "topicspattern": "persistent://public/default/orders-(["})


def test_secret_never_in_error_messages():
    with pytest.raises(ValueError) as err:
        parse_options({**BASE, "pulsar.client.authparams": "hunter2-secret"})
    assert "hunter2" not in str(err.value)


def test_durable_subscription_needs_a_name_of_its_own():
    with pytest.raises(ValueError, match="durableSubscription.*'subscription'"):
        parse_options({**URLS, "topic": "t", "durablesubscription": "true"})
    o = parse_options({**URLS, "topic": "t", "durablesubscription": "true", "subscription": "orders-ingest"})
    assert o.durable_subscription and o.subscription == "orders-ingest"
    assert not parse_options({**URLS, "topic": "t"}).durable_subscription


# ---------------------------------------------------------------------------------------
# The spec table drives the parser: defaults, bounds and allowed values come from it.

INT_SPECS = [s for s in SPECS if s.kind in ("int", "quota")]
CHOICE_SPECS = [s for s in SPECS if s.kind == "choice"]
BOOL_SPECS = [s for s in SPECS if s.kind == "bool"]


@pytest.mark.parametrize("spec", INT_SPECS, ids=lambda s: s.name)
def test_integer_options_take_default_and_bounds_from_the_spec(spec):
    assert values.integer({}, spec.name) == spec.default == values.integer({spec.key: " "}, spec.name)
    assert values.integer({spec.key: str(spec.minimum)}, spec.name) == spec.minimum
    below = spec.minimum - 1 if spec.kind == "int" else 0
    with pytest.raises(ValueError, match=re.escape(f"Option '{spec.name}': {below} is not allowed; expected {spec.expected}.")):
        parse(**{spec.name: str(below)})
    with pytest.raises(ValueError, match=re.escape(f"Option '{spec.name}': 'x1' is not {spec.expected}.")):
        parse(**{spec.name: "x1"})
    if spec.kind == "quota":
        assert values.integer({spec.key: "-1"}, spec.name) == -1


@pytest.mark.parametrize("spec", CHOICE_SPECS, ids=lambda s: s.name)
def test_choice_options_accept_exactly_the_spec_values(spec):
    assert values.choice({}, spec.name) == spec.default in spec.allowed
    for value in spec.allowed:
        assert values.choice({spec.key: value.upper()}, spec.name) == value
    with pytest.raises(ValueError, match=re.escape(f"Option '{spec.name}': 'nope' is not allowed; expected one of {', '.join(spec.allowed)}.")):
        parse(**{spec.name: "nope"})


@pytest.mark.parametrize("spec", BOOL_SPECS, ids=lambda s: s.name)
def test_bool_options(spec):
    assert values.boolean({}, spec.name) is spec.default
    assert values.boolean({spec.key: "TRUE"}, spec.name) is True
    with pytest.raises(ValueError, match=re.escape(f"Option '{spec.name}': 'maybe' is not allowed; expected true or false.")):
        parse(**{spec.name: "maybe"})


def test_every_option_of_the_table_is_accepted_and_nothing_else():
    from pulsar_throttled_source.options.spec import BY_KEY

    assert {s.key for s in SPECS if s.kind != "prefix"} == set(BY_KEY)
    assert len({s.key for s in SPECS}) == len(SPECS)
    with pytest.raises(ValueError, match="Unknown option"):
        parse(pollTimeout="5")


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.secret], ids=lambda s: s.prefix + s.name)
def test_secret_settings_never_show_their_value(setting):
    params = setting.name == "authParams"  # a bare authToken is any string: no error to make
    if params:
        with pytest.raises(ValueError) as err:
            parse(**{setting.prefix + setting.name: "user=x,password=hunter2-secret"})
        assert "hunter2" not in str(err.value) and "(value not shown)" in str(err.value)
    o = parse(**{setting.prefix + setting.name: "token:hunter2-ok" if params else "hunter2-ok"})
    assert "hunter2" not in repr(o) and TokenAuth(token="hunter2-ok") in (o.credentials, o.admin_credentials)


def test_admin_settings_read_under_every_accepted_spelling():
    o = parse(**{"pulsar.admin.tls_trust_certs_file_path": "/ca.pem"})
    assert o.admin_tls.trust_file == "/ca.pem" and o.admin_tls.verify == "/ca.pem"
    o = parse(**{"pulsar.admin.tls.allow.insecure.connection": "true", "pulsar.admin.auth_token": "abc"})
    assert o.admin_tls.verify is False and o.admin_credentials == TokenAuth(token="abc")
    o = parse(**{"pulsar.admin.tlsHostnameVerificationEnable": "false"})  # the Java client's name
    assert not o.admin_tls.validate_hostname
    with pytest.raises(ValueError, match="'pulsar.admin.tlsAllowInsecureConnection': 'perhaps' is not allowed"):
        parse(**{"pulsar.admin.tlsAllowInsecureConnection": "perhaps"})


def test_docs_table_generator_rewrites_only_the_tables(tmp_path):
    """tools/readme_table.py replaces what is between each page's markers, and nothing else."""
    options_begin, options_end = readme_table.OPTIONS_MARKERS
    names_begin, names_end = readme_table.NAMES_MARKERS
    stale_options = "# Options\n\nIntro.\n\n" + options_begin + "| `old` | (none) | no | Gone. |\n" + options_end + "\nAfter.\n"
    stale_names = "# Names\n\n" + names_begin + readme_table.ALIAS_HEADER + "| `old` | Kafka | (none) | refused: gone. |\n" + names_end + "More.\n"
    (tmp_path / "reference").mkdir()
    (tmp_path / "guides").mkdir()
    options_page, names_page = tmp_path / readme_table.OPTIONS_PAGE, tmp_path / readme_table.NAMES_PAGE
    options_page.write_text(stale_options)
    names_page.write_text(stale_names)
    assert readme_table.main(["--check", "--docs", str(tmp_path)]) == 1
    assert readme_table.main(["--write", "--docs", str(tmp_path)]) == 0
    assert options_page.read_text() == ("# Options\n\nIntro.\n\n" + options_begin + readme_table.render() + options_end + "\nAfter.\n")
    assert names_page.read_text() == "# Names\n\n" + names_begin + readme_table.render_aliases() + names_end + "More.\n"
    assert readme_table.main(["--check", "--docs", str(tmp_path)]) == 0
    rows = [line for line in readme_table.render().splitlines() if line.startswith("| `")]
    assert len(rows) == len(SPECS) and {row.split(" | ")[0][3:-1] for row in rows} == {spec.name for spec in SPECS}
    assert rows[0].startswith("| `service.url` | (none) | yes |") and rows[1].startswith("| `admin.url` | (none) | yes |")
    assert [row.split(" | ")[0][3:-1] for row in rows if " | yes | " in row] == ["service.url", "admin.url"]
    assert "&#124;" in readme_table.render() and all(row.count(" | ") == 3 for row in rows)
    options_page.write_text("# Options, with the markers gone\n")
    with pytest.raises(ValueError, match="reference/options.md has no generated table between"):
        readme_table.main(["--check", "--docs", str(tmp_path)])


def test_every_option_is_in_exactly_one_group_of_the_reference(monkeypatch):
    """A new option fails the generator, naming it, until it is placed in a group."""
    assert sum(len(specs) for _, specs in readme_table.grouped()) == len(SPECS)
    new = SPECS[0].__class__("brandNewOption", "int", 1, "New.")
    monkeypatch.setattr(readme_table, "SPECS", (*SPECS, new))
    with pytest.raises(ValueError, match=r"options in no group \['brandNewOption'\]"):
        readme_table.render()


def test_one_mapping_from_the_options_to_a_read_task_and_its_admin_sessions():
    from pulsar_throttled_source.admin_endpoint import AdminEndpoint
    from pulsar_throttled_source.metadata.admin import PulsarAdmin
    from pulsar_throttled_source.schemas.columns import ValueSchema

    o = parse(**{"service.url": "pulsar://b:6651", "admin.url": "https://a:8443", "pulsar.client.authParams": "token:T-1",
                 "pulsar.admin.authToken": "A-2", "pulsar.admin.tlsTrustCertsFilePath": "/ca.pem", "adminTimeoutMs": "4000",
                 "adminRetryTimeoutMs": "9000", "pollTimeoutMs": "7000", "maxRowsPerArrowBatch": "123",
                 "failOnDataLoss": "false", "incompleteChunkWaitMs": "1234", "cryptoFailureAction": "discard",
                 "encryption.privateKeyPath": "/k.pem", "readPath": "python",
                 "pulsar.reader.receiverQueueSize": "50", "pulsar.client.operationTimeoutSeconds": "3"})
    assert o.admin == AdminEndpoint("https://a:8443", TokenAuth(token="A-2"), TlsSettings(trust_file="/ca.pem"), 4000)
    cfg = o.read_task_config(ValueSchema("STRING"))
    assert cfg.admin == o.admin and "A-2" not in repr(cfg) and "T-1" not in repr(cfg)
    assert (cfg.service_url, cfg.credentials, dict(cfg.client_kwargs), dict(cfg.reader_kwargs)) == (
        "pulsar://b:6651", TokenAuth(token="T-1"), {"operation_timeout_seconds": 3, "tls_validate_hostname": True},
        {"receiver_queue_size": 50})
    assert (cfg.poll_timeout_ms, cfg.max_rows_per_batch, cfg.fail_on_data_loss, cfg.incomplete_chunk_wait_ms) == (7000, 123, False, 1234)
    assert (cfg.private_key_path, cfg.public_key_path, cfg.crypto_failure_action, cfg.read_path) == ("/k.pem", None, "discard", "python")
    assert cfg.value_schema == ValueSchema("STRING")
    # The sessions: planning retries for adminRetryTimeoutMs, a read task for pollTimeoutMs, its quick checks never.
    sessions = [PulsarAdmin.for_planning(o), PulsarAdmin.for_read_task(cfg), PulsarAdmin.for_quick_checks(cfg)]
    try:
        assert {(s.base, s._verify, repr(s._session.auth)) for s in sessions} == {("https://a:8443", "/ca.pem", "StaticToken(***)")}
        assert [(s.timeout_s, s.retry_timeout_s) for s in sessions] == [(4.0, 9.0), (4.0, 7.0), (4.0, 0.0)]
    finally:
        for s in sessions:
            s.close()


def test_a_position_inside_an_entry_names_its_batch_index():
    from pulsar_throttled_source.positions import MessagePosition

    o = parse(startingOffsets='{"orders-partition-0": {"ledgerId": 5, "entryId": 3, "batchIndex": 4}}',
              endingOffsets='{"orders-partition-0": {"ledgerId": 5, "entryId": 9, "batchIndex": 0}}')
    assert dict(o.start.positions) == {"persistent://public/default/orders-partition-0": MessagePosition(5, 3, 4)}
    assert o.start.inside_entries() == {"persistent://public/default/orders-partition-0": MessagePosition(5, 3, 4)}
    assert dict(o.end.positions) == {"persistent://public/default/orders-partition-0": MessagePosition(5, 9, 0)}
    assert o.end.inside_entries() == {}  # a batchIndex of 0 is the whole entry
    for bad in ('-1', '"2"', 'true', '1.5'):
        with pytest.raises(ValueError, match=r"'startingOffsets' for partition .*: batchIndex must be an integer >= 0"):
            parse(startingOffsets=f'{{"orders-partition-0": {{"ledgerId": 5, "entryId": 3, "batchIndex": {bad}}}}}')
    with pytest.raises(ValueError, match=r"'endingOffsets' for partition .*expected an object .*batchIndex"):
        parse(endingOffsets='{"orders-partition-0": {"ledgerId": 5, "batch": 3}}')


def test_help_on_the_data_source_shows_every_option_and_its_default():
    """The data source's docstring is generated from the spec table, as the documentation's option reference is."""
    import pydoc

    from pulsar_throttled_source import PulsarThrottledDataSource

    shown = pydoc.render_doc(PulsarThrottledDataSource, renderer=pydoc.plaintext)
    for spec in SPECS:
        default = " (required)" if spec.required else f" (default: {spec.readme_default})" if spec.readme_default else ""
        assert f"{spec.name}{default}\n" in shown, spec.name
    assert "service.url (required)\n" in shown and "admin.url (required)\n" in shown


@pytest.mark.parametrize("option,url", [("admin.url", "http://reader:pw/123@broker.example:8080"),
                                        ("quotaStore", "redis://:pw?123@redis.example:6379/0")])
def test_a_url_whose_password_no_parser_can_find_is_not_echoed(option, url):
    """An unencoded '/' or '?' in a password ends the authority early: the value is refused without being shown."""
    with pytest.raises(ValueError, match=rf"Option '{option}': \(value not shown: it holds an '@' outside a user-info\) is not a valid") as error:
        parse(**{option: url})
    assert "123" not in str(error.value)


def test_service_url_may_name_several_brokers_as_pulsars_clients_take_a_cluster():
    # Issue 52: a cluster's brokers in one service URL (the client looks up through any of them).
    assert parse(**{"service.url": "pulsar://b1:6650,b2:6650/"}).service_url == "pulsar://b1:6650,b2:6650"
    assert parse(**{"service.url": "pulsar+ssl://b1:6651,b2:6651"}).service_url == "pulsar+ssl://b1:6651,b2:6651"
    for bad in ("pulsar://b1:6650,", "pulsar://b1:6650,b2:99999", "pulsar://b1:6650,:6650"):
        with pytest.raises(ValueError, match=re.escape(f"'service.url': '{bad}' is not a valid URL; expected "
                                                       "pulsar://host:port,host:port or pulsar+ssl://")):
            parse(**{"service.url": bad})
    # admin.url too, as Pulsar's admin clients take several (a host that does not answer: the next is asked).
    assert parse(**{"admin.url": "http://a1:8080,a2:8080/"}).admin_url == "http://a1:8080,a2:8080"
    assert parse(**{"admin.url": "https://a1:8443,a2:8443"}).admin.url == "https://a1:8443,a2:8443"
    for bad in ("http://a1:8080,", "http://a1:8080,a2:99999", "http://a1:8080,:8080"):
        with pytest.raises(ValueError, match=re.escape(f"'admin.url': '{bad}' is not a valid URL; expected "
                                                       "http://host:port,host:port or https://host:port,host:port.")):
            parse(**{"admin.url": bad})
