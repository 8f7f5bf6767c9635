"""What each process of a local cluster runs with: ZooKeeper's zoo.cfg, a bookie's bookkeeper.conf, a broker's
broker.conf, the proxy's proxy.conf (keys as in the distribution's conf/ files of the pinned Pulsar), and the
arguments of the cluster's metadata initialisation (`bin/pulsar initialize-cluster-metadata`). Pure text from a
ClusterLayout: cluster_process.py writes and runs them.

A secured cluster (ClusterSettings.secured; its layout has TLS ports) adds the keys of cluster_security.py to the
brokers' and the proxy's files, and the cluster's TLS URLs to its metadata."""

from __future__ import annotations

from dataclasses import dataclass

from .cluster_layout import BOOKIE, BROKER, PROXY, ZOOKEEPER, ClusterLayout, Member
from .cluster_security import broker_security_conf, metadata_setup_tls_args, proxy_security_conf, tls_target_ports
from .disk_room import bookie_disk_settings


@dataclass(frozen=True)
class ClusterSettings:
    """The knobs a cluster is started with. The metadata session timeout is small so that the bundles of a broker
    killed with SIGKILL move to another within seconds (they move only once its session has expired)."""

    ensemble_size: int = 2
    write_quorum: int = 2
    ack_quorum: int = 2
    session_timeout_ms: int = 5000
    max_entries_per_ledger: int | None = None
    # The load manager places bundles (spreading each namespace's bundles over the brokers); with shedding off it
    # never moves one on its own, so what moves in a test is what the test moved.
    load_shedding: bool = False
    broker_extra: tuple[tuple[str, str], ...] = ()  # broker.conf settings of the caller's, applied last
    # TLS on brokers' and proxy's ports and token (OAuth2-style, RS256) authentication: cluster_security.py
    secured: bool = False


def render(settings: dict[str, object]) -> str:
    """KEY=VALUE lines, as Pulsar's and BookKeeper's config loaders read them."""
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def zookeeper_conf(layout: ClusterLayout) -> dict[str, object]:
    zk = layout.zookeeper
    return {
        # Sessions are negotiated between 2 and 20 ticks: a 500 ms tick allows the brokers' 5 s.
        "tickTime": 500,
        "initLimit": 10,
        "syncLimit": 5,
        "dataDir": layout.member_dir(zk.name) / "data",
        "clientPort": zk.ports["client"],
        "clientPortAddress": zk.host,
        "maxClientCnxns": 0,
        "admin.enableServer": "false",  # its Jetty admin server would take port 8080
        # ruok answers readiness; dump lists the ephemeral nodes: bookies and brokers registered (cluster_process)
        "4lw.commands.whitelist": "ruok,dump,srvr",
    }


def bookie_conf(layout: ClusterLayout, bookie: Member, settings: ClusterSettings) -> dict[str, object]:
    data = layout.member_dir(bookie.name)
    return {
        "bookiePort": bookie.ports["bookie"],
        "advertisedAddress": bookie.host,  # the bookie id: 127.0.0.N:port
        "listeningInterface": "lo",  # with an advertised address set: listen on that address alone (not on all)
        "allowLoopback": "true",
        "useHostNameAsBookieID": "false",
        "metadataServiceUri": f"metadata-store:{layout.metadata_store_url}",
        "zkTimeout": 10000,
        "journalDirectories": data / "journal",
        "ledgerDirectories": data / "ledgers",
        "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
        "httpServerEnabled": "false",
        "autoRecoveryDaemonEnabled": "false",
        # Small caches: three bookies share a 2-core test machine with the brokers.
        "dbStorage_writeCacheMaxSizeMb": 16,
        "dbStorage_readAheadCacheMaxSizeMb": 16,
        "dbStorage_rocksDB_blockCacheSize": 8388608,
        "journalSyncData": "false",
        "journalMaxGroupWaitMSec": 1,
        "numAddWorkerThreads": 0,
        "numReadWorkerThreads": 2,
        "serverNumIOThreads": 2,
        "entryLogSizeLimit": 67108864,
        # A fuller disk must not turn a test's bookies read-only (the launcher checks the room: disk_room.py).
        **bookie_disk_settings(),
    }


def _member_of_cluster(layout: ClusterLayout, member: Member, settings: ClusterSettings) -> dict[str, object]:
    """What a broker and the proxy both say: the cluster, its metadata store and session, their own address."""
    return {
        "clusterName": layout.cluster_name,
        "metadataStoreUrl": layout.metadata_store_url,
        "configurationMetadataStoreUrl": layout.metadata_store_url,
        "metadataStoreSessionTimeoutMillis": settings.session_timeout_ms,
        "bindAddress": member.host,
        "advertisedAddress": member.host,
    }


def broker_conf(layout: ClusterLayout, broker: Member, settings: ClusterSettings) -> dict[str, object]:
    conf: dict[str, object] = {
        **_member_of_cluster(layout, broker, settings),
        "brokerServicePort": broker.ports["broker"],
        "webServicePort": broker.ports["web"],
        "managedLedgerDefaultEnsembleSize": settings.ensemble_size,
        "managedLedgerDefaultWriteQuorum": settings.write_quorum,
        "managedLedgerDefaultAckQuorum": settings.ack_quorum,
        "functionsWorkerEnabled": "false",
        "webSocketServiceEnabled": "false",
        "systemTopicEnabled": "true",
        "topicLevelPoliciesEnabled": "true",
        "exposeTopicLevelPoliciesEnabled": "true",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        "brokerDeleteInactiveTopicsEnabled": "false",
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        "managedLedgerCacheSizeMB": 32,
        "loadBalancerSheddingEnabled": str(settings.load_shedding).lower(),
        "brokerShutdownTimeoutMs": 6000,
        # Keep data with no subscription: the source reads with non-durable readers (as the standalone broker).
        "defaultRetentionTimeInMinutes": -1,
        "defaultRetentionSizeInMB": -1,
    }
    if settings.max_entries_per_ledger:
        conf["managedLedgerMaxEntriesPerLedger"] = settings.max_entries_per_ledger
    if layout.secured:
        conf.update(broker_security_conf(layout, broker))
    conf.update(dict(settings.broker_extra))
    return conf


def proxy_conf(layout: ClusterLayout, proxy: Member, settings: ClusterSettings) -> dict[str, object]:
    brokers = layout.of_role(BROKER)
    conf: dict[str, object] = {
        # Broker discovery through the metadata store, as an operator's proxy does it (no fixed broker URL): the
        # admin API is forwarded to a broker it discovers, lookups too.
        **_member_of_cluster(layout, proxy, settings),
        "servicePort": proxy.ports["service"],
        "webServicePort": proxy.ports["web"],
        # The proxy connects only to these broker ports (6650,6651 by default); ours are free ports.
        "brokerProxyAllowedTargetPorts": ",".join([*(str(b.ports["broker"]) for b in brokers), *tls_target_ports(layout)]),
        "webSocketServiceEnabled": "false",
        "numIOThreads": 2,
        "httpNumThreads": 8,
    }
    if layout.secured:
        conf.update(proxy_security_conf(layout, proxy))
    return conf


def metadata_setup_args(layout: ClusterLayout, settings: ClusterSettings) -> list[str]:
    """The arguments of org.apache.pulsar.PulsarClusterMetadataSetup: the cluster, its service URLs (every broker,
    as one multi-host URL), and the metadata store, where it also formats BookKeeper's metadata."""
    brokers = layout.of_role(BROKER)
    return [
        "--cluster", layout.cluster_name,
        "--metadata-store", layout.metadata_store_url,
        "--configuration-metadata-store", layout.metadata_store_url,
        "--web-service-url", "http://" + ",".join(b.address("web") for b in brokers),
        "--broker-service-url", "pulsar://" + ",".join(b.address("broker") for b in brokers),
        "--zookeeper-session-timeout-ms", str(settings.session_timeout_ms),
        *metadata_setup_tls_args(layout),
    ]


def conf_for(layout: ClusterLayout, member: Member, settings: ClusterSettings) -> dict[str, object]:
    """The config of any member, by its role."""
    if member.role == ZOOKEEPER:
        return zookeeper_conf(layout)
    if member.role == BOOKIE:
        return bookie_conf(layout, member, settings)
    if member.role == BROKER:
        return broker_conf(layout, member, settings)
    if member.role == PROXY:
        return proxy_conf(layout, member, settings)
    raise ValueError(f"unknown role {member.role!r}")
