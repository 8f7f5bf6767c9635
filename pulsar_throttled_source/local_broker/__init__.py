"""A development and test tool, NOT used by queries: start and stop a real Apache Pulsar standalone broker, or a
local cluster of several processes, resolved from Maven Central. Nothing in the data source imports this package; it needs Java 17+ (and Maven once,
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
    python -m pulsar_throttled_source.local_broker cluster start [--data-dir D] [--max-entries-per-ledger N]
                                                                 [--broker-config KEY=VALUE ...] [--secure]
    python -m pulsar_throttled_source.local_broker cluster status|stop [--data-dir D]

(`pulsar-local-broker` is the same command.) `start` prints one JSON line: {"serviceUrl", "adminUrl", "pid",
"dataDir"}, plus "serviceUrlTls" and "adminUrlTls" with TLS. From Python: `with LocalBroker() as broker:
broker.service_url ...`; `LocalBroker(tls=TlsFiles(cert, key, ca))` adds `broker.service_url_tls` (pulsar+ssl://
localhost:P) and `broker.admin_url_tls` (https://localhost:W).

The cluster: ZooKeeper, 3 bookies, 2 brokers and a proxy, each its own process on its own loopback address
(127.0.0.2 ... 127.0.0.8), ensembles of 2 (write and ack quorum 2), metadata initialised as an operator does.
`cluster start` prints one JSON line: {"clusterName", "dataDir", "metadataStoreUrl", "serviceUrl" (every broker,
one multi-host URL), "brokers": [{"name", "serviceUrl", "adminUrl"}], "proxy": {...}, "pids"}. From Python:
`with LocalCluster() as cluster: cluster.info ...; cluster.kill("broker-2"); cluster.restart("broker-2")`.
`--secure` (`ClusterSettings(secured=True)`): TLS on brokers' and proxy's ports, each member's certificate naming its
own address, token (RS256, OAuth2-style) authentication; the JSON line gains "security" (TLS URLs, CA and token
files), `cluster.security.token(role)` issues a token.

Modules: distribution (Java check, Maven resolution of the jars), config (standalone.conf), tokens (token auth), tls,
data_dir_state (what a data dir remembers), disk_room (room on the bookies' disk, JVM temp files), process (start/stop/status), class_archive (the class-data archive that makes
starts faster), broker (LocalBroker), broker_error (BrokerError, for what a person can fix), __main__ (the CLI); the
cluster's: cluster_layout (which member runs where: addresses and ports, kept in the data dir), cluster_config (each
role's config file and the metadata set-up's arguments), cluster_process (each member's JVM, its start and the
conditions that say it is ready), cluster_security (the secured mode: certificates, token key, TLS and
authentication settings), cluster (start_cluster, stop_cluster, cluster_status, LocalCluster).
"""

from __future__ import annotations

from .broker import LocalBroker
from .broker_error import BrokerError
from .cluster import ClusterInfo, ClusterSettings, LocalCluster, cluster_status, start_cluster, stop_cluster
from .config import parse_broker_config
from .data_dir_state import BrokerInfo, pid_alive, read_state
from .distribution import CACHE_ENV, PULSAR_VERSION, cache_dir, resolve_broker_jars
from .process import DEFAULT_START_TIMEOUT_S, start, status, stop
from .tls import TlsFiles
from .tokens import admin_token, make_token

__all__ = [
    "CACHE_ENV",
    "DEFAULT_START_TIMEOUT_S",
    "PULSAR_VERSION",
    "BrokerError",
    "BrokerInfo",
    "ClusterInfo",
    "ClusterSettings",
    "LocalBroker",
    "LocalCluster",
    "TlsFiles",
    "admin_token",
    "cache_dir",
    "cluster_status",
    "make_token",
    "parse_broker_config",
    "pid_alive",
    "read_state",
    "resolve_broker_jars",
    "start",
    "start_cluster",
    "status",
    "stop",
    "stop_cluster",
]
