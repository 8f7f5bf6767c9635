"""Fail if a Pulsar broker or a Spark JVM started by this project is still running.

Run by the Makefile around `make test` and `make demo`: `snapshot` lists the project's
processes already running before (someone else's demo, say), `check FILE` fails if any
other one is left behind after.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

MARKERS = ("org.apache.pulsar.PulsarStandaloneStarter", "org.apache.spark.deploy.SparkSubmit")


def leftovers(ignore: set[str] = frozenset()) -> list[str]:
    found = []
    venv = str(Path(__file__).resolve().parent.parent / ".venv")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or entry.name in ignore:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text().split()
        except OSError:
            continue
        if stat[2] == "Z":
            continue
        is_ours_broker = MARKERS[0] in cmd and "pulsar-throttled-source" in cmd or MARKERS[0] in cmd and os.environ.get("PULSAR_THROTTLED_BROKER_CACHE", "\0") in cmd
        is_ours_spark = MARKERS[1] in cmd and venv in cmd
        if is_ours_broker or is_ours_spark:
            found.append(f"pid {entry.name}: {cmd[:160]}")
    return found


def main() -> int:
    if sys.argv[1:2] == ["snapshot"]:
        print("\n".join(line.split(":")[0].split()[1] for line in leftovers()))
        return 0
    ignore: set[str] = set()
    if sys.argv[1:2] == ["check"] and len(sys.argv) > 2:
        ignore = set(Path(sys.argv[2]).read_text().split())
    deadline = time.monotonic() + 20  # JVMs exit shortly after their Python driver
    while (left := leftovers(ignore)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        print("Processes left running:\n" + "\n".join(left), file=sys.stderr)
        return 1
    print("No broker or Spark process left running.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
