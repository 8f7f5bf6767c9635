"""A development tool, NOT used by queries and not in the wheel: the README's option table, generated
from the spec table (pulsar_throttled_source/options/spec.py), and its table of Kafka's and pulsar-spark's
option names (options/aliases.py), so that neither is edited by hand. It
works in a source checkout (it edits the README.md at the repository root), run from that root;
tests/integration/test_readme_options.py checks the README against it.

    python -m tools.readme_table            # print the table
    python -m tools.readme_table --write    # replace the table in README.md
    python -m tools.readme_table --check    # exit 1 when README.md differs
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pulsar_throttled_source.options.aliases import ALIASES, REFUSED
from pulsar_throttled_source.options.spec import SPECS

README = Path(__file__).resolve().parents[1] / "README.md"
HEADER = "| Option | Default | Meaning |\n|---|---|---|\n"
# The table inside the README's "## Options" section: its header and every row after it.
_TABLE = re.compile(r"(^## Options\n(?:(?!^## ).*\n)*?)(" + re.escape(HEADER) + r"(?:\|.*\|\n)*)", re.M)
ALIAS_HEADER = "| Their option | From | Here | What carries over, or the difference |\n|---|---|---|---|\n"
_ALIAS_TABLE = re.compile(r"(^## Options\n(?:(?!^## ).*\n)*?)(" + re.escape(ALIAS_HEADER) + r"(?:\|.*\|\n)*)", re.M)


def render() -> str:
    """The markdown table, one row per spec; '|' inside a meaning is escaped so the row keeps three cells."""
    rows = []
    for spec in SPECS:
        shown = f"`{spec.readme_default}`" if spec.readme_default else "(none)"
        rows.append(f"| `{spec.name}` | {shown} | {spec.meaning.replace('|', '&#124;')} |\n")
    return HEADER + "".join(rows)


def render_aliases() -> str:
    """The Kafka and pulsar-spark names: accepted ones (and what carries over), then refused ones (and why)."""
    def row(*cells: str) -> str:
        return "| " + " | ".join(c.replace("|", "&#124;") for c in cells) + " |\n"

    rows = [row(f"`{a.name}`", a.source, f"`{a.ours}`" + (" (inverted)" if a.inverted else "")
                + "".join(f", `{k}={v}`" for k, v in a.sets), f"accepted: {a.note}") for a in ALIASES]
    rows += [row(f"`{r.name}`", r.source, f"`{r.ours}`" if r.ours else "(none)", f"refused: {r.difference}") for r in REFUSED]
    return ALIAS_HEADER + "".join(rows)


def readme_table(readme: str) -> str:
    """The option table as it stands in the README text."""
    match = _TABLE.search(readme)
    if not match:
        raise ValueError("README has no option table under '## Options'")
    return match.group(2)


def readme_alias_table(readme: str) -> str:
    """The Kafka and pulsar-spark names' table as it stands in the README text."""
    match = _ALIAS_TABLE.search(readme)
    if not match:
        raise ValueError("README has no table of Kafka's and pulsar-spark's names under '## Options'")
    return match.group(2)


def rewrite(readme: str) -> str:
    """The README text with its option table replaced by render(), and its names table by render_aliases()."""
    readme_table(readme)  # fails when there is no table to replace
    readme_alias_table(readme)
    text = _TABLE.sub(lambda m: m.group(1) + render(), readme, count=1)
    return _ALIAS_TABLE.sub(lambda m: m.group(1) + render_aliases(), text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="replace the table in the README")
    action.add_argument("--check", action="store_true", help="exit 1 when the README's table differs")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    if args.write:
        args.readme.write_text(rewrite(args.readme.read_text()))
    elif args.check:
        text = args.readme.read_text()
        if readme_table(text) != render() or readme_alias_table(text) != render_aliases():
            print(f"{args.readme}: the option table is out of date; run python -m tools.readme_table --write",
                  file=sys.stderr)
            return 1
    else:
        sys.stdout.write(render() + "\n" + render_aliases())
    return 0


if __name__ == "__main__":
    sys.exit(main())
