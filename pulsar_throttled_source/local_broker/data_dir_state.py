"""What a broker's data dir remembers between commands: its ports (a restart reuses them, so clients reconnect),
its pid and URLs (broker-state.json), and which data dir was started last (for `stop`/`status` without --data-dir)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .distribution import cache_dir

STATE_FILE = "broker-state.json"
PORTS_FILE = "ports.json"


@dataclass(frozen=True)
class BrokerInfo:
    """What `start` prints: the broker's URLs, its pid and its data dir (camelCase, as the JSON line has it).
    A broker started with TLS also has `serviceUrlTls` (pulsar+ssl://localhost:P) and `adminUrlTls`
    (https://localhost:W); without TLS they are None and left out of the JSON."""

    serviceUrl: str
    adminUrl: str
    pid: int
    dataDir: str
    serviceUrlTls: str | None = None
    adminUrlTls: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ports_for(data_dir: Path, tls: bool = False) -> dict[str, int]:
    """The data dir's saved ports, or fresh free ones (saved for the next start); with `tls` also the
    TLS ports "brokerTls" and "webTls" (added to a data dir first started without them)."""
    path = data_dir / PORTS_FILE
    saved = json.loads(path.read_text()) if path.exists() else None
    ports: dict[str, int] = saved or {"broker": _free_port(), "web": _free_port(), "bookie": _free_port(),
                                      "streamStorage": _free_port()}
    if tls:
        for name in ("brokerTls", "webTls"):
            ports.setdefault(name, _free_port())
    path.write_text(json.dumps(ports))
    return ports


def write_state(info: BrokerInfo, auth_token: bool) -> None:
    data = Path(info.dataDir)
    (data / STATE_FILE).write_text(json.dumps(info.to_dict() | {"authToken": bool(auth_token)}))
    _last_started_pointer().write_text(json.dumps({"dataDir": str(data)}))


def read_state(data_dir: str | Path) -> dict[str, Any] | None:
    """The state a `start` on this data dir wrote, or None if none ever started there."""
    path = Path(data_dir) / STATE_FILE
    if not path.exists():
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def _last_started_pointer() -> Path:
    return cache_dir() / "last-started.json"


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    """The given data dir, else the one started last on this machine, else None."""
    if data_dir:
        return Path(data_dir).resolve()
    pointer = _last_started_pointer()
    if pointer.exists():
        return Path(json.loads(pointer.read_text())["dataDir"])
    return None


def pid_alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not count)."""
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
