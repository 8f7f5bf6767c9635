"""A real local Pulsar cluster, no Docker: one ZooKeeper, three bookies, two brokers and a proxy from the pinned
distribution, each its own process on its own loopback address; ensembles of 2, write and ack quorum 2; metadata
initialised as an operator does. start_cluster / stop_cluster / cluster_status (the `cluster` command), and
LocalCluster for tests: kill one member (SIGKILL by default) and restart it where it was."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import class_archive
from .broker_error import BrokerError
from .cluster_config import ClusterSettings
from .cluster_layout import BOOKIE, BROKER, PROXY, ZOOKEEPER, ClusterLayout, load_or_plan, read_layout
from .cluster_process import member_command, run_metadata_setup, spawn, wait_ready, write_member_conf
from .cluster_security import ClusterSecurity, ensure_security, secured_info, security_of
from .data_dir_state import pid_alive
from .disk_room import check_disk_room
from .distribution import cache_dir, check_java, resolve_broker_jars

STATE_FILE = "cluster-state.json"
DEFAULT_CLUSTER_TIMEOUT_S = 180.0
# Every cluster JVM is short-lived and small: C1 only (a faster start; slower code later matters little here).
CLUSTER_JVM = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


@dataclass(frozen=True)
class ClusterInfo:
    """What `cluster start` prints (camelCase, as the JSON line has it): each broker's URLs, the proxy's, a
    multi-host service URL over all brokers, the metadata store, the data dir and each member's pid."""

    clusterName: str
    dataDir: str
    metadataStoreUrl: str
    serviceUrl: str  # pulsar://h1:p1,h2:p2: every broker, as Pulsar's clients accept
    brokers: list[dict[str, str]]
    proxy: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)
    # A secured cluster's TLS URLs (the same keys as above) and files: caFile, adminTokenFile, tokenPrivateKeyFile...
    security: dict[str, Any] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def of(cls, layout: ClusterLayout, pids: dict[str, int]) -> ClusterInfo:
        brokers = layout.of_role(BROKER)
        proxy = layout.of_role(PROXY)[0]
        return cls(
            clusterName=layout.cluster_name, dataDir=str(layout.data_dir), metadataStoreUrl=layout.metadata_store_url,
            serviceUrl="pulsar://" + ",".join(b.address("broker") for b in brokers),
            brokers=[{"name": b.name, "serviceUrl": f"pulsar://{b.address('broker')}",
                      "adminUrl": f"http://{b.address('web')}"} for b in brokers],
            proxy={"name": proxy.name, "serviceUrl": f"pulsar://{proxy.address('service')}",
                   "adminUrl": f"http://{proxy.address('web')}"},
            pids=dict(pids),
            security=secured_info(layout),
        )


def _jvm(jvm_options: list[str] | None) -> tuple[str, Path, list[str]]:
    java, lib = check_java(), resolve_broker_jars(quiet=False)
    archive = class_archive.use_flags(class_archive.archive_path(cache_dir(), lib, java))
    return java, lib, [*CLUSTER_JVM, *archive, *(jvm_options or [])]


def _write_state(layout: ClusterLayout, pids: dict[str, int]) -> ClusterInfo:
    info = ClusterInfo.of(layout, pids)
    (layout.data_dir / STATE_FILE).write_text(info.to_json())
    _last_started_pointer().write_text(json.dumps({"dataDir": str(layout.data_dir)}))
    return info


def _read_pids(data_dir: Path) -> dict[str, int]:
    path = data_dir / STATE_FILE
    return dict(json.loads(path.read_text())["pids"]) if path.exists() else {}


def _last_started_pointer() -> Path:
    return cache_dir() / "last-cluster.json"


def resolve_cluster_dir(data_dir: str | Path | None) -> Path | None:
    """The given data dir, else the cluster started last on this machine, else None."""
    if data_dir:
        return Path(data_dir).resolve()
    pointer = _last_started_pointer()
    return Path(json.loads(pointer.read_text())["dataDir"]) if pointer.exists() else None


def start_cluster(data_dir: str | Path | None = None, settings: ClusterSettings | None = None,
                  timeout_s: float = DEFAULT_CLUSTER_TIMEOUT_S, jvm_options: list[str] | None = None) -> ClusterInfo:
    """Start the cluster of `data_dir` (a new temp dir by default; an existing one keeps its data and addresses)
    and wait until every member serves. ZooKeeper first, then the metadata set-up, then bookies, brokers and proxy
    together. On failure every member started is stopped again."""
    settings = settings or ClusterSettings()
    java, lib, options = _jvm(jvm_options)
    data = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="pulsar-cluster-"))
    data.mkdir(parents=True, exist_ok=True)
    data = data.resolve()
    check_disk_room(data)
    running = {name: pid for name, pid in _read_pids(data).items() if pid_alive(pid)}
    if running:
        raise BrokerError(f"A cluster already runs on data dir {data} ({', '.join(running)}); stop it first.")
    layout = load_or_plan(data, secured=settings.secured)
    if layout.secured != settings.secured:
        raise BrokerError(f"The cluster of data dir {data} was made {'with' if layout.secured else 'without'} TLS and "
                          f"authentication; start it the same way, or use another data dir.")
    if layout.secured:
        ensure_security(layout)
    commands = {m.name: member_command(java, lib, layout, m, write_member_conf(layout, m, settings), options)
                for m in layout.members}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        zookeeper = layout.zookeeper.name
        procs[zookeeper] = spawn(layout, layout.zookeeper, commands[zookeeper])
        _write_state(layout, {n: p.pid for n, p in procs.items()})
        deadline = time.monotonic() + timeout_s
        wait_ready(layout, {zookeeper: procs[zookeeper]}, timeout_s)
        run_metadata_setup(java, lib, layout, settings, options, deadline - time.monotonic())
        # A proxy that reaches brokers over TLS needs one up when it starts (Pulsar 4.0's admin proxy asks for one
        # then, and exits without), so in a secured cluster it comes last, as an operator would start it.
        for roles in ((BOOKIE, BROKER), (PROXY,)) if layout.secured else ((BOOKIE, BROKER, PROXY),):
            started = {m.name: spawn(layout, m, commands[m.name]) for m in layout.members if m.role in roles}
            procs.update(started)
            _write_state(layout, {n: p.pid for n, p in procs.items()})
            wait_ready(layout, started, max(deadline - time.monotonic(), 1.0))
    except BaseException:
        stop_members(layout, {n: p.pid for n, p in procs.items()})
        raise
    return _write_state(layout, {n: p.pid for n, p in procs.items()})


def stop_members(layout: ClusterLayout, pids: dict[str, int], graceful: bool = True) -> None:
    """Stop members in the reverse of their start order: proxy and brokers, then bookies, then ZooKeeper (a bookie
    whose ZooKeeper is gone takes ~14 s to stop, retrying it; with it, under a second). Not `graceful`: SIGKILL to
    all at once (a cluster whose data is thrown away next: ~5 s less)."""
    if not graceful:
        terminate(pids, grace_s=0)
        return
    for roles in ((PROXY, BROKER), (BOOKIE,), (ZOOKEEPER,)):
        terminate({name: pid for name, pid in pids.items() if layout.member(name).role in roles})


def terminate(pids: dict[str, int], grace_s: float = 20.0) -> None:
    """SIGTERM every member's process group at once, SIGKILL what is left after `grace_s` (at once with 0); return
    once all are gone."""
    for pid in pids.values():
        _signal_group(pid, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
    left = _wait_gone(pids, grace_s)
    for pid in left.values():
        _signal_group(pid, signal.SIGKILL)
    _wait_gone(left, 30.0)


def _wait_gone(pids: dict[str, int], timeout_s: float) -> dict[str, int]:
    """Wait up to `timeout_s` until the processes are gone; those still there."""
    deadline = time.monotonic() + timeout_s
    left = dict(pids)
    while True:
        for name, pid in list(left.items()):
            _reap(pid)
            if not pid_alive(pid):
                del left[name]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)  # a child of ours: collected, so it does not linger as a zombie
    except ChildProcessError:
        pass


def stop_cluster(data_dir: str | Path | None = None, graceful: bool = True) -> bool:
    """Stop every member of the cluster of `data_dir` (default: the last one started; `graceful`: see stop_members).
    True if any was running."""
    data = resolve_cluster_dir(data_dir)
    if data is None:
        return False
    running = {name: pid for name, pid in _read_pids(data).items() if pid_alive(pid)}
    layout = read_layout(data)
    if layout is None:
        terminate(running, grace_s=20 if graceful else 0)
    else:
        stop_members(layout, running, graceful)
    return bool(running)


def cluster_status(data_dir: str | Path | None = None) -> dict[str, Any]:
    """{"running": every member alive, "members": {name: alive}, ...the cluster's URLs} (default: the last one)."""
    data = resolve_cluster_dir(data_dir)
    path = data / STATE_FILE if data else None
    if path is None or not path.exists():
        return {"running": False, "dataDir": str(data) if data else None}
    state = json.loads(path.read_text())
    alive = {name: pid_alive(pid) for name, pid in state["pids"].items()}
    layout = read_layout(data) if data else None
    complete = layout is not None and set(alive) == set(layout.names())
    return {"running": complete and all(alive.values()), "members": alive, **state}


class LocalCluster:
    """Context manager over a local cluster, for tests: `info` (URLs, pids), `kill(name)` and `restart(name)`.
    Without a `data_dir` its data lives in a new temp dir, removed when the block ends."""

    def __init__(self, data_dir: str | Path | None = None, settings: ClusterSettings | None = None,
                 timeout_s: float = DEFAULT_CLUSTER_TIMEOUT_S, jvm_options: list[str] | None = None) -> None:
        self._data_dir = data_dir
        self._owns_data_dir = data_dir is None  # start_cluster makes a temp dir: this cluster's to remove
        self._settings = settings or ClusterSettings()
        self._timeout_s = timeout_s
        self._jvm_options = jvm_options
        self.info: ClusterInfo | None = None

    @property
    def layout(self) -> ClusterLayout:
        assert self.info is not None, "cluster not started"
        layout = read_layout(Path(self.info.dataDir))
        assert layout is not None
        return layout

    def start(self) -> ClusterInfo:
        self.info = start_cluster(self._data_dir, self._settings, self._timeout_s, self._jvm_options)
        self._data_dir = self.info.dataDir
        return self.info

    def stop(self, graceful: bool = True) -> None:
        if self.info is not None:
            stop_cluster(self.info.dataDir, graceful)

    def pid(self, name: str) -> int:
        return _read_pids(Path(self.data_dir))[name]

    @property
    def security(self) -> ClusterSecurity:
        """A secured cluster's CA, certificates and token key; `security.token(role)` issues a client's token."""
        assert self.layout.secured, "cluster not started with ClusterSettings(secured=True)"
        return security_of(self.layout)

    @property
    def data_dir(self) -> str:
        assert self.info is not None, "cluster not started"
        return self.info.dataDir

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to member `name` (SIGKILL: no goodbye to ZooKeeper, clients or bookies) and wait until it
        is gone."""
        pid = self.pid(name)
        _signal_group(pid, sig)
        _wait_gone({name: pid}, 30.0)

    def restart(self, name: str, timeout_s: float | None = None) -> ClusterInfo:
        """Start member `name` again (killed or stopped) with its config, data and address, and wait until it is
        ready."""
        layout = self.layout
        member = layout.member(name)
        pids = _read_pids(layout.data_dir)
        if pid_alive(pids[name]):
            terminate({name: pids[name]})
        java, lib, options = _jvm(self._jvm_options)
        conf = layout.member_dir(name) / f"{member.role}.conf"
        proc = spawn(layout, member, member_command(java, lib, layout, member, conf, options))
        pids[name] = proc.pid
        self.info = _write_state(layout, pids)
        wait_ready(layout, {name: proc}, timeout_s or self._timeout_s)
        return self.info

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._owns_data_dir and self.info is not None:
            shutil.rmtree(self.info.dataDir, ignore_errors=True)
