"""Where each process of a local cluster runs: its name, role, loopback address and ports. Made once per data dir
(cluster.json) and read again by every later command, so a member restarted alone comes back where it was and
clients reconnect. Each member has its own address (127.0.0.2, 127.0.0.3, ...: Linux routes all of 127/8 to the
loopback device), so a redirect from one broker to another really changes host."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

LAYOUT_FILE = "cluster.json"
ZOOKEEPER, BOOKIE, BROKER, PROXY = "zookeeper", "bookie", "broker", "proxy"
# Which ports each role listens on (named as the role's own config calls them, lower-camel).
ROLE_PORTS = {
    ZOOKEEPER: ("client",),
    BOOKIE: ("bookie",),
    BROKER: ("broker", "web"),
    PROXY: ("service", "web"),
}
# A secured cluster's members also listen with TLS on these (cluster_security.py).
ROLE_TLS_PORTS = {BROKER: ("brokerTls", "webTls"), PROXY: ("serviceTls", "webTls")}
# The order members are made in (and started, role by role).
ROLE_ORDER = (ZOOKEEPER, BOOKIE, BROKER, PROXY)


@dataclass(frozen=True)
class Member:
    """One process of the cluster: e.g. Member("broker-2", "broker", "127.0.0.7", {"broker": 41233, "web": 40117})."""

    name: str
    role: str
    host: str
    ports: dict[str, int] = field(default_factory=dict)

    def address(self, port: str) -> str:
        return f"{self.host}:{self.ports[port]}"


@dataclass(frozen=True)
class ClusterLayout:
    """The members of one cluster, its name and its data dir (each member's files live in data_dir/<name>/)."""

    cluster_name: str
    data_dir: Path
    members: tuple[Member, ...]
    secured: bool = False  # TLS ports and authentication (cluster_security.py); fixed when the layout is made

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(f"no member {name!r} in this cluster; members: {', '.join(self.names())}")

    def names(self) -> list[str]:
        return [member.name for member in self.members]

    def of_role(self, role: str) -> list[Member]:
        return [member for member in self.members if member.role == role]

    @property
    def zookeeper(self) -> Member:
        return self.of_role(ZOOKEEPER)[0]

    @property
    def metadata_store_url(self) -> str:
        """The metadata store as Pulsar's brokers, proxy and tools name it (zk:host:port)."""
        return f"zk:{self.zookeeper.address('client')}"

    def member_dir(self, name: str) -> Path:
        return self.data_dir / name

    def to_json(self) -> str:
        return json.dumps({"clusterName": self.cluster_name, "dataDir": str(self.data_dir), "secured": self.secured,
                           "members": [asdict(member) for member in self.members]}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> ClusterLayout:
        raw: dict[str, Any] = json.loads(text)
        return cls(raw["clusterName"], Path(raw["dataDir"]), tuple(Member(**member) for member in raw["members"]),
                   bool(raw.get("secured", False)))


def free_port(host: str) -> int:
    """A port nothing listens on at `host` now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def plan_layout(data_dir: Path, cluster_name: str = "local-cluster", bookies: int = 3, brokers: int = 2,
                first_host: int = 2, secured: bool = False) -> ClusterLayout:
    """A new layout: one ZooKeeper, `bookies` bookies, `brokers` brokers and one proxy, on 127.0.0.<first_host>,
    <first_host + 1>, ... in that order, each with free ports on its own address (and no two alike); `secured`:
    brokers and proxy get TLS ports too."""
    counts = {ZOOKEEPER: 1, BOOKIE: bookies, BROKER: brokers, PROXY: 1}
    members: list[Member] = []
    taken: set[int] = set()
    for role in ROLE_ORDER:
        for i in range(1, counts[role] + 1):
            host = f"127.0.0.{first_host + len(members)}"
            name = role if counts[role] == 1 and role in (ZOOKEEPER, PROXY) else f"{role}-{i}"
            ports: dict[str, int] = {}
            for port_name in ROLE_PORTS[role] + (ROLE_TLS_PORTS.get(role, ()) if secured else ()):
                port = free_port(host)
                while port in taken:  # two members never share a port, whatever their addresses
                    port = free_port(host)
                taken.add(port)
                ports[port_name] = port
            members.append(Member(name, role, host, ports))
    return ClusterLayout(cluster_name, data_dir, tuple(members), secured)


def load_or_plan(data_dir: Path, **plan_args: Any) -> ClusterLayout:
    """The data dir's saved layout, or a new one (saved for the next commands)."""
    path = data_dir / LAYOUT_FILE
    if path.exists():
        return ClusterLayout.from_json(path.read_text())
    layout = plan_layout(data_dir, **plan_args)
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(layout.to_json())
    return layout


def read_layout(data_dir: Path) -> ClusterLayout | None:
    path = data_dir / LAYOUT_FILE
    return ClusterLayout.from_json(path.read_text()) if path.exists() else None
