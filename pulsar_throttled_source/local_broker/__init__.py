"""A development and test tool, NOT used by queries: start and stop a real Apache Pulsar standalone broker,
resolved from Maven Central. Nothing in the data source imports this package; it needs Java 17+ (and Maven once,
to download the pinned broker's jars) but not PySpark.

Demos, notebooks, benchmarks and tests share this launcher so that every machine with Java 17+ and Maven gets
the same pinned broker without Docker:

    python -m pulsar_throttled_source.local_broker start [--data-dir D] [--max-entries-per-ledger N]
                                                         [--auth-token] [--broker-config KEY=VALUE ...]
                                                         [--tls-cert F --tls-key F --tls-ca F
                                                          [--tls-client-cert F --tls-client-key F]]
    python -m pulsar_throttled_source.local_broker status [--data-dir D]
    python -m pulsar_throttled_source.local_broker stop [--data-dir D]
    python -m pulsar_throttled_source.local_broker fetch [--class-archive]  # only download the jars (and make the
                                                                            # class-data archive every start maps)

(`pulsar-local-broker` is the same command.) `start` prints one JSON line: {"serviceUrl", "adminUrl", "pid",
"dataDir"}, plus "serviceUrlTls" and "adminUrlTls" with TLS. From Python: `with LocalBroker() as broker:
broker.service_url ...`; `LocalBroker(tls=TlsFiles(cert, key, ca))` adds `broker.service_url_tls` (pulsar+ssl://
localhost:P) and `broker.admin_url_tls` (https://localhost:W).

Modules: distribution (Java check, Maven resolution of the jars), config (standalone.conf), tokens (token auth), tls,
state (what a data dir remembers), process (start/stop/status), class_archive (the class-data archive that makes
starts faster), broker (LocalBroker), errors (BrokerError, for what a person can fix), __main__ (the CLI).
"""

from __future__ import annotations

from .broker import LocalBroker
from .config import parse_broker_config
from .distribution import CACHE_ENV, PULSAR_VERSION, cache_dir, resolve_broker_jars
from .errors import BrokerError
from .process import DEFAULT_START_TIMEOUT_S, start, status, stop
from .state import BrokerInfo, pid_alive, read_state
from .tls import TlsFiles
from .tokens import admin_token, make_token

__all__ = [
    "CACHE_ENV",
    "DEFAULT_START_TIMEOUT_S",
    "PULSAR_VERSION",
    "BrokerError",
    "BrokerInfo",
    "LocalBroker",
    "TlsFiles",
    "admin_token",
    "cache_dir",
    "make_token",
    "parse_broker_config",
    "pid_alive",
    "read_state",
    "resolve_broker_jars",
    "start",
    "status",
    "stop",
]
