"""Start and stop a real Apache Pulsar standalone broker, resolved from Maven Central.

Demos, notebooks and tests share this launcher so that every machine with Java 17+
and Maven gets the same pinned broker without Docker:

    python -m pulsar_throttled_source.local_broker start [--data-dir D] [--max-entries-per-ledger N]
                                                         [--broker-config KEY=VALUE ...]
    python -m pulsar_throttled_source.local_broker status [--data-dir D]
    python -m pulsar_throttled_source.local_broker stop [--data-dir D]

`start` prints one JSON line: {"serviceUrl", "adminUrl", "pid", "dataDir"}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PULSAR_VERSION = "4.0.7"  # pinned LTS; keep in step with broker/pom.xml
CACHE_ENV = "PULSAR_THROTTLED_BROKER_CACHE"
BROKER_FILES = Path(__file__).with_name("broker")
STATE_FILE = "broker-state.json"
DEFAULT_START_TIMEOUT_S = 150.0

# Java 17 needs these for BookKeeper/Netty internals (as Pulsar's own bin/pulsar passes).
JAVA_OPENS = [
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens", "java.base/sun.net=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
]


class BrokerError(RuntimeError):
    """A launcher failure explained for people (no traceback needed)."""


@dataclass(frozen=True)
class BrokerInfo:
    serviceUrl: str
    adminUrl: str
    pid: int
    dataDir: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV)
    base = Path(override) if override else Path.home() / ".cache" / "pulsar-throttled-source"
    return base / f"pulsar-{PULSAR_VERSION}"


def _check_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError("Java 17 or newer is required to run the local Pulsar broker, but `java` is not on PATH.")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))  # "1.8" style
    if major < 17:
        raise BrokerError(f"Java 17 or newer is required to run the local Pulsar broker; found: {out.strip().splitlines()[0] if out.strip() else 'unknown'}")
    return java


def resolve_broker_jars(quiet: bool = True) -> Path:
    """Download the pinned broker and its dependencies once per machine; return the lib dir."""
    root = cache_dir()
    lib = root / "lib"
    marker = root / "COMPLETE"
    if marker.exists() and lib.is_dir():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("Maven (`mvn`) is required once to download the Pulsar broker jars, but it is not on PATH.")
    root.mkdir(parents=True, exist_ok=True)
    staging = root / "lib.partial"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn, "-B", "-q",
        "-s", str(BROKER_FILES / "maven-settings.xml"),
        "-f", str(BROKER_FILES / "pom.xml"),
        f"-Dmaven.repo.local={root / 'm2'}",
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    if not quiet:
        print(f"Downloading Apache Pulsar {PULSAR_VERSION} broker jars into {root} (once per machine)...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BrokerError(f"Downloading the Pulsar {PULSAR_VERSION} broker jars with Maven failed:\n{tail}")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    shutil.rmtree(root / "m2", ignore_errors=True)  # jars are copied; the local repo is only a download cache
    marker.write_text(PULSAR_VERSION)
    return lib


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _broker_config(ports: dict[str, int], max_entries_per_ledger: int | None, auth_token_key: Path | None,
                   extra: dict[str, str] | None = None) -> str:
    lines = {
        "clusterName": "standalone",
        "bindAddress": "127.0.0.1",
        "advertisedAddress": "127.0.0.1",
        "brokerServicePort": ports["broker"],
        "webServicePort": ports["web"],
        "metadataStoreUrl": "",
        "managedLedgerDefaultEnsembleSize": 1,
        "managedLedgerDefaultWriteQuorum": 1,
        "managedLedgerDefaultAckQuorum": 1,
        "functionsWorkerEnabled": "false",
        "systemTopicEnabled": "true",
        "topicLevelPoliciesEnabled": "true",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        "brokerDeleteInactiveTopicsEnabled": "false",
        "exposeTopicLevelPoliciesEnabled": "true",
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        # Small caches keep the broker's footprint modest on a 2-core test machine.
        "managedLedgerCacheSizeMB": 64,
        "dbStorage_writeCacheMaxSizeMb": 64,
        "dbStorage_readAheadCacheMaxSizeMb": 32,
        "dbStorage_rocksDB_blockCacheSize": 33554432,
        "journalSyncData": "false",
        # Keep data with no subscription: the source reads with non-durable readers, and tests
        # and demos need their backlog to survive ledger rollover. Data-loss tests lower it per topic.
        "defaultRetentionTimeInMinutes": -1,
        "defaultRetentionSizeInMB": -1,
    }
    if max_entries_per_ledger:
        lines["managedLedgerMaxEntriesPerLedger"] = max_entries_per_ledger
    if auth_token_key is not None:
        lines.update({
            "authenticationEnabled": "true",
            "authorizationEnabled": "false",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            "tokenSecretKey": f"file://{auth_token_key}",
            "superUserRoles": "admin",
            "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "brokerClientAuthenticationParameters": f"file://{auth_token_key.with_name('admin.token')}",
        })
    lines.update(extra or {})  # the caller's settings win (e.g. transactionCoordinatorEnabled=true)
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def parse_broker_config(items: list[str]) -> dict[str, str]:
    """KEY=VALUE broker settings (standalone.conf keys) from the command line."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", key.strip()):
            raise BrokerError(f"--broker-config expects KEY=VALUE with a broker setting name as KEY "
                              f"(e.g. transactionCoordinatorEnabled=true); got {item!r}")
        out[key.strip()] = value.strip()
    return out


LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{ISO8601} %-5level [%t] %c{1} - %msg%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


def _state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _last_started_pointer() -> Path:
    return cache_dir() / "last-started.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def _http_get_json(url: str, timeout: float = 3.0, token: str | None = None) -> Any:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def make_token(secret_key: bytes, subject: str) -> str:
    """An HS256 JWT as Pulsar's token authentication expects (subject = role)."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256"}, separators=(",", ":")).encode())
    payload = b64(json.dumps({"sub": subject}, separators=(",", ":")).encode())
    signature = hmac.new(secret_key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def start(
    data_dir: str | Path | None = None,
    max_entries_per_ledger: int | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    auth_token: bool = False,
    heap: str = "1g",
    broker_config: dict[str, str] | None = None,
) -> BrokerInfo:
    """Start a standalone broker in the background and wait until it serves public/default.

    Restarting on an existing data dir reuses its data (and its ports, so clients reconnect).
    """
    java = _check_java()
    lib = resolve_broker_jars(quiet=False)
    data = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="pulsar-standalone-"))
    data.mkdir(parents=True, exist_ok=True)
    data = data.resolve()
    existing = read_state(data)
    if existing and _pid_alive(existing["pid"]):
        raise BrokerError(f"A broker already runs on data dir {data} (pid {existing['pid']}); stop it first.")
    saved = json.loads((data / "ports.json").read_text()) if (data / "ports.json").exists() else None
    ports = saved or {"broker": _free_port(), "web": _free_port(), "bookie": _free_port(), "streamStorage": _free_port()}
    (data / "ports.json").write_text(json.dumps(ports))

    token_key = None
    admin_token = None
    if auth_token:
        token_key = data / "auth" / "secret.key"
        token_key.parent.mkdir(exist_ok=True)
        if not token_key.exists():
            token_key.write_bytes(os.urandom(32))
        admin_token = make_token(token_key.read_bytes(), "admin")
        (token_key.with_name("admin.token")).write_text(admin_token)
    conf = data / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "standalone.conf").write_text(_broker_config(ports, max_entries_per_ledger, token_key, broker_config))
    (conf / "log4j2.xml").write_text(LOG4J2_XML)
    log_path = data / "broker.log"
    cmd = [
        java, "-Xms256m", f"-Xmx{heap}", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC",
        *JAVA_OPENS,
        "-Dio.netty.tryReflectionSetAccessible=true",
        f"-Dlog4j.configurationFile={conf / 'log4j2.xml'}",
        "-Dpulsar.allocator.exit_on_oom=true",
        "-cp", f"{lib}/*",
        "org.apache.pulsar.PulsarStandaloneStarter",
        "--config", str(conf / "standalone.conf"),
        "--no-functions-worker", "--no-stream-storage",
        "-a", "127.0.0.1",
        "--metadata-dir", str(data / "metadata"),
        "--bookkeeper-dir", str(data / "bookkeeper"),
        "--bookkeeper-port", str(ports["bookie"]),
        "--stream-storage-port", str(ports["streamStorage"]),
    ]
    with open(log_path, "ab") as log:
        # Own session: the broker outlives this Python process and is stopped by pid.
        proc = subprocess.Popen(cmd, cwd=data, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    info = BrokerInfo(
        serviceUrl=f"pulsar://127.0.0.1:{ports['broker']}",
        adminUrl=f"http://127.0.0.1:{ports['web']}",
        pid=proc.pid,
        dataDir=str(data),
    )
    state = asdict(info) | {"authToken": bool(auth_token)}
    _state_path(data).write_text(json.dumps(state))
    _last_started_pointer().write_text(json.dumps({"dataDir": str(data)}))

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise BrokerError(f"The Pulsar broker exited with code {proc.returncode} during start-up. Last lines of {log_path}:\n{_log_tail(log_path)}")
        try:
            namespaces = _http_get_json(f"{info.adminUrl}/admin/v2/namespaces/public", token=admin_token)
            if "public/default" in namespaces:
                return info
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            _terminate(proc.pid, grace_s=10)
            raise BrokerError(f"The Pulsar broker did not become ready within {timeout_s:.0f} s. Last lines of {log_path}:\n{_log_tail(log_path)}")
        time.sleep(0.5)


def read_state(data_dir: str | Path) -> dict[str, Any] | None:
    path = _state_path(Path(data_dir))
    if not path.exists():
        return None
    return json.loads(path.read_text())


def admin_token(data_dir: str | Path) -> str | None:
    """The superuser token of a broker started with auth_token=True (for tests and demos)."""
    path = Path(data_dir) / "auth" / "admin.token"
    return path.read_text() if path.exists() else None


def _terminate(pid: int, grace_s: float = 30.0) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)  # reap if it is our child
        except ChildProcessError:
            waited = 0
        if waited == pid or not _pid_alive(pid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    if data_dir:
        return Path(data_dir).resolve()
    pointer = _last_started_pointer()
    if pointer.exists():
        return Path(json.loads(pointer.read_text())["dataDir"])
    return None


def stop(data_dir: str | Path | None = None) -> bool:
    """Stop the broker of `data_dir` (default: the last one started). True if one was running."""
    data = _resolve_data_dir(data_dir)
    state = read_state(data) if data else None
    if not state:
        return False
    running = _pid_alive(state["pid"])
    if running:
        _terminate(state["pid"])
    return running


def status(data_dir: str | Path | None = None) -> dict[str, Any]:
    data = _resolve_data_dir(data_dir)
    state = read_state(data) if data else None
    if not state:
        return {"running": False, "dataDir": str(data) if data else None}
    return {"running": _pid_alive(state["pid"]), **{k: state[k] for k in ("serviceUrl", "adminUrl", "pid", "dataDir")}}


class LocalBroker:
    """Context manager: a real standalone broker for the duration of a `with` block."""

    def __init__(self, data_dir: str | Path | None = None, max_entries_per_ledger: int | None = None,
                 auth_token: bool = False, timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 broker_config: dict[str, str] | None = None) -> None:
        self._data_dir = data_dir
        self._broker_config = dict(broker_config or {})
        self._max_entries = max_entries_per_ledger
        self._auth_token = auth_token
        self._timeout_s = timeout_s
        self.info: BrokerInfo | None = None

    @property
    def service_url(self) -> str:
        assert self.info is not None, "broker not started"
        return self.info.serviceUrl

    @property
    def admin_url(self) -> str:
        assert self.info is not None, "broker not started"
        return self.info.adminUrl

    @property
    def data_dir(self) -> str:
        assert self.info is not None, "broker not started"
        return self.info.dataDir

    def start(self) -> BrokerInfo:
        self.info = start(self._data_dir, self._max_entries, self._timeout_s, self._auth_token,
                          broker_config=self._broker_config)
        self._data_dir = self.info.dataDir  # a restart reuses the same data and ports
        return self.info

    def stop(self) -> None:
        if self.info is not None:
            stop(self.info.dataDir)

    def restart(self) -> BrokerInfo:
        self.stop()
        return self.start()

    def __enter__(self) -> "LocalBroker":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pulsar_throttled_source.local_broker",
                                     description="Run a real Apache Pulsar standalone broker (pinned, from Maven Central).")
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a broker in the background and print its URLs as one JSON line")
    p_start.add_argument("--data-dir", help="broker data directory (default: a new temp dir)")
    p_start.add_argument("--max-entries-per-ledger", type=int, help="roll ledgers over after N entries")
    p_start.add_argument("--auth-token", action="store_true", help="enable token authentication; the admin token is in DATA_DIR/auth/admin.token")
    p_start.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                         help="a broker setting (standalone.conf key), repeatable; e.g. transactionCoordinatorEnabled=true")
    p_start.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT_S, help="seconds to wait for readiness")
    for name in ("stop", "status"):
        p = sub.add_parser(name, help=f"{name} the broker of a data dir (default: the last one started)")
        p.add_argument("--data-dir")
    sub.add_parser("fetch", help="only download the broker jars into the cache")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            if args.max_entries_per_ledger is not None and args.max_entries_per_ledger < 1:
                parser.error("--max-entries-per-ledger must be a positive integer")
            extra = parse_broker_config(args.broker_config)
            print(start(args.data_dir, args.max_entries_per_ledger, args.timeout, args.auth_token,
                        broker_config=extra).to_json(), flush=True)
        elif args.command == "stop":
            print(json.dumps({"stopped": stop(args.data_dir)}))
        elif args.command == "status":
            st = status(args.data_dir)
            print(json.dumps(st))
            return 0 if st["running"] else 1
        elif args.command == "fetch":
            print(resolve_broker_jars(quiet=False))
    except BrokerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
