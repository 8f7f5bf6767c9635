"""The documentation site (mkdocs.yml, docs/): it builds with --strict, so every link and #anchor between pages
resolves, and what its pages say stays true to the code: option names in examples exist, the Python API's
signatures are the functions', and user pages carry no commit hashes or issue numbers. About 2 s (two builds)."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_throttled_source.options import OPTIONS, parse_options
from pulsar_throttled_source.options.aliases import ALIASES
from pulsar_throttled_source.options.spec import PREFIX_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Every page of the site (mkdocs.yml's exclude_docs keeps the contributors' DEVELOPMENT.md out of it).
NOT_ON_THE_SITE = {"DEVELOPMENT.md"}
USER_PAGES = sorted(p for p in DOCS.rglob("*.md") if p.name not in NOT_ON_THE_SITE)


def build(config_dir: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2.0 (not a build warning)
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=config_dir, env=env, capture_output=True, text=True, timeout=120)


def test_the_site_builds_with_every_link_and_anchor_resolved(tmp_path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    options = (tmp_path / "site" / "reference" / "options" / "index.html").read_text()
    assert "dispatchThrottlingRatePerTopicInMsg" in options and "Per partition." in options
    assert (tmp_path / "site" / "guides" / "migrating" / "index.html").exists()


def test_a_broken_anchor_fails_the_build(tmp_path):
    """The check can fail: a link to an anchor a page does not have is an error under --strict."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    with (tmp_path / "docs" / "index.md").open("a") as page:
        page.write("\n[a section that is not there](concepts/quotas.md#no-such-section)\n")
    done = build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "does not contain an anchor '#no-such-section'" in done.stderr


SINK_OPTIONS = {"path", "checkpointLocation"}  # the examples' writeStream options, Spark's own


def _known_option(name: str) -> bool:
    lowered = name.lower()
    return (name in OPTIONS or name in SINK_OPTIONS or any(a.name == name for a in ALIASES)
            or any(lowered.startswith(prefix.lower()) for prefix in PREFIX_OPTIONS))


@pytest.mark.parametrize("page", [ROOT / "README.md", *USER_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_an_example_sets_exists(page):
    names = re.findall(r'\.option\("([^"]+)"', page.read_text())
    unknown = [name for name in names if not _known_option(name)]
    assert not unknown, f"{page.name} sets options that do not exist: {unknown}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *USER_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_user_pages_carry_no_commit_hashes_or_issue_numbers(page):
    text = page.read_text()
    assert not re.findall(r"\bissue \d+|\bissues? #\d+|(?<![\w/&])#\d{2,}\b", text, re.I), page.name
    hashes = [word for word in re.findall(r"\b[0-9a-f]{7,12}\b", text) if re.search(r"[a-f]", word) and re.search(r"\d", word)]
    assert not hashes, f"{page.name} names commits: {hashes}"


def _documented_signatures() -> list[tuple[str, str, str]]:
    """(module, name, the call line) for each block of the Python API page that imports a name and then calls it."""
    text = (DOCS / "reference" / "python-api.md").read_text()
    found = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        imported = re.match(r"from (\S+) import (\w+)\n(\2\(.*\))\n$", block)
        if imported:
            found.append(imported.groups())
    return found


def _shown(parameter: inspect.Parameter) -> str:
    if parameter.default is inspect.Parameter.empty:
        return parameter.name
    default = parameter.default
    if callable(default):  # e.g. time.monotonic
        shown = f"{default.__module__}.{default.__name__}"
    else:
        shown = f'"{default}"' if isinstance(default, str) else repr(default)
    return f"{parameter.name}={shown}"


def test_the_python_api_page_shows_each_functions_signature():
    documented = _documented_signatures()
    assert {name for _, name, _ in documented} >= {"catch_up", "source_report", "plot_progress", "progress_points",
                                                   "PulsarThrottleMetrics"}
    for module, name, call in documented:
        function = getattr(importlib.import_module(module), name)
        parts, star_shown = [], False
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not star_shown:
                parts.append("*")
                star_shown = True
            parts.append(_shown(parameter))
        assert call == f"{name}({', '.join(parts)})", f"docs/reference/python-api.md shows {call}; the code has {name}{inspect.signature(function)}"


def _literal_queries(text: str) -> list[dict[str, str]]:
    """The literal options of each query an example defines: from format("pulsar-throttled") to its .load()."""
    queries = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        for query in block.split('format("pulsar-throttled")')[1:]:
            pairs = re.findall(r'\.option\("([^"]+)",\s*"([^"]*)"\)', query.split(".load()")[0])
            queries.append({name: value for name, value in pairs if name not in SINK_OPTIONS})
    return queries


@pytest.mark.parametrize("page", [ROOT / "README.md", *USER_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_query_parses(page):
    """Each example's literal options are valid together (values, bounds, cross-option rules), as load() parses them."""
    for options in _literal_queries(page.read_text()):
        if page.name in ("README.md", "local.md", "databricks.md", "serverless.md"):  # a quickstart is copied whole
            assert {"service.url", "admin.url"} <= set(options), f"{page.name}: a quickstart's query gives both URLs: {options}"
        if not {"topic", "topics", "topicsPattern"} & set(options):
            options["topic"] = "orders"  # an example that elides its topic
        parse_options({"service.url": "pulsar://pulsar:6650", "admin.url": "http://pulsar:8080", **options})  # ... or its broker


def test_the_example_queries_are_found():
    """The parse test above sees the quickstarts' queries (a change of their form must not make it check nothing)."""
    found = {page.name: len(_literal_queries(page.read_text())) for page in [ROOT / "README.md", *USER_PAGES]}
    assert all(found[name] >= 1 for name in ("README.md", "local.md", "databricks.md", "serverless.md")), found
    assert sum(found.values()) >= 10, found


def test_the_package_points_users_at_pages_that_exist():
    """Errors and comments in the package name documentation pages (the README's sections moved to docs/): every
    docs/... page named exists, with the section named beside it, and none points at a README section any more."""
    package = ROOT / "pulsar_throttled_source"
    named = 0
    for source in package.rglob("*.py"):
        text = source.read_text()
        assert not re.search(r"(?<!bench/)(?<!pulsar-spark's )README", text), f"{source} points at the README"
        for page, section in re.findall(r"(docs/[\w/.-]+\.md)(?:, ['\"]([^'\"]+)['\"])?", text):
            named += 1
            assert (ROOT / page).is_file(), f"{source} names {page}, which does not exist"
            if section:
                assert re.search(rf"^#+ {re.escape(section)}", (ROOT / page).read_text(), re.M), f"{source}: no '{section}' in {page}"
    assert named >= 5
    from pulsar_throttled_source.options.names import WHERE_LISTED
    assert "docs/reference/options.md" in WHERE_LISTED and "help(PulsarThrottledDataSource)" in WHERE_LISTED
