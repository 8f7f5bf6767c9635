"""Issue 52: the source on a secured local cluster (LocalCluster with ClusterSettings(secured=True): TLS on both
brokers' and the proxy's ports, each member's certificate naming only its own 127.0.0.N address, clients
authenticated by RS256 JWTs on brokers and proxy). One cluster and one real OAuth2 server for the module; the server
signs with the cluster's token key, so its access tokens and the cluster's static tokens are both accepted.

A throttled stream through the TLS proxy with a token, and one straight to a broker with OAuth2 whose admin calls
for the other broker's partitions are redirected (307) to that broker's host: the credentials go along and that
host's name is checked. Exact payload sets, every quota window within its quota; a wrong CA or a name the
certificate does not carry fails fast, naming the host."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pulsar
import pytest
import requests
import trustme
from conftest import SAME_MESSAGE_LIMIT, TEST_ENTRIES_PER_LEDGER
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from helpers import Sent, produce, quiet_logger, wait_until
from identity_provider import IdentityProvider
from pyspark.errors import AnalysisException
from quota_windows import Sink, per_window_ok, start_query, stop
from streaming import read_stream

from pulsar_throttled_source.admin_endpoint import AdminEndpoint
from pulsar_throttled_source.credentials import TlsSettings, TokenAuth
from pulsar_throttled_source.local_broker.cluster import ClusterSettings, LocalCluster
from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName

PARTITIONS = 6
BUNDLES = 8
ENTRY_QUOTA = 2  # entries per partition and second
READER_CLIENT = "reader-client"  # the OAuth2 client id; its tokens' sub is the role "reader"
JAVA = "org.apache.pulsar.client.impl.auth."
FAIL_BOUND_S = 30
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """The secured cluster and the OAuth2 server. The server starts once the cluster has made its token key (before
    ZooKeeper starts), beside the cluster's members."""
    settings = ClusterSettings(secured=True, max_entries_per_ledger=TEST_ENTRIES_PER_LEDGER,
                               broker_extra=tuple(SAME_MESSAGE_LIMIT.items()))
    data_dir = tmp_path_factory.mktemp("secured-cluster")
    cluster = LocalCluster(data_dir, settings)
    key_file = data_dir / "security" / "token.key.pem"
    idp: IdentityProvider | None = None
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        cluster_started = pool.submit(cluster.start)
        try:
            wait_until(lambda: key_file.exists() or cluster_started.done(), 60, what="the cluster's token key")
            key = load_pem_private_key(key_file.read_bytes(), password=None)
            idp = IdentityProvider(tmp_path_factory.mktemp("idp"), audience="pulsar-local-cluster",
                                   roles={READER_CLIENT: "reader"}, signing_key=key)  # type: ignore[arg-type]
            idp.start()
            info = cluster_started.result()
            print(f"\nsecured cluster and OAuth2 server ready in {time.monotonic() - started:.1f} s")
            assert info.security is not None
            yield SimpleNamespace(cluster=cluster, idp=idp, tls=info.security, ca=info.security["caFile"],
                                  brokers=info.brokers)
        finally:
            if not cluster_started.done():
                cluster_started.exception()  # a start under way ends (and stops what it started on failure) first
            if idp is not None:
                idp.stop()
            cluster.stop(graceful=False)


def admin_token(secured: SimpleNamespace) -> str:
    return secured.cluster.security.token_file("admin").read_text()


def admin_call(secured: SimpleNamespace, method: str, url: str, allow_redirects: bool = True, **kwargs) -> requests.Response:
    """The superuser's admin call over https (the cluster's CA, the name checked), following a broker's redirect to
    another broker with the token (requests drops it on a host change)."""
    headers = {"Authorization": f"Bearer {admin_token(secured)}"}
    params = kwargs.pop("params", None)
    for _ in range(5):
        answer = requests.request(method, url, headers=headers, verify=secured.ca, timeout=60, allow_redirects=False,
                                  params=params, **kwargs)
        if not allow_redirects or answer.status_code not in (307, 308):
            return answer
        url, params = answer.headers["Location"], None  # the Location holds the query already
    raise AssertionError(f"{method} {url}: still redirected after 5 hops")


def owners(secured: SimpleNamespace, topic: str) -> dict[str, str]:
    """Each partition's owner by a lookup over https: partition -> the owner's https admin URL."""
    name, at = TopicName.parse(topic), secured.tls["brokers"][0]["adminUrl"]
    found = {}
    for i in range(PARTITIONS):
        answer = admin_call(secured, "GET", f"{at}/lookup/v2/topic/{name.partition(i).rest_path}")
        answer.raise_for_status()
        found[str(name.partition(i))] = str(answer.json()["httpUrlTls"])
    return found


def spread(secured: SimpleNamespace, topic: str) -> dict[str, str]:
    """Give the topic's bundles to both brokers, about half of its partitions each; the owners then."""
    at = secured.tls["brokers"][0]["adminUrl"]
    current = owners(secured, topic)
    by_bundle: dict[str, list[str]] = {}
    for partition in current:
        answer = admin_call(secured, "GET", f"{at}/lookup/v2/topic/{TopicName.parse(partition).rest_path}/bundle")
        by_bundle.setdefault(answer.text.strip(), []).append(partition)
    tls_to_id = {t["adminUrl"]: p["adminUrl"].removeprefix("http://")  # a broker's id names its plain web port
                 for t, p in zip(secured.tls["brokers"], secured.brokers, strict=True)}
    load = dict.fromkeys(tls_to_id, 0)
    namespace = TopicName.parse(topic).namespace_name
    for bundle, partitions in sorted(by_bundle.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        target = min(load, key=lambda url: (load[url], url))
        load[target] += len(partitions)
        if current[partitions[0]] != target:
            admin_call(secured, "PUT", f"{at}/admin/v2/namespaces/{namespace}/{bundle}/unload",
                       params={"destinationBroker": tls_to_id[target]}).raise_for_status()
    return owners(secured, topic)


@pytest.fixture(scope="module")
def spread_topic(secured) -> tuple[str, list[Sent], dict[str, str]]:
    """A 6-partition topic in a namespace of 8 bundles, its partitions owned by both brokers, written over TLS by a
    batching producer (5 per entry) and a plain one."""
    at = secured.tls["brokers"][0]["adminUrl"]
    namespace = f"public/secured-{uuid.uuid4().hex[:8]}"
    admin_call(secured, "PUT", f"{at}/admin/v2/namespaces/{namespace}", json={"bundles": {"numBundles": BUNDLES}}).raise_for_status()
    topic = f"persistent://{namespace}/spread"
    admin_call(secured, "PUT", f"{at}/admin/v2/{TopicName.parse(topic).rest_path}/partitions", json=PARTITIONS).raise_for_status()
    owner = spread(secured, topic)
    client = pulsar.Client(secured.tls["serviceUrl"], authentication=pulsar.AuthenticationToken(admin_token(secured)),
                           tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True,
                           logger=quiet_logger("secured-cluster-producer"))
    try:
        sent = produce(client, topic, 60, batch=5, prefix="batched") + produce(client, topic, 30, prefix="plain")
    finally:
        client.close()
    return topic, sent, owner


def tls_options(url: dict[str, str], ca: str, topic: str, tmp_path, **extra: str) -> dict[str, str]:
    return {"service.url": url["serviceUrl"], "admin.url": url["adminUrl"], "topic": topic,
            "pulsar.client.tlsTrustCertsFilePath": ca, "startingOffsets": "earliest",
            "quotaStatePath": str(tmp_path / "quota.sqlite"), "metadataRefreshIntervalMs": "400", **extra}


def oauth2(idp: IdentityProvider, credentials) -> dict[str, str]:
    """The Java client's plugin class and parameter names, as a pulsar-spark query has them."""
    return {"pulsar.client.authPluginClassName": JAVA + "oauth2.AuthenticationOAuth2",
            "pulsar.client.authParams": json.dumps({"type": "client_credentials", "issuerUrl": idp.issuer_url,
                                                    "privateKey": f"file://{credentials}", "audience": idp.audience})}


def drain_throttled(spark, opts: dict[str, str], sent: list[Sent], tmp_path) -> Sink:
    """A throttled stream (ENTRY_QUOTA entries per partition and second) until every payload arrived."""
    sink = Sink()
    query = start_query(spark, {**opts, "throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": str(ENTRY_QUOTA)},
                        tmp_path / "cp", sink)
    try:
        payloads = {s.payload for s in sent}
        # A deadline only (a loaded 2-core machine starts read tasks' Python workers slowly): it ends at the last payload.
        wait_until(lambda: payloads <= {v for b in sink.snapshot() for v in b.values} or not query.isActive, 300,
                   what="every message")
        assert query.isActive, query.exception()
    finally:
        stop(query, sink)
    return sink


def assert_exactly_once_under_quota(sink: Sink, topic: str, sent: list[Sent]) -> None:
    table = sink.table([str(TopicName.parse(topic).partition(i)) for i in range(PARTITIONS)])
    delivered = [v for b in sink.data_batches() for v in b.values]
    assert Counter(delivered) == Counter(s.payload for s in sent), table
    assert len(sink.data_batches()) >= 3, f"the quota should spread the backlog over several batches\n{table}"
    ok, why = per_window_ok(sink.data_batches(), lambda b, p: b.n_entries(p), ENTRY_QUOTA)
    assert ok, f"{why}\n{table}"


def test_a_throttled_stream_through_the_tls_proxy_with_a_token(spark, secured, spread_topic, tmp_path):
    topic, sent, owner = spread_topic
    assert set(owner.values()) == {b["adminUrl"] for b in secured.tls["brokers"]}, owner  # both brokers own some
    proxy = secured.tls["proxy"]
    # The proxy wants a token too, and answers the admin API for every partition itself (it follows redirects).
    assert requests.get(f"{proxy['adminUrl']}/admin/v2/clusters", verify=secured.ca, timeout=30).status_code == 401
    for partition in owner:
        answer = admin_call(secured, "GET", f"{proxy['adminUrl']}/admin/v2/{TopicName.parse(partition).rest_path}/internalStats",
                            allow_redirects=False)
        assert answer.status_code == 200, (partition, answer.status_code, answer.headers)
    token = secured.cluster.security.token("reader", lifetime_s=600)
    sink = drain_throttled(spark, tls_options(proxy, secured.ca, topic, tmp_path, **{"pulsar.client.authParams": f"token:{token}"}),
                           sent, tmp_path)
    assert_exactly_once_under_quota(sink, topic, sent)


def test_oauth2_straight_to_a_broker_redirected_to_the_others_host(spark, secured, spread_topic, tmp_path, capfd):
    topic, sent, owner = spread_topic
    first, second = secured.tls["brokers"]
    elsewhere = next(p for p, url in owner.items() if url == second["adminUrl"])
    path = f"/admin/v2/{TopicName.parse(elsewhere).rest_path}/internalStats"
    access_token = secured.idp.access_token(READER_CLIENT)
    # The first broker sends an admin call for the second's partition to that broker's own https address.
    answer = requests.get(f"{first['adminUrl']}{path}", headers={"Authorization": f"Bearer {access_token}"},
                          verify=secured.ca, allow_redirects=False, timeout=30)
    assert answer.status_code == 307 and answer.headers["Location"].startswith(second["adminUrl"] + "/"), answer.headers
    # The source's admin client follows it with the credentials (without them the second broker answers 401) and
    # with the certificate checked against the host it goes to.
    admin = PulsarAdmin.at(AdminEndpoint(first["adminUrl"], TokenAuth(token=access_token), TlsSettings(trust_file=secured.ca)))
    try:
        assert admin.internal_stats(TopicName.parse(elsewhere))["ledgers"], elsewhere
    finally:
        admin.close()

    credentials = secured.idp.write_credentials(READER_CLIENT, tmp_path / "reader-client.json")
    opts = tls_options(first, secured.ca, topic, tmp_path, **oauth2(secured.idp, credentials))
    read_stream(spark, opts).explain(True)  # the plan shows the options: not their secrets
    sink = drain_throttled(spark, opts, sent, tmp_path)
    assert_exactly_once_under_quota(sink, topic, sent)
    out, err = capfd.readouterr()
    assert secured.idp.client_secret(READER_CLIENT) not in out + err
    assert not JWT.search(out + err), "a token appears in the driver's output"
    assert "pulsar.client.authParams=*********(redacted)" in out + err, "explain() did not show the options"


def load_error(spark, opts: dict[str, str]) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(AnalysisException) as err:
        read_stream(spark, opts)
    return str(err.value), time.monotonic() - started


def test_a_wrong_ca_or_a_name_the_certificate_does_not_carry_fails_fast_naming_the_host(spark, secured, spread_topic,
                                                                                       tmp_path):
    """At load, before any read task would retry a refused certificate as if the broker were down: for the broker's
    binary port and for its admin API, each named with the URL and what to set."""
    topic, _, _ = spread_topic
    first = secured.tls["brokers"][0]
    auth = {"pulsar.client.authParams": f"token:{secured.cluster.security.token('reader', lifetime_s=600)}"}
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    # 127.6 is 127.0.0.6 to the resolver, but not a name the broker's certificate carries (only the IP 127.0.0.6).
    short = {k: v.replace("127.0.0.6", "127.6") for k, v in first.items()}
    cases = {
        "wrong CA": (tls_options(first, str(other_ca), topic, tmp_path, **auth),
                     f"TLS failed with the Pulsar broker at {first['serviceUrl']}", "'pulsar.client.tlsTrustCertsFilePath'"),
        "wrong CA for the admin API": (tls_options(first, secured.ca, topic, tmp_path, **auth,
                                                   **{"pulsar.admin.tlsTrustCertsFilePath": str(other_ca)}),
                                       f"TLS failed with the Pulsar admin API at {first['adminUrl']}", "tlsTrustCertsFilePath'"),
        "another name": (tls_options({**first, "serviceUrl": short["serviceUrl"]}, secured.ca, topic, tmp_path, **auth),
                         f"TLS failed with the Pulsar broker at {short['serviceUrl']}", "does not name that host"),
        "another name for the admin API": (tls_options({**first, "adminUrl": short["adminUrl"]}, secured.ca, topic, tmp_path, **auth),
                                           f"TLS failed with the Pulsar admin API at {short['adminUrl']}", "does not name that host"),
    }
    # The cluster's service URL names both brokers: the second one reached by a name its certificate lacks.
    second = secured.tls["brokers"][1]["serviceUrl"].removeprefix("pulsar+ssl://").replace("127.0.0.7", "127.7")
    both = {**first, "serviceUrl": f"{first['serviceUrl']},{second}"}
    cases["another name for the second broker"] = (tls_options(both, secured.ca, topic, tmp_path, **auth),
                                                    f"TLS failed with the Pulsar broker at {both['serviceUrl']} (host {second})",
                                                    "does not name that host")
    for case, (opts, names_the_host, fix) in cases.items():
        message, elapsed = load_error(spark, opts)
        assert names_the_host in message and fix in message, (case, message[:2000])
        assert elapsed < FAIL_BOUND_S, (case, elapsed)
