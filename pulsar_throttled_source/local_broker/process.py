"""The broker process: start it in the background and wait until it serves public/default, stop it by pid,
report its status. The broker outlives the Python process that started it."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import class_archive
from .broker_error import BrokerError
from .config import write_conf
from .data_dir_state import BrokerInfo, pid_alive, ports_for, read_state, resolve_data_dir, write_state
from .disk_room import check_disk_room, java_temp_dir
from .distribution import cache_dir, check_java, resolve_broker_jars
from .tls import TlsFiles
from .tokens import ensure_admin_token

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


def _http_get_json(url: str, timeout: float = 3.0, token: str | None = None, context: ssl.SSLContext | None = None) -> Any:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
        return json.loads(resp.read().decode())


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(
    data_dir: str | Path | None = None,
    max_entries_per_ledger: int | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    auth_token: bool = False,
    heap: str = "1g",
    broker_config: dict[str, str] | None = None,
    tls: TlsFiles | None = None,
    ready_token: Callable[[], str] | None = None,
    jvm_options: list[str] | None = None,
) -> BrokerInfo:
    """Start a standalone broker in the background and wait until it serves public/default.

    Restarting on an existing data dir reuses its data (and its ports, so clients reconnect).
    With `tls` it also serves TLS on two more ports (BrokerInfo.serviceUrlTls, adminUrlTls), and the
    readiness check asks over https (chain checked against tls.ca, tls's client certificate presented).
    `ready_token` gives the readiness check a token where the broker trusts another key than the one
    `auth_token` makes (e.g. an OAuth2 server's): called for each attempt, so a short-lived one stays valid.
    `jvm_options` go to the broker's JVM after the launcher's own (e.g. -XX:TieredStopAtLevel=1 for a short-lived
    broker: a faster start, slower code later). The class archive `make_class_archive` made is used if there is one.
    """
    java = check_java()
    lib = resolve_broker_jars(quiet=False)
    data = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="pulsar-standalone-"))
    data.mkdir(parents=True, exist_ok=True)
    data = data.resolve()
    check_disk_room(data)
    existing = read_state(data)
    if existing and pid_alive(existing["pid"]):
        raise BrokerError(f"A broker already runs on data dir {data} (pid {existing['pid']}); stop it first.")
    ports = ports_for(data, tls=tls is not None)
    token_key, admin_token = ensure_admin_token(data) if auth_token else (None, None)
    settings = {**(tls.broker_config(ports["brokerTls"], ports["webTls"]) if tls else {}), **(broker_config or {})}
    conf, log4j = write_conf(data / "conf", ports, max_entries_per_ledger, token_key, settings)
    log_path = data / "broker.log"
    cmd = [
        java, "-Xms256m", f"-Xmx{heap}", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC",
        *class_archive.use_flags(class_archive.archive_path(cache_dir(), lib, java)), *(jvm_options or []),
        *JAVA_OPENS,
        "-Dio.netty.tryReflectionSetAccessible=true",
        f"-Dlog4j.configurationFile={log4j}",
        "-Dpulsar.allocator.exit_on_oom=true",
        # Its temp files (RocksDB's native library, ~13 MB a start, left behind by a killed JVM) go with its data.
        f"-Djava.io.tmpdir={java_temp_dir(data)}",
        "-cp", f"{lib}/*",
        "org.apache.pulsar.PulsarStandaloneStarter",
        "--config", str(conf),
        "--no-functions-worker", "--no-stream-storage",
        "-a", "127.0.0.1",
        "--metadata-dir", str(data / "metadata"),
        "--bookkeeper-dir", str(data / "bookkeeper"),
        "--bookkeeper-port", str(ports["bookie"]),
        "--stream-storage-port", str(ports["streamStorage"]),
    ]
    with open(log_path, "ab") as log:
        # Own session: the broker outlives this Python process and is stopped by pid.
        proc = subprocess.Popen(cmd, cwd=data, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    info = BrokerInfo(
        serviceUrl=f"pulsar://127.0.0.1:{ports['broker']}",
        adminUrl=f"http://127.0.0.1:{ports['web']}",
        pid=proc.pid,
        dataDir=str(data),
        serviceUrlTls=f"pulsar+ssl://localhost:{ports['brokerTls']}" if tls else None,
        adminUrlTls=f"https://localhost:{ports['webTls']}" if tls else None,
    )
    write_state(info, auth_token)
    ready_url = f"{info.adminUrlTls or info.adminUrl}/admin/v2/namespaces/public"
    context = tls.readiness_context() if tls else None

    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while True:
        if proc.poll() is not None:
            raise BrokerError(f"The Pulsar broker exited with code {proc.returncode} during start-up. "
                              f"Last lines of {log_path}:\n{_log_tail(log_path)}")
        try:
            namespaces = _http_get_json(ready_url, token=ready_token() if ready_token else admin_token, context=context)
            if "public/default" in namespaces:
                return info
        except (urllib.error.URLError, OSError, ValueError) as e:
            last_error = f"{type(e).__name__}: {e}"
        if time.monotonic() > deadline:
            _terminate(proc.pid, grace_s=10)
            raise BrokerError(f"The Pulsar broker did not become ready within {timeout_s:.0f} s "
                              f"(last answer of {ready_url}: {last_error}). Last lines of {log_path}:\n{_log_tail(log_path)}")
        time.sleep(0.5)


def make_class_archive() -> Path | None:
    """Make the class archive of this machine's broker jars and Java unless it exists (class_archive.py); its path,
    or None if Java wrote none."""
    java, lib = check_java(), resolve_broker_jars(quiet=False)
    archive = class_archive.archive_path(cache_dir(), lib, java)

    def start_and_stop(options: list[str], data: Path) -> None:
        start(data, jvm_options=options)
        stop(data)

    class_archive.make(archive, start_and_stop)
    return archive if archive.is_file() else None


def _terminate(pid: int, grace_s: float = 30.0) -> None:
    """SIGTERM the broker's process group, SIGKILL it if it is still there after `grace_s`."""
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
        if waited == pid or not pid_alive(pid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(data_dir: str | Path | None = None) -> bool:
    """Stop the broker of `data_dir` (default: the last one started). True if one was running."""
    data = resolve_data_dir(data_dir)
    state = read_state(data) if data else None
    if not state:
        return False
    running = pid_alive(state["pid"])
    if running:
        _terminate(state["pid"])
    return running


def status(data_dir: str | Path | None = None) -> dict[str, Any]:
    """{"running": bool, ...the URLs, pid and data dir} of `data_dir`'s broker (default: the last one started)."""
    data = resolve_data_dir(data_dir)
    state = read_state(data) if data else None
    if not state:
        return {"running": False, "dataDir": str(data) if data else None}
    keys = ("serviceUrl", "adminUrl", "pid", "dataDir", "serviceUrlTls", "adminUrlTls")
    return {"running": pid_alive(state["pid"]), **{k: state[k] for k in keys if k in state}}
