"""Drives a single-file Java producer under tests/integration/java (the Python client cannot write
transactions, typed primitive schemas, KeyValues or binary keys): run with Java's single-file
launcher on the broker's own client jars, one command per line on stdin, one answer line each
("ok ..." or "err ...")."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

from pulsar_throttled_source.local_broker import resolve_broker_jars

JAVA_DIR = Path(__file__).parent / "integration" / "java"


class JavaProducer:
    def __init__(self, source: str, *args: str) -> None:
        self.proc = subprocess.Popen(["java", "-cp", f"{resolve_broker_jars()}/*", str(JAVA_DIR / source), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._answer()  # "ok ready"

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the Java producer exited (code {self.proc.wait(10)})")
            if line.startswith("ok"):
                return line.strip()
            if line.startswith("err"):
                raise RuntimeError(line.strip())

    def do(self, *commands: str) -> None:
        """Send each command line and wait for its answer (an "err" answer raises)."""
        assert self.proc.stdin is not None
        for command in commands:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
            self._answer()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


class TxnProducer(JavaProducer):
    """Drives java/TxnProducer.java: plain <payload> | begin | send <payload> | commit | abort, on `topic`, or on
    the topic named last to on() (one JVM for many topics: the conftest's session fixture txn_producer)."""

    def __init__(self, service_url: str, topic: str | None = None) -> None:
        super().__init__("TxnProducer.java", service_url, *([topic] if topic else []))

    def on(self, topic: str) -> TxnProducer:
        self.do(f"topic {topic}")
        return self


# A producer's life on a transactional topic: plain messages, a committed and an aborted transaction.
HISTORY = ["plain m0", "begin", "send c0", "send c1", "commit", "plain m1", "begin", "send a0", "send a1", "abort"]
COMMITTED = Counter({b"m0": 1, b"c0": 1, b"c1": 1, b"m1": 1})
