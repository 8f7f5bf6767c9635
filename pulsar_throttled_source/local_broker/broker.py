"""LocalBroker: a real standalone broker for the duration of a `with` block (tests, demos, benchmarks)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .data_dir_state import BrokerInfo
from .process import DEFAULT_START_TIMEOUT_S, start, stop
from .tls import TlsFiles


class LocalBroker:
    """Context manager: a real standalone broker for the duration of a `with` block. With `tls` it also serves
    pulsar+ssl:// and https:// (service_url_tls, admin_url_tls) beside the plain URLs. Without a `data_dir` its
    data lives in a new temp dir, removed when the block ends (a benchmark's backlog is gigabytes)."""

    def __init__(self, data_dir: str | Path | None = None, max_entries_per_ledger: int | None = None,
                 auth_token: bool = False, timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 broker_config: dict[str, str] | None = None, tls: TlsFiles | None = None,
                 ready_token: Callable[[], str] | None = None, jvm_options: list[str] | None = None) -> None:
        self._data_dir = data_dir
        self._owns_data_dir = data_dir is None  # the launcher makes a temp dir: this broker's to remove
        self._jvm_options = list(jvm_options or [])  # after the launcher's own (process.start)
        self._ready_token = ready_token  # the readiness check's token, where the broker trusts another key (process.start)
        self._tls = tls
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
    def service_url_tls(self) -> str:
        assert self.info is not None and self.info.serviceUrlTls, "broker not started, or started without tls"
        return self.info.serviceUrlTls

    @property
    def admin_url_tls(self) -> str:
        assert self.info is not None and self.info.adminUrlTls, "broker not started, or started without tls"
        return self.info.adminUrlTls

    @property
    def data_dir(self) -> str:
        assert self.info is not None, "broker not started"
        return self.info.dataDir

    def start(self) -> BrokerInfo:
        self.info = start(self._data_dir, self._max_entries, self._timeout_s, self._auth_token,
                          broker_config=self._broker_config, tls=self._tls, ready_token=self._ready_token,
                          jvm_options=self._jvm_options)
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
        if self._owns_data_dir and self.info is not None:
            shutil.rmtree(self.info.dataDir, ignore_errors=True)
