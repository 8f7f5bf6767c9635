"""LocalBroker: a real standalone broker for the duration of a `with` block (tests, demos, benchmarks)."""

from __future__ import annotations

from pathlib import Path

from .process import DEFAULT_START_TIMEOUT_S, start, stop
from .state import BrokerInfo


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

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
