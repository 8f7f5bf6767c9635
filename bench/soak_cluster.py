"""Soak on a real cluster: bench/soak.py's steady producer and throttled query, run against the project's
local cluster (ZooKeeper, 3 bookies, 2 brokers, a proxy; `pulsar_throttled_source.local_broker.cluster`)
while the cluster does what clusters do: every `--unload-minutes` (default 3) all bundles of the topic's
namespace are unloaded (the load manager hands them to either broker), and every `--restart-minutes`
(default 15) one broker, in turn, is killed with SIGKILL (its bundles move once its metadata session
expires) and started again.

The topic lives in a namespace of 8 bundles, so its 2 partitions may be owned by different brokers; the
query's service.url names both brokers and its admin.url is the proxy's. The
producer's namespace has broker deduplication on and its sends never time out, so a send a killed broker
persisted but did not acknowledge is not written twice: what the sink then counts twice is the source's.

Same report and targets as bench/soak.py (exit 1 if missed): nothing lost or duplicated, no window over
the quota by more than 5 %, planner memory growth after warm-up under 10 %; plus how many unloads and
restarts ran.

    .venv/bin/python bench/soak_cluster.py [--minutes 60] [--rate 200] [--unload-minutes 3] [--restart-minutes 15]

Not part of `make test`.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import time
from pathlib import Path

import requests

from pulsar_throttled_source.local_broker.cluster import ClusterSettings, LocalCluster
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from soak import PARTITIONS, parser, prepare_environment, soak  # noqa: E402
from topic_admin import TopicAdmin  # noqa: E402

BUNDLES = 8


class ClusterChaos:
    """Called at every sample with the elapsed seconds: unloads the namespace's bundles and restarts brokers on
    their schedules (one action per call, so a sample row follows each)."""

    def __init__(self, cluster: LocalCluster, namespace: str, unload_s: float, restart_s: float) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.unload_s, self.restart_s = unload_s, restart_s
        self.next_unload, self.next_restart = unload_s, restart_s
        self.unloads = self.restarts = 0

    @property
    def admin_url(self) -> str:
        assert self.cluster.info is not None
        return self.cluster.info.brokers[0]["adminUrl"]

    def __call__(self, elapsed: float) -> None:
        if elapsed >= self.next_restart:
            self.next_restart += self.restart_s
            self.restart_broker()
        elif elapsed >= self.next_unload:
            self.next_unload += self.unload_s
            self.unload_bundles()

    def unload_bundles(self) -> None:
        admin_url = self.live_admin_url()
        bundles = requests.get(f"{admin_url}/admin/v2/namespaces/{self.namespace}/bundles", timeout=30).json()["boundaries"]
        for low, high in itertools.pairwise(bundles):
            answer = requests.put(f"{admin_url}/admin/v2/namespaces/{self.namespace}/{low}_{high}/unload", timeout=60)
            if answer.status_code not in (204, 404, 412):  # 404/412: a bundle not loaded anywhere yet
                answer.raise_for_status()
        self.unloads += 1
        print(f"  chaos: unloaded the {len(bundles) - 1} bundles of {self.namespace}", flush=True)

    def restart_broker(self) -> None:
        assert self.cluster.info is not None
        victim = self.cluster.info.brokers[self.restarts % len(self.cluster.info.brokers)]["name"]
        self.cluster.kill(victim)
        started = time.monotonic()
        self.cluster.restart(victim)
        self.restarts += 1
        print(f"  chaos: {victim} killed (SIGKILL) and started again in {time.monotonic() - started:.0f} s", flush=True)

    def live_admin_url(self) -> str:
        assert self.cluster.info is not None
        for broker in self.cluster.info.brokers:
            try:
                requests.get(f"{broker['adminUrl']}/admin/v2/brokers/health", timeout=5)
                return broker["adminUrl"]
            except requests.RequestException:
                continue
        return self.admin_url


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--unload-minutes", type=float, default=3.0)
    p.add_argument("--restart-minutes", type=float, default=15.0)
    args = p.parse_args(argv)
    prepare_environment()
    work = Path(tempfile.mkdtemp(prefix="bench-soak-cluster-"))
    print(f"starting a local Pulsar cluster in {work} ...", file=sys.stderr)
    with LocalCluster(work / "cluster", ClusterSettings(max_entries_per_ledger=2000)) as cluster:
        assert cluster.info is not None
        admin_url = cluster.info.brokers[0]["adminUrl"]
        namespace = f"public/soak-{time.time_ns()}"
        requests.put(f"{admin_url}/admin/v2/namespaces/{namespace}", json={"bundles": {"numBundles": BUNDLES}},
                     timeout=30).raise_for_status()
        requests.post(f"{admin_url}/admin/v2/namespaces/{namespace}/deduplication", json=True, timeout=30).raise_for_status()
        topic = TopicName.parse(f"persistent://{namespace}/soak")
        admin = TopicAdmin(admin_url)
        admin.create_partitioned_topic(topic, PARTITIONS)
        admin.close()
        chaos = ClusterChaos(cluster, namespace, args.unload_minutes * 60, args.restart_minutes * 60)
        print(f"cluster {cluster.info.serviceUrl}; namespace {namespace} ({BUNDLES} bundles, deduplication on); "
              f"unload every {args.unload_minutes:g} min, a broker restart every {args.restart_minutes:g} min")
        # The query's admin.url is the proxy's: a killed broker is not the query's only way to the admin API.
        code = soak(args, cluster.info.serviceUrl, cluster.info.proxy["adminUrl"], topic, work, chaos, send_timeout_millis=0)
        print(f"chaos: {chaos.unloads} unloads of every bundle, {chaos.restarts} broker restarts (SIGKILL)")
        return code


if __name__ == "__main__":
    sys.exit(main())
