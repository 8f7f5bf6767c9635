"""Throughput: drain a 1,000,000-message backlog through the source vs plain pulsar-client readers.

Both sides run in the same process count (Spark local[N] vs N reader processes), against the
same real local broker, in the same run; the figure that matters is the ratio.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/throughput.py [--messages 1000000] [--processes 2]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import sys
import time

import pulsar

from pulsar_throttled_source.admin import PulsarAdmin
from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("bench-client")
    logger.setLevel(logging.WARNING)
    return logger


def produce(service_url: str, topic: str, messages: int, size: int) -> None:
    client = pulsar.Client(service_url, logger=quiet_logger())
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True,
                                      max_pending_messages=50000,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    body = b"x" * size
    for _ in range(messages):
        producer.send_async(body, None)
    producer.flush()
    producer.close()
    client.close()


def read_partitions(args: tuple[str, list[str], dict[str, tuple[int, int]]]) -> int:
    """Plain reader baseline: read each partition from the beginning to its last entry."""
    service_url, partitions, last = args
    client = pulsar.Client(service_url, logger=quiet_logger())
    count = 0
    for partition in partitions:
        reader = client.create_reader(partition, pulsar.MessageId.earliest)
        end = last[partition]
        while True:
            msg = reader.read_next(30000)
            mid = msg.message_id()
            msg.data()
            count += 1
            pos = (mid.ledger_id(), mid.entry_id())
            if pos >= end and not reader.has_message_available():
                break
        reader.close()
    client.close()
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    with LocalBroker() as broker:
        admin = PulsarAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-throughput-{int(time.time())}")
        admin.create_partitioned_topic(topic, args.partitions)
        t0 = time.perf_counter()
        produce(broker.service_url, str(topic), args.messages, args.size)
        print(f"produced {args.messages:,} messages of {args.size} B on {args.partitions} partitions in {time.perf_counter() - t0:.1f} s")
        last = {}
        for name, stats in admin.partitioned_internal_stats(topic).items():
            ledger, entry = stats["lastConfirmedEntry"].split(":")
            last[name] = (int(ledger), int(entry))

        # Baseline: plain readers, partitions spread over the same number of processes.
        parts = sorted(last)
        groups = [parts[i::args.processes] for i in range(args.processes)]
        t0 = time.perf_counter()
        with mp.get_context("spawn").Pool(args.processes) as pool:
            counts = pool.map(read_partitions, [(broker.service_url, g, last) for g in groups])
        baseline_s = time.perf_counter() - t0
        assert sum(counts) == args.messages, counts

        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master(f"local[{args.processes}]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        spark.range(4).repartition(args.processes).count()  # start the Python workers before timing

        def run_source(name: TopicName) -> tuple[float, int]:
            t = time.perf_counter()
            q = (spark.readStream.format("pulsar-throttled").option("service.url", broker.service_url)
                 .option("admin.url", broker.admin_url).option("topic", str(name)).option("startingOffsets", "earliest")
                 .load().writeStream.format("noop").trigger(availableNow=True).start())
            q.awaitTermination()
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            return time.perf_counter() - t, rows

        # A streaming job runs warm: the first query of a JVM pays for class loading and JIT
        # (measured here at 3-4x slower), so warm up on a separate small topic first.
        warm = TopicName.parse(f"{topic.local}-warmup")
        admin.create_partitioned_topic(warm, args.partitions)
        produce(broker.service_url, str(warm), args.messages // 5, args.size)
        run_source(warm)
        source_s, rows = run_source(topic)
        assert rows == args.messages, rows
        spark.stop()

    base_rate = args.messages / baseline_s
    source_rate = args.messages / source_s
    print(f"plain pulsar-client readers ({args.processes} processes): {baseline_s:6.1f} s  {base_rate:>12,.0f} msg/s")
    print(f"pulsar-throttled source (local[{args.processes}], noop sink): {source_s:6.1f} s  {source_rate:>12,.0f} msg/s")
    print(f"ratio source/plain: {source_rate / base_rate:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()
