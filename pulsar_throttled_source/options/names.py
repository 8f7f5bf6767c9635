"""An unknown option's error: each name as the user wrote it, the closest options and what they do, in one message
that needs no documentation at hand (a notebook user has none).

Spark loses the case of option names before the source sees them: DataFrameReader keeps them in a
CaseInsensitiveMap, whose iterator (what the Python data source runner sends) yields the lowercased keys, and
PySpark's CaseInsensitiveDict lowercases them again. So a name from Spark is shown lowercased, and said to be;
the suggestions are spelled as documented. Called directly (parse_options, the status command), the name keeps
the caller's case.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from collections.abc import Iterable, Mapping

from .aliases import ALIASES, REFUSED, Refused, refusal_message
from .spec import BY_KEY, SPECS

_SEPARATORS = re.compile(r"[._\-\s]")
WHERE_LISTED = ("Every option and its meaning: help(PulsarThrottledDataSource) (from pulsar_throttled_source import "
                "PulsarThrottledDataSource), or the documentation's option reference (docs/reference/options.md).")


def _squashed(name: str) -> str:
    return _SEPARATORS.sub("", name.lower())


def _candidates() -> dict[str, str | Refused]:
    """Every name a suggestion may start from (lowercased) -> our option it suggests, or the refusal of a Kafka or
    pulsar-spark name (a misspelt maxOffsetsPerTrigger must not be steered to maxEntriesPerTrigger unexplained)."""
    names: dict[str, str | Refused] = {key: spec.name for key, spec in BY_KEY.items()}
    names.update({a.key: a.ours for a in ALIASES})
    names.update({r.key: r for r in REFUSED if not r.name.endswith("*")})
    return names


def brief(name: str) -> str:
    """What an option does, in a few words: its meaning's first sentence, shortened."""
    spec = next((s for s in SPECS if s.name == name), None)
    if spec is None:
        return ""
    first = re.split(r"(?<=[.;])\s", spec.meaning.replace("`", ""), maxsplit=1)[0].rstrip(".;")
    return textwrap.shorten(first, 110, placeholder=" ...")


def suggestions(key: str, limit: int = 3) -> list[str | Refused]:
    """Our options closest to a lowercased unknown name, best first: the same name but for case and separators
    (max_entries_per_trigger), then difflib's closest, over our names and the Kafka and pulsar-spark names."""
    names = _candidates()
    squashed = {_squashed(k): target for k, target in names.items()}
    found: list[str | Refused] = []
    if _squashed(key) in squashed:
        found.append(squashed[_squashed(key)])
    scored = sorted(((difflib.SequenceMatcher(None, key, name).ratio(), name) for name in names), reverse=True)
    best = scored[0][0] if scored else 0.0
    # Only names about as close as the closest: a clear typo gets one suggestion, not two far-fetched ones.
    found += [names[name] for ratio, name in scored if ratio >= max(0.6, best - 0.12)]
    return list(dict.fromkeys(found))[:limit]


def _hint(key: str, shown: str) -> str:
    close = suggestions(key)
    if not close:
        return f"- '{shown}': no option has a similar name."
    if isinstance(close[0], Refused):
        return f"- '{shown}': close to {refusal_message(close[0].key, close[0])}"
    ours = [name for name in close if isinstance(name, str)]
    return f"- '{shown}': did you mean " + "; ".join(f"'{name}' ({brief(name)})" if brief(name) else f"'{name}'"
                                                     for name in ours) + "?"


def unknown_options_message(unknown: Iterable[str], given: Mapping[str, object]) -> str:
    """One line per unknown name (lowercased keys), shown as `given` spells it, with its closest options."""
    spelled = {str(k).lower(): str(k) for k in given}
    shown = {key: spelled.get(key, key) for key in sorted(unknown)}
    lowered = any(name == name.lower() and name != name.upper() for name in shown.values())
    case_note = " (Spark hands option names over lowercased)" if lowered else ""
    lines = [_hint(key, name) for key, name in shown.items()]
    return f"Unknown option(s){case_note}:\n" + "\n".join(lines) + f"\n{WHERE_LISTED}"
