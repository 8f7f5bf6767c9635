"""Which observable moves when a backfill hurts a live producer (issue 40): the candidates for adaptiveThrottling's
stress signals, sampled idle and under static-quota backfills, beside the live producer's own publish latency.

The set-up is adaptive_backfill.py's (a live producer at --rate msg/s, a backlog of --messages on 2 partitions, a
Spark query draining it out of the broker's cache in batch mode under a static topic quota), on a broker whose stats
period is lowered to --stats-period seconds (statsUpdateFrequencyInSecs, managedLedgerStatsPeriodSeconds). Every
0.5 s the script times the admin requests the source's catalog makes (a partition's internal stats and stats) and a
cheap one (brokers/ready); every second it reads the broker's metrics page: the p99 of its publish latency summary
(pulsar_broker_publish_latency), the bucket of the p99 storage write (pulsar_storage_write_latency_le_*),
pulsar_ml_reads_available_inflight_bytes and pulsar_ml_ReadEntriesErrors. Per phase (idle, each static quota,
idle again) it prints the producer's p50 / p99 and each candidate's spread, then, per stats period, the producer's
p99 beside the broker's. A signal separates the cases when its figures under the harmful backfill sit apart from
idle's; the other tenants of a shared machine move all of them (the load average is printed).

    .venv/bin/python bench/stress_observables.py [--seconds 30] [--quotas 1000,250] [--stats-period 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading
import time

import requests
from backfill_bench import LiveProducer, backfill, backfill_bench, percentile

from pulsar_throttled_source.metadata.broker_metrics import broker_latency
from pulsar_throttled_source.topics import TopicName

TIMED = ("internalStats", "stats", "ready")


class Sampler(threading.Thread):
    """(time, name, value) samples of every candidate, until halted."""

    def __init__(self, admin_url: str, partition: TopicName) -> None:
        super().__init__(daemon=True)
        self.session = requests.Session()
        self.urls = {"internalStats": f"{admin_url}/admin/v2/{partition.rest_path}/internalStats",
                     "stats": f"{admin_url}/admin/v2/{partition.rest_path}/stats",
                     "ready": f"{admin_url}/admin/v2/brokers/ready"}
        self.metrics_url = f"{admin_url}/metrics/"
        self.halt = threading.Event()
        self.samples: list[tuple[float, str, float]] = []
        self.periods: list[tuple[float, float | None, float]] = []  # (first seen, summary p99, write bucket p99)

    def run(self) -> None:
        tick, last = 0, None
        while not self.halt.wait(0.5):
            now = time.time()
            try:
                for name, url in self.urls.items():
                    began = time.perf_counter()
                    self.session.get(url, timeout=10).raise_for_status()
                    self.samples.append((now, name, (time.perf_counter() - began) * 1000))
                if tick % 2 == 0:
                    text = self.session.get(self.metrics_url, timeout=10).text
                    publish, write = broker_latency(text)
                    figures = (publish.quantiles if publish else None, write.buckets if write else None)
                    if figures != last:
                        last = figures
                        self.periods.append((now, publish.at(0.99) if publish else None,
                                             write.quantile_bound(0.99) if write and write.writes else float("nan")))
                    for line in text.splitlines():
                        for metric in ("pulsar_ml_reads_available_inflight_bytes", "pulsar_ml_ReadEntriesErrors"):
                            if line.startswith(metric):
                                self.samples.append((now, metric, float(line.rsplit(" ", 1)[1])))
            except (requests.RequestException, ValueError) as e:
                print(f"sample failed: {type(e).__name__}: {str(e)[:100]}", flush=True)
            tick += 1


def report(name: str, sampler: Sampler, live: LiveProducer, start: float, end: float, stats_period: int) -> None:
    got = live.latencies(start, end)
    print(f"\n{name}: producer p50 {percentile(got, 0.5) * 1000:.1f} ms, p99 {percentile(got, 0.99) * 1000:.1f} ms "
          f"over {len(got)} sends; load average {os.getloadavg()[0]:.1f}")
    for metric in (*TIMED, "pulsar_ml_reads_available_inflight_bytes", "pulsar_ml_ReadEntriesErrors"):
        values = sorted(v for at, n, v in list(sampler.samples) if n == metric and start <= at < end)
        if values:
            unit = " ms" if metric in TIMED else ""
            print(f"  {metric}{' request' if unit else ''}: min {values[0]:.1f}{unit}, median "
                  f"{statistics.median(values):.1f}{unit}, p90 {percentile(values, 0.9):.1f}{unit}, max {values[-1]:.1f}{unit}")
    for at, summary_p99, bucket_p99 in [p for p in sampler.periods if start + stats_period <= p[0] < end]:
        prior = live.latencies(at - stats_period, at)
        print(f"  period ending ~{at - start:4.0f} s: producer p99 {percentile(prior, 0.99) * 1000:6.1f} ms | the broker's "
              f"p99 {summary_p99 if summary_p99 is not None else float('nan'):6.1f} ms (summary), <= {bucket_p99:g} ms (buckets)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="per phase")
    parser.add_argument("--quotas", default="1000,250", help="static topic quotas (entries/s per partition), in order")
    parser.add_argument("--rate", type=float, default=200.0, help="the live producer's messages per second")
    parser.add_argument("--messages", type=int, default=1_000_000, help="the backlog")
    parser.add_argument("--stats-period", type=int, default=5, help="the broker's stats period (seconds)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with backfill_bench("observables", args.messages, args.rate, args.stats_period) as bench:
        broker, admin, backlog, live = bench.broker, bench.admin, bench.backlog, bench.live
        sampler = Sampler(broker.admin_url, backlog.partition(0))
        sampler.start()
        phases: list[tuple[str, int | None]] = [("idle", None)] + [(f"static {q}", int(q)) for q in args.quotas.split(",")]
        for name, quota in [*phases, ("idle again", None)]:
            admin.unload_topic(backlog)
            time.sleep(1.0)
            if quota is None:
                start = time.time()
                time.sleep(args.seconds)
                end = time.time()
            else:
                options = {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": str(quota)}
                start, end, read, _, _ = backfill(bench.spark, broker, str(backlog), options, args.seconds, bench.work)
                print(f"\n{name}: backfill {read / (end - start):,.0f} msg/s", end="")
            report(name, sampler, live, start, end, args.stats_period)
        sampler.halt.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
