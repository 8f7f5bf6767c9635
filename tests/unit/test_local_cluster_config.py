"""The local cluster's launcher without starting it (issue 52): where each member runs, what each one's config
says, the metadata set-up's arguments, how readiness reads ZooKeeper's registrations, the CLI, and the jar cache
that follows the pom."""

from __future__ import annotations

import json
import sys
import time

import pytest

from pulsar_throttled_source.local_broker import distribution
from pulsar_throttled_source.local_broker.__main__ import main
from pulsar_throttled_source.local_broker.cluster import ClusterInfo, cluster_status
from pulsar_throttled_source.local_broker.cluster_config import (
    ClusterSettings,
    bookie_conf,
    broker_conf,
    metadata_setup_args,
    proxy_conf,
    render,
    zookeeper_conf,
)
from pulsar_throttled_source.local_broker.cluster_layout import (
    ClusterLayout,
    load_or_plan,
    plan_layout,
)
from pulsar_throttled_source.local_broker.cluster_process import java_command, registrations


@pytest.fixture
def layout(tmp_path) -> ClusterLayout:
    return plan_layout(tmp_path)


def test_each_member_has_its_own_loopback_address_and_ports_no_other_has(layout, tmp_path):
    assert layout.names() == ["zookeeper", "bookie-1", "bookie-2", "bookie-3", "broker-1", "broker-2", "proxy"]
    assert [m.host for m in layout.members] == [f"127.0.0.{i}" for i in range(2, 9)]
    ports = [p for m in layout.members for p in m.ports.values()]
    assert len(ports) == len(set(ports)) == 1 + 3 + 2 * 2 + 2
    assert layout.metadata_store_url == f"zk:127.0.0.2:{layout.zookeeper.ports['client']}"
    assert layout.member_dir("bookie-2") == tmp_path / "bookie-2"
    with pytest.raises(KeyError, match="no member 'broker-3'.*broker-1, broker-2"):
        layout.member("broker-3")


def test_a_layout_is_saved_and_found_again(tmp_path):
    first = load_or_plan(tmp_path)
    assert ClusterLayout.from_json(first.to_json()) == first
    assert load_or_plan(tmp_path) == first  # a later command (restart, stop) finds the same addresses and ports


def test_zookeeper_listens_on_its_address_and_allows_the_brokers_short_sessions(layout):
    conf = zookeeper_conf(layout)
    assert conf["clientPortAddress"] == "127.0.0.2" and conf["clientPort"] == layout.zookeeper.ports["client"]
    assert conf["admin.enableServer"] == "false"
    assert {"ruok", "dump"} <= set(str(conf["4lw.commands.whitelist"]).split(","))
    # ZooKeeper grants a session timeout between 2 and 20 ticks: the brokers' short one must be inside.
    tick = int(conf["tickTime"])  # type: ignore[call-overload]
    assert 2 * tick <= ClusterSettings().session_timeout_ms <= 20 * tick


def test_a_bookie_is_known_and_listens_by_its_own_address(layout, tmp_path):
    bookie = layout.member("bookie-3")
    conf = bookie_conf(layout, bookie, ClusterSettings())
    assert conf["advertisedAddress"] == "127.0.0.5" and conf["listeningInterface"] == "lo"
    assert conf["bookiePort"] == bookie.ports["bookie"] and conf["allowLoopback"] == "true"
    assert conf["metadataServiceUri"] == f"metadata-store:{layout.metadata_store_url}"
    assert conf["journalDirectories"] == tmp_path / "bookie-3" / "journal"
    assert conf["ledgerDirectories"] == tmp_path / "bookie-3" / "ledgers"


def test_a_broker_writes_two_copies_and_gives_up_its_bundles_after_a_short_session(layout):
    broker = layout.member("broker-2")
    conf = broker_conf(layout, broker, ClusterSettings(max_entries_per_ledger=50,
                                                        broker_extra=(("maxMessageSize", "131072"),)))
    assert conf["bindAddress"] == conf["advertisedAddress"] == "127.0.0.7"
    assert (conf["brokerServicePort"], conf["webServicePort"]) == (broker.ports["broker"], broker.ports["web"])
    assert (conf["managedLedgerDefaultEnsembleSize"], conf["managedLedgerDefaultWriteQuorum"],
            conf["managedLedgerDefaultAckQuorum"]) == (2, 2, 2)
    assert conf["metadataStoreUrl"] == conf["configurationMetadataStoreUrl"] == layout.metadata_store_url
    assert conf["metadataStoreSessionTimeoutMillis"] == 5000
    assert conf["clusterName"] == layout.cluster_name
    assert conf["managedLedgerMaxEntriesPerLedger"] == 50 and conf["maxMessageSize"] == "131072"
    assert conf["loadBalancerSheddingEnabled"] == "false"
    assert "managedLedgerMaxEntriesPerLedger" not in broker_conf(layout, broker, ClusterSettings())
    # The caller's settings win over the launcher's.
    assert broker_conf(layout, broker, ClusterSettings(broker_extra=(("managedLedgerCacheSizeMB", "8"),)))[
        "managedLedgerCacheSizeMB"] == "8"


def test_the_proxy_discovers_the_brokers_and_may_connect_to_their_ports(layout):
    proxy = layout.member("proxy")
    conf = proxy_conf(layout, proxy, ClusterSettings())
    assert conf["bindAddress"] == conf["advertisedAddress"] == "127.0.0.8"
    assert conf["metadataStoreUrl"] == layout.metadata_store_url and "brokerServiceURL" not in conf
    brokers = {str(b.ports["broker"]) for b in layout.of_role("broker")}
    assert set(str(conf["brokerProxyAllowedTargetPorts"]).split(",")) == brokers


def test_the_metadata_set_up_names_every_broker_in_the_cluster_urls(layout):
    args = metadata_setup_args(layout, ClusterSettings())
    given = dict(zip(args[::2], args[1::2], strict=True))
    b1, b2 = layout.of_role("broker")
    assert given["--cluster"] == "local-cluster"
    assert given["--metadata-store"] == given["--configuration-metadata-store"] == layout.metadata_store_url
    assert given["--web-service-url"] == f"http://127.0.0.6:{b1.ports['web']},127.0.0.7:{b2.ports['web']}"
    assert given["--broker-service-url"] == f"pulsar://127.0.0.6:{b1.ports['broker']},127.0.0.7:{b2.ports['broker']}"


def test_config_files_are_key_value_lines():
    assert render({"a": 1, "b.c": "x"}) == "a=1\nb.c=x\n"


def test_java_command_runs_the_role_main_class_with_its_memory(tmp_path):
    cmd = java_command("java", tmp_path / "lib", "bookie", ["--conf", "b.conf"], tmp_path / "log4j2.xml",
                       ["-XX:TieredStopAtLevel=1"])
    assert cmd[-3:] == ["org.apache.bookkeeper.server.Main", "--conf", "b.conf"]
    assert "-Xmx128m" in cmd and "-XX:TieredStopAtLevel=1" in cmd and f"{tmp_path / 'lib'}/*" in cmd
    assert any(a.startswith("-Dbookkeeper.metadata.bookie.drivers=") for a in cmd)
    setup = java_command("java", tmp_path, "setup", ["--cluster", "c"], tmp_path / "l.xml", [])
    assert setup[-3:] == ["org.apache.pulsar.PulsarClusterMetadataSetup", "--cluster", "c"]


def test_readiness_reads_the_registrations_in_zookeepers_dump(layout):
    b1, b2, b3 = layout.of_role("bookie")
    broker = layout.member("broker-2")
    dump = (f"Sessions with Ephemerals (3):\n0x1:\n\t/ledgers/available/{b1.address('bookie')}\n"
            f"0x2:\n\t/ledgers/available/readonly/{b2.address('bookie')}\n"
            f"0x3:\n\t/loadbalance/brokers/{broker.address('web')}\n\t/namespace/pulsar/x/0x00000000_0xffffffff\n")
    # A read-only bookie is not ready for writes; broker-1 has not registered yet.
    assert registrations(layout, dump) == {"bookie-1", "broker-2"}
    assert registrations(layout, "") == set()


def test_the_json_line_has_every_brokers_urls_the_proxys_and_a_multi_host_service_url(layout):
    info = json.loads(ClusterInfo.of(layout, {"zookeeper": 11}).to_json())
    b1, b2 = layout.of_role("broker")
    assert info["serviceUrl"] == f"pulsar://{b1.address('broker')},{b2.address('broker')}"
    assert [b["adminUrl"] for b in info["brokers"]] == [f"http://{b1.address('web')}", f"http://{b2.address('web')}"]
    assert info["proxy"]["serviceUrl"] == f"pulsar://{layout.member('proxy').address('service')}"
    assert info["pids"] == {"zookeeper": 11} and info["metadataStoreUrl"] == layout.metadata_store_url


def test_status_of_a_data_dir_where_no_cluster_ran(tmp_path, capsys):
    assert cluster_status(tmp_path) == {"running": False, "dataDir": str(tmp_path)}
    assert main(["cluster", "status", "--data-dir", str(tmp_path)]) == 1
    assert json.loads(capsys.readouterr().out)["running"] is False


def test_cli_checks_its_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["cluster", "start", "--max-entries-per-ledger", "0"])
    assert "--max-entries-per-ledger must be a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cluster", "restart"])


def test_the_jars_are_cached_per_pom_so_a_changed_pom_is_fetched_again(tmp_path, monkeypatch):
    monkeypatch.setenv(distribution.CACHE_ENV, str(tmp_path / "cache"))
    pom = tmp_path / "pom.xml"
    pom.write_text("<project>a</project>")
    first = distribution.jars_root(pom)
    assert first == distribution.jars_root(pom) and first.parent == distribution.cache_dir()
    pom.write_text("<project>a, and pulsar-proxy</project>")
    assert distribution.jars_root(pom) != first


def test_members_are_stopped_in_reverse_order_and_killed_at_once_when_not_graceful(tmp_path):
    """stop_members on real processes (sleepers standing in for the JVMs, each in its own session as spawn makes them):
    graceful, SIGTERM role by role, proxy and brokers first and ZooKeeper last; not graceful, SIGKILL to all; either
    way they are gone when it returns."""
    import subprocess

    from pulsar_throttled_source.local_broker.cluster import stop_members
    from pulsar_throttled_source.local_broker.data_dir_state import pid_alive

    layout = plan_layout(tmp_path)
    # Each sleeper records when it got SIGTERM, so the order shows.
    script = "import signal,sys,time\ndef t(*_):\n open(sys.argv[1],'w').write(repr(time.monotonic())); sys.exit(0)\n" \
             "signal.signal(signal.SIGTERM, t)\nopen(sys.argv[1] + '.ready', 'w').close()\ntime.sleep(60)\n"
    for graceful in (True, False):
        procs = {name: subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"{name}.{graceful}")],
                                        start_new_session=True) for name in layout.names()}
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"{name}.{graceful}.ready").exists() for name in procs):  # handlers installed
            assert time.monotonic() < deadline, "the sleepers did not start"
            time.sleep(0.01)
        stop_members(layout, {name: p.pid for name, p in procs.items()}, graceful=graceful)
        assert not any(pid_alive(p.pid) for p in procs.values())
        termed = {name: float((tmp_path / f"{name}.{graceful}").read_text())
                  for name in layout.names() if (tmp_path / f"{name}.{graceful}").exists()}
        if graceful:
            assert set(termed) == set(layout.names())
            assert max(termed[n] for n in ("proxy", "broker-1", "broker-2")) < min(termed[f"bookie-{i}"] for i in (1, 2, 3))
            assert max(termed[f"bookie-{i}"] for i in (1, 2, 3)) < termed["zookeeper"]
        else:
            assert termed == {}  # SIGKILL: no handler ran
