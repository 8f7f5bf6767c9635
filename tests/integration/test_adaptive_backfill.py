"""adaptiveThrottling end to end (issue 40): a real broker and Spark, an adaptive backfill with a high ceiling, and a
producer writing at a fixed rate into the same topic meanwhile, whose publish latency is measured.

The load the query must yield to is real but made deterministic: another application's durable subscription
("billing") that the broker throttles (its own dispatch-rate policy) while it drains the same backlog, which the
broker counts in its dispatchThrottled* counters (Pulsar 4.0+): the othersThrottled signal. Publish-latency stress
(pendingAdds, lookupLatency) is not what this test waits for: on the 2-core test machine, shared with Spark and with
other test runs, a backfill's effect on a producer's latency is real but too uneven to assert on (bench/README.md,
adaptive_backfill.py, has the figures); the producer's p50/p99 per phase are printed, not asserted.

What is asserted: the query starts in slow start, m doubling from its floor up to the ceiling (0.1, 0.2, 0.4, 0.8, 1;
a signal firing on the loaded machine ends slow start early, then m climbs additively); once billing subscribes and
is throttled m falls (othersThrottled fired); once billing stops, m climbs back to 1 within recovery_windows + a few
windows of stats lag; every batch admits at most max(1, floor(m x ceiling))
entries for the m its plan applied, and every quota window at most the ceiling; the sink gets exactly the payloads
sent, backlog and producer's, none lost or duplicated.
"""

from __future__ import annotations

import json
import math
import statistics
import threading
import time

import pulsar
from helpers import wait_until
from quota_windows import Sink, options, per_window_ok, planned_batches, send_entries, start_query, stop

from pulsar_throttled_source.quota_settings import AdaptiveConfig
from pulsar_throttled_source.throttling.congestion import recovery_windows
from pulsar_throttled_source.topics import TopicName

CEILING = 50  # entries (one message each) per 1 s quota window: the topic quota, m x it admitted
BACKLOG = 400
BILLING_RATE = 5  # messages per second the broker lets the other application's subscription have
PRODUCER_RATE = 5  # messages per second written by the live producer meanwhile
CONFIG = AdaptiveConfig(min_multiplier=0.1, decrease=0.5, increase=0.25, window_ms=1000)
ADAPTIVE = {"adaptiveThrottling": "true", "adaptiveThrottlingWindow": "1s", "adaptiveThrottlingDecreasePercent": 50,
            "adaptiveThrottlingIncreasePercent": 25, "adaptiveThrottlingMinPercent": 10}


class FixedRateProducer(threading.Thread):
    """Sends one message every 1/rate s until stopped (at most `limit`), recording each send's publish latency."""

    def __init__(self, client: pulsar.Client, topic: str, rate: float, limit: int = 2_000) -> None:
        super().__init__(daemon=True)
        self.producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        self.rate, self.limit = rate, limit
        self.halt = threading.Event()
        self.sent: list[bytes] = []
        self.latencies: list[tuple[float, float]] = []  # (sent at, seconds to the broker's acknowledgement)
        self.errors: list[object] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        start = time.monotonic()
        for i in range(self.limit):
            if self.halt.wait(max(0.0, start + i / self.rate - time.monotonic())):
                break
            body = f"live-{i}".encode()
            began = time.time()

            def done(res, _mid, body=body, began=began) -> None:
                with self.lock:
                    if res == pulsar.Result.Ok:
                        self.sent.append(body)
                        self.latencies.append((began, time.time() - began))
                    else:
                        self.errors.append(res)
            self.producer.send_async(body, done)
        self.producer.flush()
        self.producer.close()

    def percentiles(self, since: float, until: float) -> str:
        with self.lock:
            got = sorted(latency for at, latency in self.latencies if since <= at < until)
        if len(got) < 2:
            return "too few sends"
        p99 = got[min(len(got) - 1, math.ceil(0.99 * len(got)) - 1)]
        return f"p50 {statistics.median(got) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms over {len(got)} sends"


def adaptive_reports(query) -> dict[int, dict]:
    """The adaptive object of each batch's progress report, by batch id (batches planned before the first decision
    have none)."""
    reports = {}
    for batch_id, progress in planned_batches(query).items():
        adaptive = json.loads(progress["sources"][0]["latestOffset"]).get("adaptive")
        if adaptive is not None:
            reports[batch_id] = adaptive
    return reports


def all_reports(query) -> list[dict]:
    """Every trigger's adaptive object in order, batches or not (idle triggers report too)."""
    found = []
    for progress in query.recentProgress:
        adaptive = json.loads(progress["sources"][0]["latestOffset"] or "{}").get("adaptive")
        if adaptive is not None:
            found.append(adaptive)
    return found


def test_an_adaptive_backfill_yields_to_a_throttled_subscription_and_climbs_back(spark, broker, admin, pulsar_client,
                                                                                  tmp_path, unique):
    topic = f"persistent://public/default/adaptive-backfill-{unique}"
    name = TopicName.parse(topic)
    admin.create_topic(name)
    admin.set_subscription_level_dispatch_rate(name, "billing", {"dispatchThrottlingRateInMsg": BILLING_RATE})
    send_entries(pulsar_client, topic, BACKLOG, prefix="backlog")
    backlog = [f"backlog-{i}".encode() for i in range(BACKLOG)]
    live = FixedRateProducer(pulsar_client, topic, PRODUCER_RATE)
    live.start()

    sink = Sink("adaptive")
    opts = options(broker, tmp_path, topic, subscription="adaptive-backfill", throttlingMode="batch",
                   dispatchThrottlingRatePerTopicInMsg=CEILING, **ADAPTIVE)
    query = start_query(spark, opts, tmp_path / "cp", sink)
    billing_stop = threading.Event()
    try:
        # Slow start: from the floor, doubling each window nothing fired, to the ceiling.
        wait_until(lambda: any(r["multiplier"] == 1.0 for r in all_reports(query)) or not query.isActive, 60,
                   what="m at the ceiling after slow start")
        starting = all_reports(query)
        billing = pulsar_client.subscribe(topic, "billing", initial_position=pulsar.InitialPosition.Earliest,
                                          receiver_queue_size=5)
    except BaseException:
        live.halt.set()
        stop(query, sink)
        raise

    def drain_billing() -> None:
        while not billing_stop.is_set():
            try:
                billing.acknowledge(billing.receive(200))
            except pulsar.Timeout:
                pass
    billing_thread = threading.Thread(target=drain_billing, daemon=True)
    billing_thread.start()
    try:
        started = time.time()
        wait_until(lambda: any(r["multiplier"] <= 0.25 and "othersThrottled" in r["fired"] for r in all_reports(query))
                   or not query.isActive, 90, what="m lowered while billing is throttled")
        billing_stop.set()
        billing_thread.join(5)
        billing.close()
        calm = time.time()
        lowest = min(r["multiplier"] for r in all_reports(query)[len(starting):])  # since billing subscribed
        reports_then = len(all_reports(query))
        wait_until(lambda: all_reports(query)[-1]["multiplier"] == 1.0 or not query.isActive, 90,
                   what="m back at the ceiling")
        recovered = all_reports(query)[reports_then:]
        climbed = time.time()
        live.halt.set()
        live.join(10)
        expected = backlog + live.sent
        wait_until(lambda: sink.total() >= len(expected) or not query.isActive, 120, what="everything sent read")
        alive = query.isActive  # (stopping it may interrupt the sink of a batch under way: an error of no interest)
        trace = [(r["windowStartMs"] % 100_000, r["multiplier"], r["fired"]) for r in all_reports(query)]
    finally:
        billing_stop.set()
        live.halt.set()
        stop(query, sink)
    assert alive, query.exception()
    print(f"phases: lowered in {calm - started:.1f} s, climbed back in {climbed - calm:.1f} s, read the rest in "
          f"{time.time() - climbed:.1f} s; m per trigger (window, m, fired): {trace}")
    print(f"producer publish latency: backfill under throttled billing {live.percentiles(started, calm)}; "
          f"while m climbs {live.percentiles(calm, climbed)}; after {live.percentiles(climbed, time.time())}")
    print(sink.table([topic]))
    assert not live.errors

    # Exactly the payloads sent, none lost or duplicated.
    got = [v for b in sink.snapshot() for v in b.values]
    assert sorted(got) == sorted(expected)

    # Slow start: m began at the floor and doubled in each window until the ceiling, or until a signal fired (the
    # loaded machine's pending adds, say) and ended it.
    doubling = [r["multiplier"] for r in starting[:next((i for i, r in enumerate(starting) if r["fired"]), len(starting))]]
    assert doubling and doubling[0] <= 0.2 and set(doubling) <= {0.1, 0.2, 0.4, 0.8, 1.0}, starting
    assert doubling == sorted(doubling), starting

    # m fell under load and climbed back to the ceiling within the recovery time constant (+ stats lag).
    assert lowest <= 0.25
    windows = sorted({r["windowStartMs"] for r in recovered})
    assert len(windows) <= recovery_windows(CONFIG) + 4, windows
    assert recovered[-1]["ceiling"]["topic"]["messages"] == CEILING

    # Every batch within m x its ceiling for the m its plan applied, every quota window within the ceiling.
    batches = sink.data_batches()
    adaptive = adaptive_reports(query)
    for b in batches:
        report = adaptive.get(b.batch_id)
        if report is not None:
            assert b.n_entries(topic) <= max(1, math.floor(report["multiplier"] * CEILING)), (b.batch_id, report)
    ok, why = per_window_ok(batches, lambda b, p: b.n_entries(p), CEILING)
    assert ok, why


def test_the_publish_latency_signal_reads_a_real_brokers_metrics_page(broker, admin, pulsar_client, unique):
    """adaptiveThrottlingMetricsUrl: the broker's Prometheus page parses (prometheus-client) into its publish latency
    summary and write latency buckets; the first reading is a baseline (clear), and a page that cannot be read raises
    (the controller: unknown, hold)."""
    import pytest

    from pulsar_throttled_source.metadata.admin_http import AdminError
    from pulsar_throttled_source.metadata.broker_metrics import PUBLISH_LATENCY, WRITE_LATENCY, broker_latency, write_latency
    from pulsar_throttled_source.throttling.signals import PublishLatencySignal

    send_entries(pulsar_client, f"persistent://public/default/adaptive-metrics-{unique}", 20)
    url = f"{broker.admin_url}/metrics/"
    page = admin.get_text(url, "reading the broker's metrics")
    assert "pulsar_topics_count" in page  # the broker's own page
    latency = write_latency(page)  # None until the broker's first stats period has ended (60 s after its start)
    assert latency is not None or WRITE_LATENCY not in page
    # The summary is on the page from the start (its quantiles NaN until a stats period with writes has ended).
    assert f"# TYPE {PUBLISH_LATENCY} summary" in page
    import re
    shown = re.search(rf'^{PUBLISH_LATENCY}{{[^}}]*quantile="0.99"[^}}]*}} (\S+)$', page, re.M)
    assert shown is not None
    publish, _ = broker_latency(page)
    p99 = float(shown.group(1))
    assert (publish.at(0.99) if publish else None) == (p99 if math.isfinite(p99) else None)
    assert PublishLatencySignal(lambda: admin.get_text(url, "reading the broker's metrics")).read().state == "clear"
    with pytest.raises(AdminError, match="HTTP 404"):
        PublishLatencySignal(lambda: admin.get_text(f"{broker.admin_url}/no-such-page/", "reading")).read()
