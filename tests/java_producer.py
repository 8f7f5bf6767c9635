"""Drives a single-file Java producer under tests/integration/java (the Python client cannot write
transactions, typed primitive schemas, KeyValues or binary keys): compiled once per machine and run on the
broker's own client jars, one command per line on stdin, one answer line each ("ok ..." or "err ...")."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from pulsar_throttled_source.local_broker import resolve_broker_jars

JAVA_DIR = Path(__file__).parent / "integration" / "java"
CACHE = Path.home() / ".cache" / "pulsar-throttled-source" / "java-producers"


def _command(source: str) -> list[str]:
    """The java command line of java/<source>: its class compiled once per machine (per source text and broker jars,
    under ~/.cache like the jars), since the single-file launcher compiles it at every start (~4 s of CPU); the
    launcher itself where no javac is installed."""
    jars = resolve_broker_jars()
    if shutil.which("javac") is None:
        return ["java", "-cp", f"{jars}/*", str(JAVA_DIR / source)]
    key = hashlib.sha256((JAVA_DIR / source).read_bytes() + str(jars).encode()).hexdigest()[:12]
    classes = CACHE / f"{Path(source).stem}-{key}"
    if not classes.is_dir():
        building = CACHE / f".{classes.name}-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        subprocess.run(["javac", "-nowarn", "-cp", f"{jars}/*", "-d", str(building), str(JAVA_DIR / source)],
                       check=True, capture_output=True, timeout=300)
        try:
            building.rename(classes)  # whole or not at all; another worker's build may have landed first
        except OSError:
            shutil.rmtree(building, ignore_errors=True)
    return ["java", "-cp", f"{jars}/*:{classes}", Path(source).stem]


class JavaProducer:
    def __init__(self, source: str, *args: str) -> None:
        self.proc = subprocess.Popen([*_command(source), *args],
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
    the topic named last to on() (one JVM for many topics: the conftest's session fixture txn_jvm)."""

    def __init__(self, service_url: str, topic: str | None = None) -> None:
        super().__init__("TxnProducer.java", service_url, *([topic] if topic else []))

    def on(self, topic: str) -> TxnProducer:
        self.do(f"topic {topic}")
        return self


class KeyProducer(JavaProducer):
    """Drives java/KeyProducer.java: a Java producer with the client's default settings on `topic`; send(key) sends a
    message with that key (and the key as its payload), so a test sees which partition the Java client chose."""

    def __init__(self, service_url: str, topic: str) -> None:
        super().__init__("KeyProducer.java", service_url, topic)

    def send(self, *keys: str) -> None:
        self.do(*keys)


# A producer's life on a transactional topic: plain messages, a committed and an aborted transaction.
HISTORY = ["plain m0", "begin", "send c0", "send c1", "commit", "plain m1", "begin", "send a0", "send a1", "abort"]
COMMITTED = Counter({b"m0": 1, b"c0": 1, b"c1": 1, b"m1": 1})
