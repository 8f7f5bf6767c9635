"""The processes of a local cluster: each member's JVM command line (the distribution's main classes, as `bin/pulsar
zookeeper|bookie|broker|proxy|initialize-cluster-metadata` start them), starting one in the background with its
log in its own dir, and the conditions that say it is ready: ZooKeeper answers `ruok`, a bookie's or a broker's
registration is among ZooKeeper's ephemeral nodes (`dump`), a broker's admin API lists every broker, the proxy
forwards the admin API."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .broker_error import BrokerError
from .cluster_config import ClusterSettings, conf_for, metadata_setup_args, render
from .cluster_layout import BOOKIE, BROKER, PROXY, ZOOKEEPER, ClusterLayout, Member
from .cluster_security import readiness_request
from .config import LOG4J2_XML
from .disk_room import java_temp_dir
from .process import JAVA_OPENS

MAIN_CLASSES = {
    ZOOKEEPER: "org.apache.zookeeper.server.ZooKeeperServerMain",
    BOOKIE: "org.apache.bookkeeper.server.Main",
    BROKER: "org.apache.pulsar.PulsarBrokerStarter",
    PROXY: "org.apache.pulsar.proxy.server.ProxyServiceStarter",
}
CONF_FLAGS = {ZOOKEEPER: [], BOOKIE: ["--conf"], BROKER: ["--broker-conf"], PROXY: ["--config"]}
METADATA_SETUP_CLASS = "org.apache.pulsar.PulsarClusterMetadataSetup"
# Heap and direct memory per role: a whole cluster fits in ~2.5 GB on a small test machine.
MEMORY = {
    ZOOKEEPER: ("64m", "64m"),
    BOOKIE: ("128m", "128m"),
    BROKER: ("384m", "256m"),
    PROXY: ("128m", "64m"),
    "setup": ("64m", "64m"),
}
# As bin/pulsar: bookies and brokers reach BookKeeper's metadata through Pulsar's metadata store drivers.
BK_METADATA_DRIVERS = [
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
]


def write_member_conf(layout: ClusterLayout, member: Member, settings: ClusterSettings) -> Path:
    """Write the member's config file into its dir (rewritten on every cluster start); its path."""
    directory = layout.member_dir(member.name)
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / f"{member.role}.conf"
    conf.write_text(render(conf_for(layout, member, settings)))
    return conf


def log4j_conf(layout: ClusterLayout) -> Path:
    path = layout.data_dir / "log4j2.xml"
    if not path.exists():
        path.write_text(LOG4J2_XML)
    return path


def java_command(java: str, lib: Path, role: str, main_args: list[str], log4j: Path,
                 jvm_options: list[str]) -> list[str]:
    """One member's (or the metadata set-up's) java command line."""
    heap, direct = MEMORY[role]
    main_class = METADATA_SETUP_CLASS if role == "setup" else MAIN_CLASSES[role]
    return [
        java, f"-Xms{heap}", f"-Xmx{heap}", f"-XX:MaxDirectMemorySize={direct}", *jvm_options, *JAVA_OPENS,
        "-Dio.netty.tryReflectionSetAccessible=true", "-Djava.net.preferIPv4Stack=true",
        "-Djute.maxbuffer=10485760", "-Dzookeeper.snapshot.trust.empty=true", *BK_METADATA_DRIVERS,
        f"-Dlog4j.configurationFile={log4j}", "-Dpulsar.allocator.exit_on_oom=true",
        "-cp", f"{lib}/*", main_class, *main_args,
    ]


def spawn(layout: ClusterLayout, member: Member, command: list[str]) -> subprocess.Popen[bytes]:
    """Start a member in the background, in its own session (it outlives this Python process and is stopped by
    pid), its output appended to <data>/<name>/<name>.log."""
    directory = layout.member_dir(member.name)
    with open(directory / f"{member.name}.log", "ab") as log:
        return subprocess.Popen(command, cwd=directory, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def member_command(java: str, lib: Path, layout: ClusterLayout, member: Member, conf: Path,
                   jvm_options: list[str]) -> list[str]:
    return java_command(java, lib, member.role, [*CONF_FLAGS[member.role], str(conf)], log4j_conf(layout),
                        [*jvm_options, f"-Djava.io.tmpdir={java_temp_dir(layout.data_dir)}"])


def run_metadata_setup(java: str, lib: Path, layout: ClusterLayout, settings: ClusterSettings,
                       jvm_options: list[str], timeout_s: float) -> None:
    """Initialise the cluster's metadata as an operator does, once ZooKeeper answers (idempotent: a cluster
    started again on its data dir finds it there)."""
    log = layout.data_dir / "initialize-cluster-metadata.log"
    command = java_command(java, lib, "setup", metadata_setup_args(layout, settings), log4j_conf(layout),
                           [*jvm_options, f"-Djava.io.tmpdir={java_temp_dir(layout.data_dir)}"])
    with open(log, "ab") as out:
        try:
            done = subprocess.run(command, cwd=layout.data_dir, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BrokerError(f"initialize-cluster-metadata did not finish within {timeout_s:.0f} s; "
                              f"see {log}") from None
    if done.returncode != 0:
        raise BrokerError(f"initialize-cluster-metadata failed (exit {done.returncode}). Last lines of {log}:\n"
                          f"{log_tail(log)}")


def log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def zookeeper_command(member: Member, command: str, timeout: float = 2.0) -> str:
    """A ZooKeeper four-letter command's answer ("" when it does not answer)."""
    try:
        with socket.create_connection((member.host, member.ports["client"]), timeout=timeout) as s:
            s.sendall(command.encode())
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def registered(layout: ClusterLayout) -> set[str]:
    """The members whose registration is in ZooKeeper now (its `dump`, see registrations)."""
    return registrations(layout, zookeeper_command(layout.zookeeper, "dump"))


def registrations(layout: ClusterLayout, dump: str) -> set[str]:
    """The members a ZooKeeper `dump` shows registered: bookies under /ledgers/available (read-only ones excluded),
    brokers under /loadbalance/brokers; both are ephemeral nodes, gone when the member's session expires."""
    nodes = set(dump.split())
    wanted = {f"/ledgers/available/{m.address('bookie')}": m.name for m in layout.of_role(BOOKIE)}
    wanted |= {f"/loadbalance/brokers/{m.address('web')}": m.name for m in layout.of_role(BROKER)}
    return {name for node, name in wanted.items() if node in nodes}


def http_json(url: str, timeout: float = 3.0, context: ssl.SSLContext | None = None,
              headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        return json.loads(response.read().decode())


def ready_check(layout: ClusterLayout, member: Member) -> Callable[[], bool]:
    """The condition that says `member` serves."""
    if member.role == ZOOKEEPER:
        return lambda: zookeeper_command(member, "ruok") == "imok"
    if member.role == BOOKIE:
        return lambda: member.name in registered(layout)
    brokers = {b.address("web") for b in layout.of_role(BROKER)}
    # A secured member is asked over https, its certificate and name verified, with the superuser's token.
    secured = readiness_request(layout, member)
    base, context, headers = secured if secured else (f"http://{member.address('web')}", None, {})
    if member.role == BROKER:
        # Its admin API answers and it sees every broker (the others may still be starting: then not yet ready).
        url = f"{base}/admin/v2/brokers/{layout.cluster_name}"
        return lambda: _answers(lambda: brokers <= set(http_json(url, context=context, headers=headers)))
    # The proxy forwards the admin API to a broker it discovered.
    url = f"{base}/admin/v2/clusters"
    return lambda: _answers(lambda: layout.cluster_name in http_json(url, context=context, headers=headers))


def _answers(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_ready(layout: ClusterLayout, procs: dict[str, subprocess.Popen[bytes]], timeout_s: float) -> None:
    """Wait until every member in `procs` is ready; a BrokerError naming the first that exits or is not ready in
    time, with the end of its log."""
    checks = {name: ready_check(layout, layout.member(name)) for name in procs}
    waiting = set(procs)
    deadline = time.monotonic() + timeout_s
    while waiting:
        for name in sorted(waiting):
            proc = procs[name]
            if proc.poll() is not None:
                log = layout.member_dir(name) / f"{name}.log"
                raise BrokerError(f"{name} exited with code {proc.returncode} during start-up. "
                                  f"Last lines of {log}:\n{log_tail(log)}")
            if checks[name]():
                waiting.discard(name)
        if waiting and time.monotonic() > deadline:
            name = sorted(waiting)[0]
            log = layout.member_dir(name) / f"{name}.log"
            raise BrokerError(f"{', '.join(sorted(waiting))} not ready within {timeout_s:.0f} s. "
                              f"Last lines of {log}:\n{log_tail(log)}")
        if waiting:
            time.sleep(0.2)
