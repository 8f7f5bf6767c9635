"""Throughput: drain a 1,000,000-message backlog through the source vs plain pulsar-client readers.

Both sides run in the same process count (Spark local[N] vs N reader processes), against the
same real local broker, in the same run; the figure that matters is the ratio.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/throughput.py [--messages 1000000] [--processes 2] [--rounds 3]

`--scenario schema` instead drains a topic of Avro records (~100 B each, written by a producer
with an AVRO schema) twice per round: raw (decodeSchema=false, the payload bytes) and decoded into
columns (the default), and prints what decoding costs: decoded time / raw time (target <= 2).

`--scenario steady` measures a long drain's steady-state rate against plain readers (see
bench/steady_state.py).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

import pulsar

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName

# Topic management (creating the benchmark's topics) is test support code, not part of the source.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from topic_admin import TopicAdmin  # noqa: E402


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("bench-client")
    logger.setLevel(logging.WARNING)
    return logger


def produce(service_url: str, topic: str, messages: int, size: int, batching: bool = True) -> None:
    client = pulsar.Client(service_url, logger=quiet_logger())
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_messages=1000,
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


def spark_floor_source(rows: int, partitions: int) -> type:
    """A Python streaming source that yields prebuilt Arrow batches of the source's exact schema
    and row count, with no Pulsar behind it: what Spark itself costs to start a query on a Python
    source and carry these rows into the sink. No Python source can drain faster than this."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from pulsar_throttled_source.schemas.columns import RAW_ARROW_SCHEMA, RAW_SPARK_SCHEMA_DDL

    class FloorReader(DataSourceStreamReader):
        def initialOffset(self) -> dict:
            return {"done": 0}

        def latestOffset(self) -> dict:
            return {"done": 1}

        def partitions(self, start: dict, end: dict) -> list:
            return [InputPartition(i) for i in range(partitions)] if start["done"] < end["done"] else []

        def read(self, partition: InputPartition):
            n = 10_000
            batch = pa.RecordBatch.from_arrays([
                pa.nulls(n, pa.string()), pa.array([b"x" * 100] * n, pa.binary()),
                pa.repeat(pa.scalar(f"persistent://public/default/floor-partition-{partition.value}", pa.string()), n),
                pa.repeat(pa.scalar(partition.value, pa.int32()), n), pa.array([bytes(14)] * n, pa.binary()),
                pa.array(range(n), pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.nulls(n, pa.timestamp("us", tz="UTC")),
                pa.array([[]] * n, RAW_ARROW_SCHEMA.field("properties").type), pa.nulls(n, pa.string()),
                pa.repeat(pa.scalar("bench-producer", pa.string()), n)], schema=RAW_ARROW_SCHEMA)
            for _ in range(rows // partitions // n):
                yield batch

        def commit(self, end: dict) -> None:
            pass

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-spark-floor"

        def schema(self) -> str:
            return RAW_SPARK_SCHEMA_DDL

        def streamReader(self, schema):
            return FloorReader()

    return FloorSource


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="measured passes per side (after one warm-up pass each)")
    parser.add_argument("--scenario", choices=("plain", "schema", "steady"), default="plain",
                        help="plain: the source vs plain readers; schema: Avro decoding vs the raw read; "
                             "steady: the steady-state rate of a long drain vs plain readers (10,000,000 messages)")
    parser.add_argument("--batches", type=int, default=20, help="steady: micro-batches to split the backlog into")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.scenario == "schema":
        from schema_decoding import run_schema_scenario

        run_schema_scenario(args)
        return
    if args.scenario == "steady":
        from steady_state import run_steady_scenario

        run_steady_scenario(args)
        return

    with LocalBroker() as broker:
        admin = TopicAdmin(broker.admin_url)
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

        def run_plain() -> float:
            t0 = time.perf_counter()
            with mp.get_context("spawn").Pool(args.processes) as pool:
                counts = pool.map(read_partitions, [(broker.service_url, g, last) for g in groups])
            assert sum(counts) == args.messages, counts
            return time.perf_counter() - t0

        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master(f"local[{args.processes}]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")

        assert args.messages % (args.partitions * 10_000) == 0, "--messages must be a multiple of partitions x 10,000"
        spark.dataSource.register(spark_floor_source(args.messages, args.partitions))

        def run_source(fmt: str = "pulsar-throttled") -> float:
            t = time.perf_counter()
            q = (spark.readStream.format(fmt).option("service.url", broker.service_url)
                 .option("admin.url", broker.admin_url).option("topic", str(topic)).option("startingOffsets", "earliest")
                 .load().writeStream.format("noop").trigger(availableNow=True).start())
            q.awaitTermination()
            elapsed = time.perf_counter() - t
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            assert rows == args.messages, rows
            return elapsed

        # A streaming job runs warm: the first drains of a JVM pay for class loading and JIT
        # (measured at 3-4x slower), so each side makes one unreported pass first; then the
        # sides alternate so that both meet the same broker state, and medians are compared.
        run_plain()
        run_source()
        run_source("bench-spark-floor")
        plain_s: list[float] = []
        source_s: list[float] = []
        floor_s: list[float] = []
        for r in range(args.rounds):
            plain_s.append(run_plain())
            source_s.append(run_source())
            floor_s.append(run_source("bench-spark-floor"))
            print(f"round {r + 1}: plain readers {plain_s[-1]:.2f} s, source {source_s[-1]:.2f} s, "
                  f"Spark floor {floor_s[-1]:.2f} s")
        spark.stop()

    base_rate = args.messages / statistics.median(plain_s)
    source_rate = args.messages / statistics.median(source_s)
    print(f"plain pulsar-client readers ({args.processes} processes): median {statistics.median(plain_s):6.2f} s  {base_rate:>12,.0f} msg/s")
    print(f"pulsar-throttled source (local[{args.processes}], noop sink): median {statistics.median(source_s):6.2f} s  {source_rate:>12,.0f} msg/s")
    print(f"ratio source/plain: {source_rate / base_rate:.2f} (target >= 0.8)")
    floor = statistics.median(floor_s)
    print(f"Spark floor (a Python source yielding prebuilt Arrow batches of the same schema and rows, no Pulsar): "
          f"median {floor:.2f} s")
    print(f"source minus Spark floor: {statistics.median(source_s) - floor:.2f} s vs plain readers {statistics.median(plain_s):.2f} s; "
          f"best ratio any Python source could reach here (plain time + floor): "
          f"{statistics.median(plain_s) / (statistics.median(plain_s) + floor):.2f}")


if __name__ == "__main__":
    main()
