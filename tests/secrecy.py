"""Secret-grep helpers shared by the secrecy tests (reads: test_secured_cluster.py, writes: test_sink_failures.py):
a whole Spark application's output, its event log and its checkpoints must show no credential."""

from __future__ import annotations

import re
from pathlib import Path

# A JWT anywhere in an output is a leaked credential (access tokens, static tokens).
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")


def files_text(root: Path, skip_suffixes: tuple[str, ...] = ()) -> str:
    """Every file under `root` (an event log directory, checkpoints), as one text."""
    return "".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file() and p.suffix not in skip_suffixes)


def assert_no_secret(places: dict[str, str], secrets: list[str], context: object = "") -> None:
    """No secret, and no JWT at all, in any place (name -> its text)."""
    for where, text in places.items():
        for secret in secrets:
            assert secret not in text, f"a secret appears in {where} ({context})"
        found = JWT.search(text)
        assert not found, f"a token appears in {where} ({context}): {found.group()[:12]}..."
