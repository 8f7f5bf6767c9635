"""The admin API's HTTP layer against a scripted stub server: retries only after a first answer (or
for a broker's own "topic is moving" answers, or on a URL known good), with backoff, within one
budget per outage; error mapping; owner redirects with credentials; no secret in logs or errors."""

from __future__ import annotations

import base64
import logging
import socket
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from scripted_admin import Scripted, scripted_admin_api, serve, url_of

from pulsar_throttled_source.admin_endpoint import AdminEndpoint
from pulsar_throttled_source.credentials import BasicAuth, TokenAuth
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.metadata.admin_http import AdminError, AdminPermissionDenied, TopicNotFound, TransactionsDisabled
from pulsar_throttled_source.metadata.owner_redirects import ClusterHosts, topic_of
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.read_task import ClientConfig, PartitionRange
from pulsar_throttled_source.reading.task_lookup import TaskLookup
from pulsar_throttled_source.topics import TopicName

LOGGER = "pulsar_throttled_source.metadata.admin_http"


@pytest.fixture
def stub_admin_api() -> Iterator[ThreadingHTTPServer]:
    with scripted_admin_api() as server:
        yield server


_HELD: list[socket.socket] = []  # bound, never listening: refused, and no server started meanwhile can take the port


def _closed_port() -> int:
    """A port that refuses connections for the rest of the run (a port merely closed again could be taken by a server
    another process starts on a busy machine, which would then answer)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return s.getsockname()[1]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_admin_retries_only_after_a_first_answer(stub_admin_api, caplog):
    url = url_of(stub_admin_api)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    # Never answered: a wrong admin.url fails at once, retries or not.
    started = time.monotonic()
    with pytest.raises(AdminError, match="Cannot reach the Pulsar admin API"):
        PulsarAdmin(f"http://127.0.0.1:{_closed_port()}", timeout_s=2, retry_timeout_s=30).list_topics("public/default")
    Scripted.statuses = [503]
    with pytest.raises(AdminError, match="HTTP 503"):
        PulsarAdmin(url, timeout_s=2, retry_timeout_s=30).list_topics("public/default")
    assert time.monotonic() - started < 5
    assert not [r for r in caplog.records if r.name == LOGGER]

    # Answered once: 5xx is retried with exponential backoff and logged at WARNING.
    admin = PulsarAdmin(url, timeout_s=2, retry_timeout_s=30)
    assert admin.list_topics("public/default") == []
    Scripted.statuses = [503, 500, 502]
    assert admin.list_topics("public/default") == []
    warnings = _warnings(caplog)
    assert [w.split(" (")[0] for w in warnings[:3]] == [
        "admin API unavailable, retry 1 in 0.5 s", "admin API unavailable, retry 2 in 1.0 s", "admin API unavailable, retry 3 in 2.0 s"]
    assert "HTTP 503" in warnings[0] and url in warnings[0] and "adminRetryTimeoutMs" in warnings[0]
    assert "listing the topics of namespace public/default" in warnings[0]
    assert "answers again" in warnings[-1]
    assert admin.requests_made == 5  # every retry is a request

    # A stopping broker answers some lookups with 200 and a stack trace: retried, never taken as data.
    caplog.clear()
    Scripted.statuses = [(200, b'{"stackTrace": [], "message": "shutting down"}')]
    assert admin.list_topics("public/default") == []
    assert "incomplete answer" in caplog.records[0].getMessage()

    # Management calls (not lookups) are never retried.
    for method in ("PUT", "POST", "DELETE"):
        Scripted.statuses = [503]
        with pytest.raises(AdminError, match="HTTP 503"):
            admin.call(method, "persistent/public/default/x", "creating x")
    assert Scripted.statuses == []

    # The budget bounds one outage, across calls: then the error says so.
    admin_budget = PulsarAdmin(url, timeout_s=1, retry_timeout_s=1.2)
    assert admin_budget.list_topics("public/default") == []
    Scripted.statuses = [503] * 20
    started = time.monotonic()
    with pytest.raises(AdminError, match="Gave up after retrying for 1 s .*adminRetryTimeoutMs"):
        admin_budget.list_topics("public/default")
    assert 1.0 <= time.monotonic() - started < 4


def test_one_budget_per_outage_shared_by_its_calls(stub_admin_api, caplog):
    """Once an outage spent the budget, the next call during it fails after one request; the first
    answer ends the outage, and the next one has a budget of its own."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=1, retry_timeout_s=0.6)
    assert admin.list_topics("public/default") == []
    Scripted.statuses = [503] * 20
    with pytest.raises(AdminError, match="Gave up"):
        admin.list_topics("public/default")
    before = admin.requests_made
    started = time.monotonic()
    with pytest.raises(AdminError, match="Gave up"):
        admin.list_topics("public/default")
    assert admin.requests_made == before + 1 and time.monotonic() - started < 0.5
    Scripted.statuses = []
    assert admin.list_topics("public/default") == []  # the outage is over
    assert "answers again" in _warnings(caplog)[-1]
    Scripted.statuses = [503]
    assert admin.list_topics("public/default") == []  # a new outage: retried again


OWNER_MOVING = [(412, b'{"reason":"Can\'t find owner for topic persistent://public/default/t-partition-0"}'),
                (503, b'{"reason":"Namespace bundle public/default/0x00000000_0x40000000 is being unloaded"}'),
                (412, b'{"reason":"Namespace is being unloaded, cannot add topic"}')]


def test_admin_rides_through_topic_ownership_moves(stub_admin_api, caplog):
    """What brokers answer while a topic's ownership moves is retried, even on a client's first request
    (the answer proves the URL is a Pulsar broker); any other 4xx still fails at once."""
    url = url_of(stub_admin_api)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    Scripted.statuses = list(OWNER_MOVING)
    admin = PulsarAdmin(url, timeout_s=2, retry_timeout_s=30)
    assert admin.list_topics("public/default") == []
    warnings = _warnings(caplog)
    assert len(warnings) == 4 and all("topic ownership moving" in w for w in warnings[:3]), warnings

    Scripted.statuses = [(412, b'{"reason":"Partitioned topic does not have any partitions"}')]
    started = time.monotonic()
    with pytest.raises(AdminError, match="HTTP 412 .*does not have any partitions"):
        PulsarAdmin(url, timeout_s=2, retry_timeout_s=30).list_topics("public/default")
    assert time.monotonic() - started < 1

    # Without a retry budget (adminRetryTimeoutMs=0) an ownership move fails clearly, naming the reason.
    Scripted.statuses = [OWNER_MOVING[0]]
    with pytest.raises(AdminError, match="Can't find owner"):
        PulsarAdmin(url, timeout_s=2, retry_timeout_s=0).list_topics("public/default")


def test_entry_lookups_take_bodiless_moves_as_ownership_moves(stub_admin_api, caplog):
    """A HEAD answer has no body to give its reason: 307 (without a new owner), 412 and 503 there are
    taken as a move and retried from the first request; the entry's headers come through."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    Scripted.statuses = [412, 503, 307, (200, b"", None, {"X-Pulsar-Chunk-Id": "0", "X-Pulsar-Num-Chunks-From-Msg": "3"})]
    admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=2, retry_timeout_s=30)
    headers = admin.entry_headers(TopicName.parse("t"), 5, 7)
    assert headers is not None and headers["X-Pulsar-Chunk-Id"] == "0"
    assert [m for m, _ in Scripted.seen] == ["HEAD"] * 4
    assert Scripted.seen[0][1] == "/admin/v2/persistent/public/default/t/ledger/5/entry/7"
    warnings = _warnings(caplog)
    assert len(warnings) == 4 and all("topic ownership moving" in w for w in warnings[:3]), warnings


def test_not_found_is_an_answer_never_retried(stub_admin_api):
    """A 404 is the broker's answer, even on a URL known good: no retry, and it ends an outage."""
    admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=2, retry_timeout_s=30, known_good=True)
    Scripted.statuses = [404]
    started = time.monotonic()
    with pytest.raises(TopicNotFound, match="Topic persistent://public/default/t does not exist"):
        admin.internal_stats(TopicName.parse("t"))
    Scripted.statuses = [404]
    assert admin.entry_headers(TopicName.parse("t"), 1, 0) is None  # no longer stored
    assert time.monotonic() - started < 1 and admin.requests_made == 2


def test_answers_map_to_errors_that_say_what_to_do(stub_admin_api):
    url = url_of(stub_admin_api)
    admin = PulsarAdmin(url, timeout_s=2, retry_timeout_s=30, known_good=True)
    cases = [
        (401, AdminError, r"refused listing the topics of namespace public/default \(HTTP 401: not authenticated\); set credentials "
                          r"with 'pulsar.client.authPluginClassName' and 'pulsar.client.authParams' \(or 'pulsar.admin.authParams'\)"),
        (403, AdminPermissionDenied, r"HTTP 403: the role of the credentials has no permission for it: .*It needs 'consume' on the "
                                     r"namespace \(pulsar-admin namespaces grant-permission --role <role> --actions consume"),
        ((401, b'{"reason": "Unauthorized to validateTopicOperation for operation [LOOKUP] on topic [x]"}'), AdminPermissionDenied,
         r"HTTP 401: the role of the credentials has no permission for it: Unauthorized to validateTopicOperation"),
        ((400, b"bad request: no such thing"), AdminError, "failed while listing .*: HTTP 400 bad request: no such thing"),
        ((200, b"<html>not the admin API</html>"), AdminError, "returned non-JSON .*is 'admin.url' the broker's HTTP admin address"),
        ((503, b"Transactions are not enabled: transactionCoordinatorEnabled=false"), TransactionsDisabled,
         "runs without transactions"),
    ]
    for step, error, message in cases:
        Scripted.statuses = [step]
        before = admin.requests_made
        with pytest.raises(error, match=message):
            admin.list_topics("public/default")
        assert admin.requests_made == before + 1, f"{step} was retried"
    # An answer of the wrong shape (a broker starting up) is transient: retried, not taken as data.
    Scripted.statuses = [(200, b'{"partitions": 3}'), (200, b'{"ledgers": []}')]
    assert admin.internal_stats(TopicName.parse("t")) == {"ledgers": []}


def test_a_slow_broker_times_out(stub_admin_api):
    Scripted.delay_s = 1.5
    with pytest.raises(AdminError, match=r"did not answer within 1 s while listing the topics .*check 'admin.url'"):
        PulsarAdmin(url_of(stub_admin_api), timeout_s=1, retry_timeout_s=0).list_topics("public/default")


def test_admin_follows_owner_redirects_with_credentials_to_the_brokers_the_cluster_lists(stub_admin_api, caplog):
    """A broker redirects (307) a lookup to the broker that owns the topic, usually another host and port: the
    request is followed, and the token goes with it (requests drops it by default) to a broker the cluster lists
    (GET /admin/v2/brokers/<cluster>), never to a stranger (a WARN says so)."""
    owner, stranger = serve("127.0.0.2"), serve("127.0.0.3")  # other hosts than the admin URL's
    try:
        owner_port, stranger_port = owner.server_address[1], stranger.server_address[1]
        Scripted.statuses = [(307, b"", f"http://127.0.0.2:{owner_port}/admin/v2/persistent/public/default"),
                              (200, b'["standalone"]'), (200, f'["127.0.0.2:{owner_port}"]'.encode()), 200]
        admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=2, credentials=TokenAuth(token="tok3n"))
        assert admin.list_topics("public/default") == []
        assert Scripted.seen == [("GET", "/admin/v2/persistent/public/default"), ("GET", "/admin/v2/clusters"),
                                  ("GET", "/admin/v2/brokers/standalone"), ("GET", "/admin/v2/persistent/public/default")]
        assert Scripted.seen_auth == ["Bearer tok3n"] * 4
        # The list is known now: the next redirect to the owner asks nothing more.
        Scripted.statuses = [(307, b"", f"http://127.0.0.2:{owner_port}/admin/v2/persistent/public/default"), 200]
        assert admin.list_topics("public/default") == [] and Scripted.seen_auth[-2:] == ["Bearer tok3n"] * 2

        caplog.set_level(logging.WARNING)
        Scripted.statuses = [(307, b"", f"http://127.0.0.3:{stranger_port}/admin/v2/persistent/public/default"), 401]
        with pytest.raises(AdminError, match="HTTP 401"):
            admin.list_topics("public/default")
        assert Scripted.seen_auth[-2:] == ["Bearer tok3n", None]  # the stranger got no token
        assert "redirected a request to 127.0.0.3, which is not a broker of the cluster" in caplog.text
    finally:
        for server in (owner, stranger):
            server.shutdown()
            server.server_close()


def test_a_role_that_may_not_list_brokers_takes_its_credentials_to_the_owner_its_lookup_names(stub_admin_api):
    """The broker list is a superuser's call; a reading role learns the owner from the topic's lookup."""
    owner = serve("127.0.0.2")
    try:
        owner_url = f"http://127.0.0.2:{owner.server_address[1]}"
        stats = "/admin/v2/persistent/public/default/t/internalStats"
        Scripted.statuses = [(307, b"", owner_url + stats), (401, b"not a superuser"),
                              (200, f'{{"httpUrl": "{owner_url}", "brokerUrl": "pulsar://127.0.0.1:6650"}}'.encode()),
                              (200, b"{}")]
        # A timeout far above the stub's answer time: a request timed out under load and retried would take a second
        # scripted answer.
        admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=20, credentials=TokenAuth(token="tok3n"))
        assert admin.call("GET", "persistent/public/default/t/internalStats", "reading") == {}
        assert Scripted.seen == [("GET", stats), ("GET", "/admin/v2/clusters"), ("GET", "/lookup/v2/topic/persistent/public/default/t"),
                                  ("GET", stats)]
        assert Scripted.seen_auth == ["Bearer tok3n"] * 4
    finally:
        owner.shutdown()
        owner.server_close()


def test_cluster_hosts_are_the_admin_urls_and_the_brokers_the_cluster_names():
    asked: list[str] = []

    def ask(path: str):
        asked.append(path)
        answers = {"admin/v2/clusters": ["c"], "admin/v2/brokers/c": ["Broker-1.example:8080", "[2001:db8::1]:8080"],
                   "lookup/v2/topic/persistent/a/b/c": {"httpUrl": "http://owner.example:8080", "httpUrlTls": "https://owner.example:8443"}}
        return answers.get(path, {})

    hosts = ClusterHosts("https://admin.example", ask)
    assert hosts.holds("https://ADMIN.example:8443/x") and not asked  # the admin URL's own host
    assert hosts.holds("https://broker-1.example:8443/admin/v2/x") and hosts.holds("https://[2001:db8::1]:8443/y")
    assert not hosts.holds("http://evil.example:8080/admin/v2/persistent/a/b/d/stats")
    assert hosts.holds("https://owner.example:8443/admin/v2/persistent/a/b/c/stats")  # its lookup names it
    assert asked == ["admin/v2/clusters", "admin/v2/brokers/c", "lookup/v2/topic/persistent/a/b/d",
                     "lookup/v2/topic/persistent/a/b/c"]  # the broker list asked once per 30 s
    assert topic_of("http://h/admin/v2/non-persistent/a/b/c-partition-1/stats") == "non-persistent://a/b/c-partition-1"
    assert topic_of("http://h/admin/v2/namespaces/a/b") is None


def test_a_redirect_to_an_owner_that_died_is_waited_out_and_names_the_owner(stub_admin_api, caplog):
    """Issue 52, seen on a cluster with a broker killed: until its metadata session expires the other broker still
    redirects (307) to it, and the redirect's target refuses connections. admin.url answered (it is right), so this
    is retried from a session's first request, like an ownership move; the log and error name the dead owner."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    url = url_of(stub_admin_api)
    dead = f"http://127.0.0.1:{_closed_port()}"
    Scripted.statuses = [(307, b"", f"{dead}/admin/v2/persistent/public/default"), 200]  # then the topic moved here
    admin = PulsarAdmin(url, timeout_s=20, retry_timeout_s=30)  # never answered before (20 s: no timeout under load)
    assert admin.list_topics("public/default") == []
    warnings = _warnings(caplog)
    assert f"ConnectionError from {dead} (the topic's owner, redirected to by {url})" in warnings[0], warnings
    assert "answers again" in warnings[-1]

    Scripted.statuses = [(307, b"", f"{dead}/admin/v2/persistent/public/default")]
    with pytest.raises(AdminError) as failed:
        PulsarAdmin(url, timeout_s=2, retry_timeout_s=0).list_topics("public/default")
    assert f"redirected to {dead} (the broker owning the topic), which cannot be reached" in str(failed.value)
    assert "check option 'admin.url'" not in str(failed.value)


def test_no_secret_in_logs_errors_or_repr(stub_admin_api, caplog):
    token = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.s1gnature-never-shown"
    caplog.set_level(logging.DEBUG)
    admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=2, credentials=TokenAuth(token=token), retry_timeout_s=0.6)
    assert admin.list_topics("public/default") == []
    Scripted.statuses = [503, 503]
    assert admin.list_topics("public/default") == []
    Scripted.statuses = [401]
    with pytest.raises(AdminError) as refused:
        admin.list_topics("public/default")
    Scripted.statuses = [503] * 20
    with pytest.raises(AdminError) as gave_up:
        admin.list_topics("public/default")
    assert Scripted.seen_auth[0] == f"Bearer {token}"
    shown = "\n".join([caplog.text, str(refused.value), str(gave_up.value), repr(admin), str(admin)])
    assert "s1gnature" not in shown and token not in shown


def test_a_password_in_the_metrics_url_is_never_shown(stub_admin_api, caplog):
    # adaptiveThrottlingMetricsUrl may carry basic-auth credentials (a proxy in front of /metrics): options take them
    # out of the URL (metrics_credentials); what cannot be read is reported (the progress report's unreadable signal,
    # a WARN) without them. A URL given here with them still authenticates, and is shown without them.
    caplog.set_level(logging.DEBUG)
    port = stub_admin_api.server_address[1]
    admin = PulsarAdmin(url_of(stub_admin_api), timeout_s=2, credentials=TokenAuth(token="admin-tok3n"))
    Scripted.statuses = [(200, b"# no metrics")]
    proxy = BasicAuth("scraper", "pa55w0rd-never-shown")
    assert admin.get_text(f"http://127.0.0.1:{port}/metrics", "reading", proxy) == "# no metrics"
    assert Scripted.seen_auth[-1] == "Basic " + base64.b64encode(b"scraper:pa55w0rd-never-shown").decode()
    Scripted.statuses = [(200, b"# no metrics")]
    assert admin.get_text(f"http://127.0.0.1:{port}/metrics", "reading") == "# no metrics"
    assert Scripted.seen_auth[-1] == "Bearer admin-tok3n"  # without its own: the admin API's
    Scripted.statuses = [403]
    with pytest.raises(AdminError) as refused:
        admin.get_text(f"http://127.0.0.1:{port}/metrics", "reading the broker's publish latency", proxy)
    with pytest.raises(AdminError) as unreachable:
        PulsarAdmin(url_of(stub_admin_api), timeout_s=2).get_text(
            f"http://scraper:pa55w0rd-never-shown@127.0.0.1:{_closed_port()}/metrics", "reading")
    assert f"http://127.0.0.1:{port}/metrics answered HTTP 403" in str(refused.value)
    shown = "\n".join([caplog.text, str(refused.value), str(unreachable.value)])
    assert "pa55w0rd" not in shown and "scraper" not in shown


def test_user_info_in_the_admin_url_authenticates_and_is_shown_nowhere(stub_admin_api, caplog):
    """Options refuse it; an AdminHttp built with one (a library user) takes it out of the URL it shows."""
    caplog.set_level(logging.DEBUG)
    port = stub_admin_api.server_address[1]
    admin = PulsarAdmin(f"http://reader:p@ss:w0rd-never-shown@127.0.0.1:{port}", timeout_s=2, retry_timeout_s=0)
    assert admin.list_topics("public/default") == []
    assert Scripted.seen_auth[-1] == "Basic " + base64.b64encode(b"reader:p@ss:w0rd-never-shown").decode()
    Scripted.statuses = [(500, b"echoed http://reader:p@ss:w0rd-never-shown@127.0.0.1 and p@ss:w0rd-never-shown")]
    with pytest.raises(AdminError) as failed:
        admin.list_topics("public/default")
    unreachable = PulsarAdmin(f"http://reader:p@ss:w0rd-never-shown@127.0.0.1:{_closed_port()}", timeout_s=2)
    with pytest.raises(AdminError, match=r"Cannot reach the Pulsar admin API at http://127\.0\.0\.1:\d+ ") as not_there:
        unreachable.list_topics("public/default")
    shown = "\n".join([caplog.text, str(failed.value), str(not_there.value), repr(admin), repr(unreachable)])
    assert "w0rd" not in shown and "p@ss" not in shown and f"127.0.0.1:{port}" in repr(admin)


def test_read_task_lookups_wait_out_an_outage():
    """Read tasks look entries up on an admin URL the driver already planned with: a connection failure
    there is an outage (a broker restart), retried for pollTimeoutMs, never taken as a wrong URL."""
    url = f"http://127.0.0.1:{_closed_port()}"
    topic = TopicName.parse("t")
    started = time.monotonic()
    with pytest.raises(AdminError, match="Cannot reach"):
        PulsarAdmin(url, timeout_s=1, retry_timeout_s=30).entry_headers(topic, 1, 0)
    assert time.monotonic() - started < 1
    started = time.monotonic()
    with pytest.raises(AdminError, match="Gave up after retrying for 2 s"):
        PulsarAdmin(url, timeout_s=1, retry_timeout_s=2, known_good=True).entry_headers(topic, 1, 0)
    assert 2 <= time.monotonic() - started < 6


def test_entry_lookup_of_a_read_task(stub_admin_api):
    """A read task's lookups: a known-good URL with pollTimeoutMs as the budget, answers cached, and a
    partition whose topic is not stored counts as deleted (asked without reading an entry)."""
    config = ClientConfig("pulsar://unused:6650", (), (), None, 5_000, 100, admin=AdminEndpoint(url_of(stub_admin_api), timeout_ms=2_000))
    part = PartitionRange("persistent://public/default/t-partition-0", 0, EntryPosition(3, -1), EntryPosition(3, 9), 10,
                          config, ((3, 0, 10),))
    lookup = TaskLookup(part)
    try:
        Scripted.statuses = [503, (200, b"", None, {"X-Pulsar-Marker-Type": "1"})]  # retried: the URL is known good
        meta = lookup((3, 4))
        assert meta is not None and meta.marker
        assert lookup((3, 4)) is meta and len(Scripted.seen) == 2  # cached
        Scripted.statuses = [404]  # the topic's internal stats
        assert lookup.partition_gone()
        assert [m for m, _ in Scripted.seen[2:]] == ["GET"]
        assert Scripted.seen[2][1].endswith("/t-partition-0/internalStats")
    finally:
        lookup.close()


def test_a_partition_holding_its_planned_ledger_is_not_gone_after_one_request(stub_admin_api):
    """A read task asks whether its partition was deleted before opening a reader: a partition whose internal
    stats still list the range's first planned ledger is the one planned on (no metadata request: one request
    per task, not two); one that lists only other ledgers (re-created by topic auto-creation) is gone when its
    partitioned topic's metadata is."""
    import json

    config = ClientConfig("pulsar://unused:6650", (), (), None, 5_000, 100, admin=AdminEndpoint(url_of(stub_admin_api), timeout_ms=2_000))
    part = PartitionRange("persistent://public/default/t-partition-0", 0, EntryPosition(3, -1), EntryPosition(4, 9), 20,
                          config, ((3, 0, 10), (4, 0, 10)))

    def stats(*ledgers: int) -> tuple[int, bytes]:
        return 200, json.dumps({"ledgers": [{"ledgerId": ledger, "entries": 10, "size": 100} for ledger in ledgers]}).encode()

    for answers, gone, asked in [([stats(3, 4)], False, ["/t-partition-0/internalStats"]),
                                 ([stats(9), 404], True, ["/t-partition-0/internalStats", "/t/partitions"]),
                                 ([stats(9), (200, b'{"partitions": 2}')], False, ["/t-partition-0/internalStats", "/t/partitions"])]:
        Scripted.seen.clear()
        Scripted.statuses = list(answers)
        lookup = TaskLookup(part)
        try:
            assert lookup.partition_gone() is gone
        finally:
            lookup.close()
        assert [path.split("?")[0].removeprefix("/admin/v2/persistent/public/default") for _, path in Scripted.seen] == asked
