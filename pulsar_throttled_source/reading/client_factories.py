"""Executor side: how a worker makes each read path's client, with the query's credentials: a pulsar.Client
(the Python path's, and the sink's) with pulsar-client's own authentication plugin, and a client of the
native library (the native read path's, and the native sender's). client_cache keeps one of each per process."""

from __future__ import annotations

from typing import Any

from ..credentials import Credentials
from ..read_task import ClientConfig


def python_client(config: ClientConfig) -> Any:
    """A pulsar.Client (the Python read path's)."""
    import pulsar

    client = config.client_settings()
    kwargs = dict(client.settings)
    if client.auth:  # the client's own plugin: its OAuth2 flow, a token file read at every authentication
        kwargs["authentication"] = _plugin(*client.auth)
    kwargs.setdefault("logger", _quiet_logger())
    return pulsar.Client(client.service_url, **kwargs)


def client_authentication(credentials: Credentials) -> Any:
    """pulsar-client's own plugin for `credentials`."""
    return _plugin(credentials.plugin, credentials.client_params())


def _plugin(name: str, params: str) -> Any:
    # pulsar-client's factory answers a name it does not know with no plugin at all (and a WARN), which
    # would connect without credentials: refused here instead.
    import pulsar

    authentication = pulsar.Authentication(name, params)
    if authentication.auth is None:
        raise RuntimeError(f"pulsar-client has no '{name}' authentication plugin (pulsar-client {pulsar.__version__}).")
    return authentication


def _quiet_logger() -> Any:
    """The client's own console logger at WARN: the C++ client logs every reader creation at INFO, and with a Python
    logger every line of every level (two DEBUG lines per message sent) is formatted and handed to Python, where a
    logger's level drops it only then (a third of a write task's CPU); this one drops them where they are made."""
    import pulsar

    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


class NativeClient:
    """A client of the native read path's library (closed like a pulsar.Client)."""

    def __init__(self, config: ClientConfig) -> None:
        from .native_library import native_library
        from .native_reader import create_client

        self.loaded = native_library()
        assert self.loaded.lib is not None, "the native read path was chosen without its library"
        self.handle: int | None = create_client(self.loaded.lib, config)

    def close(self) -> None:
        if self.handle is not None and self.loaded.lib is not None:
            handle, self.handle = self.handle, None
            self.loaded.lib.par_client_free(handle)
