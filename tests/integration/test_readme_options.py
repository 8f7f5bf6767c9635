"""The documentation's option reference (docs/reference/options.md) documents exactly the options that exist, the
README starts with its two commands and its quickstart stays valid, and its links into docs/ resolve."""

from __future__ import annotations

import getpass
import html
import re
from pathlib import Path

import pytest

from pulsar_throttled_source.options import OPTIONS, parse_options
from tools import readme_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
OPTIONS_PAGE = (ROOT / "docs" / readme_table.OPTIONS_PAGE).read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def option_table() -> dict[str, tuple[str, str]]:
    """Option name -> (default, meaning), from the option reference's tables (Option | Default | Required | Meaning)."""
    rows = {}
    for line in readme_table.page_table(OPTIONS_PAGE).splitlines():
        cells = [html.unescape(c.strip()) for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            assert cells[0].strip("`") not in rows, f"{cells[0]} is in two groups"
            meaning = cells[3].removeprefix(readme_table.PER_PARTITION.strip())
            rows[cells[0].strip("`")] = ("" if cells[1] == "(none)" else cells[1].strip("`"), meaning.strip())
    return rows


FIX = "Regenerate it: python -m tools.readme_table --write"


def test_readme_option_table_matches_options_both_ways():
    table = option_table()
    missing = [name for name in OPTIONS if name not in table]
    unknown = [name for name in table if name not in OPTIONS]
    assert not missing and not unknown, f"The option reference is out of date: missing {missing}, not options {unknown}. {FIX}"
    wrong_default = {name: (table[name][0], OPTIONS[name][0]) for name in OPTIONS if table[name][0] != OPTIONS[name][0]}
    assert not wrong_default, f"Option reference defaults differ (page, spec): {wrong_default}. {FIX}"
    wrong_meaning = {name: (table[name][1], OPTIONS[name][1]) for name in OPTIONS if table[name][1] != OPTIONS[name][1]}
    assert not wrong_meaning, f"Option reference meanings differ (page, spec): {wrong_meaning}. {FIX}"


def test_readme_option_table_is_the_generated_one():
    """Byte for byte what the generator writes, groups in GROUPS' order: the table is regenerated, never hand-edited."""
    assert readme_table.page_table(OPTIONS_PAGE) == readme_table.render(), FIX
    assert readme_table.rewrite_options(OPTIONS_PAGE) == OPTIONS_PAGE


def test_per_partition_quotas_and_the_required_topic_are_called_out():
    table = readme_table.page_table(OPTIONS_PAGE)
    for name in ("dispatchThrottlingRatePerTopicInMsg", "dispatchThrottlingRatePerSubscriptionInByte"):
        assert re.search(rf"^\| `{name}` \| `-1` \| no \| \*\*Per partition\.\*\* ", table, re.M), name
    assert re.search(r"^\| `dispatchThrottlingRateInMsg` \| `-1` \| no \| Source-wide", table, re.M)
    for name in ("topic", "topics", "topicsPattern"):
        assert f"| `{name}` | (none) | {readme_table.ONE_OF_THE_TOPIC_OPTIONS} |" in table


def test_option_defaults_in_the_table_are_what_parsing_gives():
    """The documented defaults are the parser's: parse with nothing but a topic and the required URLs, and compare."""
    parsed = parse_options({"topic": "t", "service.url": "pulsar://pulsar:6650", "admin.url": "http://pulsar:8080"})
    assert OPTIONS["service.url"][0] == OPTIONS["admin.url"][0] == ""  # required: no default shown
    assert parsed.subscription == OPTIONS["subscription"][0] and parsed.start.kind == OPTIONS["startingOffsets"][0]
    assert str(parsed.poll_timeout_ms) == OPTIONS["pollTimeoutMs"][0]
    assert str(parsed.incomplete_chunk_wait_ms) == OPTIONS["incompleteChunkWaitMs"][0]
    assert str(parsed.admin_timeout_ms) == OPTIONS["adminTimeoutMs"][0]
    assert str(parsed.admin_retry_timeout_ms) == OPTIONS["adminRetryTimeoutMs"][0]
    assert str(parsed.metadata_refresh_ms) == OPTIONS["metadataRefreshIntervalMs"][0]
    assert str(parsed.max_rows_per_arrow_batch) == OPTIONS["maxRowsPerArrowBatch"][0]
    assert str(parsed.max_entries_per_task) == OPTIONS["maxEntriesPerTask"][0]
    assert str(parsed.policy_refresh_ms) == OPTIONS["policyRefreshIntervalMs"][0]
    assert str(parsed.quota.source.period_s) == OPTIONS["ratePeriodInSecond"][0]
    assert str(parsed.quota.non_backlog_threshold_entries) == OPTIONS["nonBacklogThresholdEntries"][0]
    assert parsed.quota.mode == OPTIONS["throttlingMode"][0] and parsed.quota_source == OPTIONS["quotaSource"][0]
    assert parsed.crypto_failure_action == OPTIONS["cryptoFailureAction"][0]
    assert str(parsed.fail_on_data_loss).lower() == OPTIONS["failOnDataLoss"][0]
    assert str(parsed.durable_subscription).lower() == OPTIONS["durableSubscription"][0]
    assert str(parsed.quota.source.relative_to_publish_rate).lower() == OPTIONS["relativeToPublishRate"][0]
    assert str(parsed.quota.throttle_non_backlog).lower() == OPTIONS["dispatchThrottlingOnNonBacklogConsumerEnabled"][0]
    assert parsed.quota_state_path.endswith(OPTIONS["quotaStatePath"][0].removeprefix("<tmp>").replace("<user>", getpass.getuser()))
    for rate in (parsed.quota.source, parsed.topic_rate, parsed.subscription_rate):
        assert str(rate.msgs) == str(rate.bytes) == OPTIONS["dispatchThrottlingRateInMsg"][0]
    assert parsed.max_entries_per_trigger is None and OPTIONS["maxEntriesPerTrigger"][0] == ""


def test_readme_starts_with_the_two_commands():
    commands = re.findall(r"^\s+make (\w+)", README, re.M)
    assert commands[:2] == ["demo", "test"]
    assert README.index("make demo") < README.index("## ")


def test_readme_quickstart_has_valid_options_and_says_what_its_quota_means():
    quickstart = section("Quickstart")
    code = re.search(r"```python\n(.*?)```", quickstart, re.S).group(1)
    assert len(code.strip().splitlines()) == 5
    opts = dict(re.findall(r'\.option\("([^"]+)", "([^"]*)"\)', code.split(".load()")[0]))
    parsed = parse_options(opts)
    assert parsed.quota.mode == "batch" and parsed.topic_rate.msgs == 50
    assert "at most 50 **entries** a second from **each partition**" in quickstart


@pytest.mark.parametrize("link", sorted(set(re.findall(r"\]\(([^)#]+)\)", README))))
def test_readme_links_exist(link):
    if not link.startswith("http"):
        assert (ROOT / link).exists(), link


def test_throttling_doc_covers_the_contract():
    doc = (ROOT / "docs" / "THROTTLING.md").read_text()
    for topic in ("debt", "batch", "precise", "relativeToPublishRate", "dispatchThrottlingOnNonBacklogConsumerEnabled",
                  "quotaSource", "AvailableNow", "Trigger.Once", "quotaStatePath"):
        assert topic in doc, topic
    for name in re.findall(r"`([a-zA-Z.]+)`", doc):
        if name.startswith(("dispatchThrottling", "ratePeriod", "throttlingMode", "nonBacklog", "quota")):
            assert name in OPTIONS, f"docs/THROTTLING.md names an option that does not exist: {name}"
