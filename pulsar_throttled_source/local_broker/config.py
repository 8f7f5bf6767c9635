"""What the standalone broker runs with: its standalone.conf (ports, small caches, retention, optional token auth,
the caller's own settings) and its log4j2 configuration, written into the data dir's conf/."""

from __future__ import annotations

import re
from pathlib import Path

from .broker_error import BrokerError
from .disk_room import bookie_disk_settings
from .tokens import ADMIN_ROLE

LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{ISO8601} %-5level [%t] %c{1} - %msg%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


def standalone_conf(ports: dict[str, int], max_entries_per_ledger: int | None, auth_token_key: Path | None,
                    extra: dict[str, str] | None = None) -> str:
    """The text of standalone.conf. `auth_token_key` (the secret key file) turns token authentication on."""
    lines: dict[str, object] = {
        "clusterName": "standalone",
        "bindAddress": "127.0.0.1",
        "advertisedAddress": "127.0.0.1",
        "brokerServicePort": ports["broker"],
        "webServicePort": ports["web"],
        "metadataStoreUrl": "",
        "managedLedgerDefaultEnsembleSize": 1,
        "managedLedgerDefaultWriteQuorum": 1,
        "managedLedgerDefaultAckQuorum": 1,
        "functionsWorkerEnabled": "false",
        "systemTopicEnabled": "true",
        "topicLevelPoliciesEnabled": "true",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        "brokerDeleteInactiveTopicsEnabled": "false",
        "exposeTopicLevelPoliciesEnabled": "true",
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        # Small caches keep the broker's footprint modest on a 2-core test machine.
        "managedLedgerCacheSizeMB": 64,
        "dbStorage_writeCacheMaxSizeMb": 64,
        "dbStorage_readAheadCacheMaxSizeMb": 32,
        "dbStorage_rocksDB_blockCacheSize": 33554432,
        "journalSyncData": "false",
        # The standalone's bookie reads this file too: a fuller disk must not turn it read-only (disk_room.py).
        **bookie_disk_settings(),
        # Every stop waits out the broker's event loops' quiet period: a quarter of this, at most 5 s (5 s with the
        # default 60 s), 1.5 s here. Topics and their ledgers are closed before it; only idle threads wait on it.
        "brokerShutdownTimeoutMs": 6000,
        # Keep data with no subscription: the source reads with non-durable readers, and tests
        # and demos need their backlog to survive ledger rollover. Data-loss tests lower it per topic.
        "defaultRetentionTimeInMinutes": -1,
        "defaultRetentionSizeInMB": -1,
    }
    if max_entries_per_ledger:
        lines["managedLedgerMaxEntriesPerLedger"] = max_entries_per_ledger
    if auth_token_key is not None:
        lines.update({
            "authenticationEnabled": "true",
            "authorizationEnabled": "false",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            "tokenSecretKey": f"file://{auth_token_key}",
            "superUserRoles": ADMIN_ROLE,
            "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "brokerClientAuthenticationParameters": f"file://{auth_token_key.with_name('admin.token')}",
        })
    lines.update(extra or {})  # the caller's settings win (e.g. transactionCoordinatorEnabled=true)
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def write_conf(conf_dir: Path, ports: dict[str, int], max_entries_per_ledger: int | None,
               auth_token_key: Path | None, extra: dict[str, str] | None = None) -> tuple[Path, Path]:
    """Write standalone.conf and log4j2.xml (rewritten on every start); return their paths."""
    conf_dir.mkdir(exist_ok=True)
    conf, log4j = conf_dir / "standalone.conf", conf_dir / "log4j2.xml"
    conf.write_text(standalone_conf(ports, max_entries_per_ledger, auth_token_key, extra))
    log4j.write_text(LOG4J2_XML)
    return conf, log4j


def parse_broker_config(items: list[str]) -> dict[str, str]:
    """KEY=VALUE broker settings (standalone.conf keys) from the command line."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", key.strip()):
            raise BrokerError(f"--broker-config expects KEY=VALUE with a broker setting name as KEY "
                              f"(e.g. transactionCoordinatorEnabled=true); got {item!r}")
        out[key.strip()] = value.strip()
    return out
