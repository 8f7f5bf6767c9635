"""Issue 5: the README documents exactly the options that exist, and its examples stay valid."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from pulsar_throttled_source.options import OPTIONS, parse_options

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def option_table() -> dict[str, str]:
    """Option name -> default, from the README's '## Options' table."""
    rows = {}
    for line in section("Options").splitlines():
        cells = [html.unescape(c.strip()) for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = "" if cells[1] == "(none)" else cells[1].strip("`")
    return rows


def expected_table() -> str:
    """The table as it should read, to paste into the README when OPTIONS changes."""
    lines = ["| Option | Default | Meaning |", "|---|---|---|"]
    for name, (default, meaning) in OPTIONS.items():
        shown = f"`{default}`" if default else "(none)"
        lines.append(f"| `{name}` | {shown} | {meaning.replace('|', '&#124;')} |")
    return "\n".join(lines)


def test_readme_option_table_matches_options_both_ways():
    table = option_table()
    missing = [name for name in OPTIONS if name not in table]
    unknown = [name for name in table if name not in OPTIONS]
    assert not missing and not unknown, (
        f"README options table is out of date: missing {missing}, not options {unknown}. Expected table:\n{expected_table()}")
    wrong_default = {name: (table[name], OPTIONS[name][0]) for name in OPTIONS if table[name] != OPTIONS[name][0]}
    assert not wrong_default, f"README defaults differ (README, OPTIONS): {wrong_default}"


def test_readme_starts_with_the_two_commands():
    commands = re.findall(r"^\s+make (\w+)", README, re.M)
    assert commands[:2] == ["demo", "test"]
    assert README.index("make demo") < README.index("## ")


def test_readme_usage_example_has_valid_options():
    usage = section("Usage")
    code = re.search(r"```python\n(.*?)```", usage, re.S).group(1)
    assert len(code.strip().splitlines()) == 5
    opts = dict(re.findall(r'\.option\("([^"]+)", "([^"]*)"\)', code.split(".load()")[0]))
    parsed = parse_options(opts)
    assert parsed.quota.mode == "batch" and parsed.topic_rate.msgs == 50


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
