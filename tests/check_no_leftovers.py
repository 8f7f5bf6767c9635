"""Fail if a Pulsar broker, a Spark JVM or an OAuth2 test server (tests/identity_provider.py) started by this run is still running.

The Makefile exports PULSAR_THROTTLED_RUN_ID=<id> to `make test` / `make demo`; every broker
and Spark JVM they start inherits it, so `check_no_leftovers.py <id>` finds exactly this run's
processes (someone else's broker on the same machine is not ours to complain about).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

MARKERS = (b"org.apache.pulsar.PulsarStandaloneStarter", b"org.apache.spark.deploy.SparkSubmit",
           b"org.apache.spark.deploy.master.Master", b"org.apache.spark.deploy.worker.Worker",
           b"org.apache.spark.executor.", b"no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt")


def leftovers(run_id: str) -> list[str]:
    found = []
    tag = f"PULSAR_THROTTLED_RUN_ID={run_id}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            if not any(m in cmd for m in MARKERS):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if tag in environ and state != "Z":
            shown = cmd.replace(b"\0", b" ").decode(errors="replace")[:160]
            found.append(f"pid {entry.name}: {shown}")
    return found


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1]:
        print("usage: check_no_leftovers.py RUN_ID", file=sys.stderr)
        return 2
    deadline = time.monotonic() + 20  # JVMs exit shortly after their Python driver
    while (left := leftovers(sys.argv[1])) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        print("Processes left running:\n" + "\n".join(left), file=sys.stderr)
        return 1
    print("No broker or Spark process left running.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
