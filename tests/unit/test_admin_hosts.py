"""admin.url naming several hosts (http://h1:8080,h2:8080, as Pulsar's admin clients take a cluster's brokers): the
URL split into one per host, the cluster's quota key whatever their order, and the admin client asking the next
host when one does not answer (a scripted admin API on loopback beside a closed port and a host that never answers),
with an error naming every host when none does."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from scripted_admin import Scripted, scripted_admin_api, url_of

from pulsar_throttled_source.admin_endpoint import each_host
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.metadata.admin_http import AdminError
from pulsar_throttled_source.metadata.owner_redirects import ClusterHosts
from pulsar_throttled_source.throttling.congestion import cluster_key

LOGGER = "pulsar_throttled_source.metadata.admin_http"


@pytest.fixture
def live() -> Iterator[ThreadingHTTPServer]:
    with scripted_admin_api() as server:
        yield server


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: connections are refused (a broker killed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers: a host that hangs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def host(server: ThreadingHTTPServer) -> str:
    return url_of(server).removeprefix("http://")


def test_a_url_naming_several_hosts_is_one_url_per_host_in_its_order():
    assert each_host("http://h1:8080,h2:8081/base") == ["http://h1:8080/base", "http://h2:8081/base"]
    assert each_host("https://[::1]:8443,h2:8443") == ["https://[::1]:8443", "https://h2:8443"]
    assert each_host("http://h1:8080,") == ["http://h1:8080"]
    assert each_host("http://u:p@h1:1,h2:2") == ["http://u:p@h1:1", "http://h2:2"]  # user-info stays with the first
    assert each_host("http://h1:8080") == ["http://h1:8080"]
    assert each_host("not a url") == ["not a url"]


def test_the_clusters_quota_key_names_its_hosts_whatever_their_order():
    assert cluster_key("http://B2:8080,b1/") == cluster_key("http://b1:80,b2:8080") == "http://b1:80,b2:8080"
    assert cluster_key("HTTP://Broker:8080/") == "http://broker:8080"  # one host: as before


def test_credentials_follow_redirects_to_every_host_of_the_admin_url():
    def ask(path: str):
        raise AssertionError(f"no need to ask {path}: both hosts are the admin URL's")

    hosts = ClusterHosts("http://a1.example:8080,a2.example:8080", ask)
    assert hosts.holds("http://a1.example:8443/admin/v2/x") and hosts.holds("http://a2.example:8080/admin/v2/x")


def test_a_host_that_refuses_is_passed_over_for_the_next_and_the_next_requests_go_there_first(live, closed_port, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    admin = PulsarAdmin(f"http://127.0.0.1:{closed_port},{host(live)}", timeout_s=2)
    assert admin.base == f"http://127.0.0.1:{closed_port}"  # the first until one answered
    assert admin.list_topics("public/default") == []
    assert admin.base == url_of(live)
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1 and f"127.0.0.1:{closed_port} (ConnectionError)" in warnings[0], warnings
    assert url_of(live) in warnings[0] and "admin.url" in warnings[0]
    # The next requests go to the host that answered, and so do those of a session opened after on the same URL
    # (a read task's): no new warning, no new refused connection.
    caplog.clear()
    assert admin.list_topics("public/default") == []
    later = PulsarAdmin(f"http://127.0.0.1:{closed_port},{host(live)}", timeout_s=2)
    assert later.base == url_of(live) and later.list_topics("public/default") == []
    assert not [r for r in caplog.records if r.name == LOGGER]
    assert len(Scripted.seen) == 3


def test_a_management_call_goes_on_to_the_next_host_when_the_first_refused_the_connection(live, closed_port):
    Scripted.statuses = [204]
    admin = PulsarAdmin(f"http://127.0.0.1:{closed_port},{host(live)}/", timeout_s=2)
    admin.call("PUT", "persistent/public/default/t/subscription/s", "creating a subscription")
    assert Scripted.seen == [("PUT", "/admin/v2/persistent/public/default/t/subscription/s")]


def test_a_host_that_hangs_is_passed_over_by_reads_but_a_management_call_is_never_sent_twice(live, silent_port):
    admin = PulsarAdmin(f"http://127.0.0.1:{silent_port},{host(live)}", timeout_s=1)
    assert admin.list_topics("public/default") == []
    assert Scripted.seen == [("GET", "/admin/v2/persistent/public/default")]
    # A PUT that may have reached the silent host is not sent to the next one: its error names that host. (Another
    # spelling of the live host: a URL of its own, with no host remembered as answering.)
    admin = PulsarAdmin(f"http://127.0.0.1:{silent_port},localhost:{live.server_address[1]}", timeout_s=1)
    with pytest.raises(AdminError, match=rf"at http://127.0.0.1:{silent_port} did not answer within 1 s while creating"):
        admin.call("PUT", "persistent/public/default/t/subscription/s", "creating a subscription")
    assert len(Scripted.seen) == 1


def test_no_host_answering_is_a_clear_error_naming_every_host_at_once(closed_port, silent_port):
    url = f"http://127.0.0.1:{closed_port},127.0.0.1:{silent_port}"
    started = time.monotonic()
    with pytest.raises(AdminError) as error:
        PulsarAdmin(url, timeout_s=1, retry_timeout_s=30).list_topics("public/default")
    assert time.monotonic() - started < 5  # never answered: a wrong admin.url, not retried
    assert str(error.value) == (
        "Cannot reach the Pulsar admin API at any host of option 'admin.url' while listing the topics of namespace "
        f"public/default: http://127.0.0.1:{closed_port} (ConnectionError); http://127.0.0.1:{silent_port} (no answer "
        "within 1 s). Check option 'admin.url' (several hosts as http://host1:8080,host2:8080).")


def test_once_answered_an_outage_of_every_host_is_retried_and_ends_on_whichever_answers_first(live, closed_port):
    # Both hosts are the live one here, the first named by a port that refuses: answered once, then the live one
    # fails with 503 (it answered: no failover) and is retried within the budget.
    admin = PulsarAdmin(f"http://127.0.0.1:{closed_port},{host(live)}", timeout_s=2, retry_timeout_s=30)
    assert admin.list_topics("public/default") == []
    Scripted.statuses = [503]
    assert admin.list_topics("public/default") == []
    assert [path for _, path in Scripted.seen] == ["/admin/v2/persistent/public/default"] * 3
