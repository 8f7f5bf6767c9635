"""The launcher's TLS support without a broker: settings, ports, the JSON line, the CLI's checks (issue 43)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pulsar_throttled_source.local_broker import BrokerInfo, TlsFiles
from pulsar_throttled_source.local_broker.__main__ import main
from pulsar_throttled_source.local_broker.data_dir_state import ports_for


def test_broker_config_of_tls_files(tmp_path):
    plain = TlsFiles(tmp_path / "b.pem", tmp_path / "b.key", tmp_path / "ca.pem").broker_config(6651, 8443)
    assert plain["brokerServicePortTls"] == "6651" and plain["webServicePortTls"] == "8443"
    assert plain["tlsTrustCertsFilePath"] == str((tmp_path / "ca.pem").resolve())
    assert "brokerClientAuthenticationPlugin" not in plain  # no client identity given: none configured
    with_client = TlsFiles(tmp_path / "b.pem", tmp_path / "b.key", tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "c.key")
    conf = with_client.broker_config(1, 2)
    assert conf["brokerClientTlsEnabled"] == "true"
    assert conf["brokerClientAuthenticationPlugin"] == "org.apache.pulsar.client.impl.auth.AuthenticationTls"
    assert conf["brokerClientAuthenticationParameters"] == f"tlsCertFile:{(tmp_path / 'c.pem').resolve()},tlsKeyFile:{(tmp_path / 'c.key').resolve()}"
    with pytest.raises(ValueError, match="together"):
        TlsFiles(tmp_path / "b.pem", tmp_path / "b.key", tmp_path / "ca.pem", client_cert=tmp_path / "c.pem")


def test_json_line_has_tls_urls_only_with_tls():
    plain = BrokerInfo("pulsar://127.0.0.1:1", "http://127.0.0.1:2", 3, "/d")
    assert set(json.loads(plain.to_json())) == {"serviceUrl", "adminUrl", "pid", "dataDir"}
    tls = BrokerInfo("pulsar://127.0.0.1:1", "http://127.0.0.1:2", 3, "/d", "pulsar+ssl://localhost:4", "https://localhost:5")
    assert BrokerInfo(**json.loads(tls.to_json())) == tls


def test_tls_ports_added_to_a_data_dir_started_without_them(tmp_path: Path):
    first = ports_for(tmp_path)
    assert "brokerTls" not in first
    with_tls = ports_for(tmp_path, tls=True)
    assert {k: with_tls[k] for k in first} == first and {"brokerTls", "webTls"} <= set(with_tls)
    assert ports_for(tmp_path, tls=True) == with_tls  # kept for restarts


def test_cli_needs_cert_key_and_ca_together(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["start", "--data-dir", str(tmp_path), "--tls-cert", str(tmp_path / "b.pem")])
    assert exit_.value.code == 2
    assert "--tls-cert, --tls-key and --tls-ca together" in capsys.readouterr().err
