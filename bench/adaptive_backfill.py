"""What an adaptive backfill spares a live producer (issue 40): the producer's publish latency and the backfill's
throughput, idle / under a static quota at the ceiling / under adaptiveThrottling with the same ceiling / under a
sweep of lower static quotas, all in one run on one broker.

A live producer writes unbatched 100 B messages at a fixed rate (default 200 msg/s) to its own topic and times
each send (send_async to the broker's acknowledgement) for the whole run. A backlog (default 2 partitions,
1,000,000 messages of 100 B batched 10 to an entry) is drained, from the start each time and out of the broker's cache (the
topic is unloaded first), by a Spark streaming query (local[2], a 1 s processing-time trigger, a noop sink) for
--seconds per scenario (from its first batch on):
- idle: no backfill (the producer's baseline);
- static at the ceiling (--ceiling entries per second per partition, batch mode);
- adaptive at the same ceiling (adaptiveThrottling, 2 s controller windows, +10 points a clear window,
  adaptiveThrottlingTriggerInterval=1s: the batchDuration signal, and adaptiveThrottlingMetricsUrl: the
  publishLatency signal, at +50 % (adaptiveThrottlingPublishLatencyPercent, the target's 1.5x), with the others),
  as a user who wants the broker's publish latency to count would set it:
  the broker's stats period lowered to --stats-period seconds (statsUpdateFrequencyInSecs and
  managedLedgerStatsPeriodSeconds, 60 s by default), or that signal could move m once a minute at most;
- static sweep: ceiling / 2, / 4, / 8.
Per scenario: the producer's p50 / p99 publish latency, and the backfill's throughput (messages read per second,
from the query's progress). Then the target of issue 40: the latency bound is 1.5 x the idle p99; the best static
quota meeting it, and the adaptive backfill's throughput against that one's (target >= 70 %) and its p99 against
the bound. Exit status 0 either way: the figures are the point (bench/README.md).

    .venv/bin/python bench/adaptive_backfill.py [--seconds 30] [--ceiling 1000] [--rate 200] [--messages 1000000]
                                                [--stats-period 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading
import time
from collections import Counter

from backfill_bench import backfill, backfill_bench, percentile

# As a user whose bound is the producer's p99 within 1.5x its quiet p99 sets it: publishLatency at +50 %.
ADAPTIVE = {"adaptiveThrottling": "true", "adaptiveThrottlingWindow": "2s", "adaptiveThrottlingIncreasePercent": "10",
            "adaptiveThrottlingTriggerInterval": "1s", "adaptiveThrottlingPublishLatencyPercent": "50"}


class BrokerLatencyWatch(threading.Thread):
    """The broker's own p99 publish latency (its pulsar_broker_publish_latency summary, one figure per stats period),
    read every second: does the broker see what the live producer feels?"""

    def __init__(self, metrics_url: str) -> None:
        super().__init__(daemon=True)
        self.url = metrics_url
        self.halt = threading.Event()
        self.periods: list[tuple[float, float]] = []  # (first read at, p99 ms), one per stats period

    def run(self) -> None:
        import requests

        from pulsar_throttled_source.metadata.broker_metrics import broker_latency
        last = None
        while not self.halt.wait(1.0):
            try:
                publish, _ = broker_latency(requests.get(self.url, timeout=5).text)
            except Exception:  # noqa: BLE001 (a figure missed, not a failed benchmark)
                continue
            if publish is not None and publish.quantiles != last and publish.at(0.99) is not None:
                last = publish.quantiles
                self.periods.append((time.time(), publish.at(0.99) or 0.0))

    def p99s(self, since: float, until: float) -> list[float]:
        return [p99 for at, p99 in list(self.periods) if since <= at < until]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="per scenario")
    parser.add_argument("--ceiling", type=int, default=1000, help="entries per second per partition (batch mode)")
    parser.add_argument("--rate", type=float, default=200.0, help="the live producer's messages per second")
    parser.add_argument("--messages", type=int, default=1_000_000, help="the backlog")
    parser.add_argument("--stats-period", type=int, default=5,
                        help="the broker's statsUpdateFrequencyInSecs and managedLedgerStatsPeriodSeconds (seconds)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with backfill_bench("adaptive", args.messages, args.rate, args.stats_period) as bench:
        broker, admin, backlog, live = bench.broker, bench.admin, bench.backlog, bench.live
        watch = BrokerLatencyWatch(f"{broker.admin_url}/metrics/")
        watch.start()
        quota = {"throttlingMode": "batch"}
        scenarios: list[tuple[str, dict[str, str] | None]] = [
            ("idle", None),
            (f"static {args.ceiling} (the ceiling)", {**quota, "dispatchThrottlingRatePerTopicInMsg": str(args.ceiling)}),
            (f"adaptive, ceiling {args.ceiling}", {**quota, "dispatchThrottlingRatePerTopicInMsg": str(args.ceiling),
                                                   **ADAPTIVE, "adaptiveThrottlingMetricsUrl": f"{broker.admin_url}/metrics/"}),
        ] + [(f"static {args.ceiling // d}", {**quota, "dispatchThrottlingRatePerTopicInMsg": str(args.ceiling // d)})
             for d in (2, 4, 8)]
        rows = []
        for name, options in scenarios:
            admin.unload_topic(backlog)  # out of the broker's cache: every scenario reads from the bookie
            # A stats period with no backfill in between: the adaptive query's first reading of the broker's publish
            # latency (its baseline) is not the previous scenario's load.
            time.sleep(max(1.0, args.stats_period + 1.0))
            if options is None:
                start = time.time()
                time.sleep(args.seconds)
                end, read, multipliers, fired = time.time(), 0, list[float](), Counter[str]()
            else:
                try:
                    start, end, read, multipliers, fired = backfill(bench.spark, broker, str(backlog), options,
                                                                    args.seconds, bench.work)
                except Exception as e:  # a machine too busy for Spark (workers that do not connect back in time)
                    print(f"{name}: failed ({type(e).__name__}: {str(e)[:200]})", flush=True)
                    continue
            got = live.latencies(start, end)
            row = (name, percentile(got, 0.5) * 1000, percentile(got, 0.99) * 1000, read / (end - start), len(got),
                   multipliers)
            rows.append(row)
            m = (f"; m min {min(multipliers):.2f}, mean {statistics.mean(multipliers):.2f}, last {multipliers[-1]:.2f}; "
                 f"fired in {len(multipliers)} reports: {dict(fired) or 'none'}" if multipliers else "")
            seen = watch.p99s(start + args.stats_period, end)  # periods that ended inside the scenario
            broker_p99 = (f"; the broker's p99 per {args.stats_period} s period: median {statistics.median(seen):.1f} ms, "
                          f"max {max(seen):.1f} ms" if seen else "")
            print(f"{name}: producer p50 {row[1]:.1f} ms, p99 {row[2]:.1f} ms over {row[4]} sends; backfill "
                  f"{row[3]:,.0f} msg/s{m}{broker_p99}; load average {os.getloadavg()[0]:.1f}", flush=True)
        watch.halt.set()

    idle_p99 = rows[0][2]
    bound = 1.5 * idle_p99
    print("\nscenario | producer p50 ms | producer p99 ms | p99 / idle p99 | backfill msg/s | within 1.5x idle p99")
    for name, p50, p99, rate, _, _ in rows:
        print(f"{name} | {p50:.1f} | {p99:.1f} | {p99 / idle_p99:.2f} | {rate:,.0f} | {'yes' if p99 <= bound else 'no'}")
    statics = [r for r in rows if r[0].startswith("static") and r[2] <= bound]
    adaptive = next((r for r in rows if r[0].startswith("adaptive")), None)
    if adaptive is None:
        print("the adaptive backfill failed: no comparison")
    elif statics:
        best = max(statics, key=lambda r: r[3])
        print(f"best static quota within the bound: {best[0]} at {best[3]:,.0f} msg/s; adaptive drains at "
              f"{adaptive[3] / best[3]:.0%} of it (target >= 70 %), p99 {adaptive[2] / idle_p99:.2f}x idle "
              f"(target <= 1.5x)")
    else:
        print(f"no static quota of the sweep kept the producer's p99 within {bound:.1f} ms (1.5x idle); adaptive: "
              f"p99 {adaptive[2] / idle_p99:.2f}x idle at {adaptive[3]:,.0f} msg/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
