"""bench/throughput.py --scenario schema: what decoding an AVRO topic into columns costs against
reading the same topic's payloads as bytes (decodeSchema=false), same broker, same Spark, same run."""

from __future__ import annotations

import statistics
import time
from typing import Any

import pulsar
from pulsar.schema import AvroSchema, Double, Integer, Long, Record, String
from throughput import quiet_logger
from topic_admin import TopicAdmin

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.topics import TopicName


class Order(Record):
    _avro_namespace = "bench"
    id = Long()
    item = String()
    qty = Integer()
    price = Double()
    note = String()


def produce_orders(service_url: str, topic: str, messages: int) -> int:
    """Avro records of about 100 bytes, batched as a producer in the field batches them; returns
    the encoded size of one record."""
    client = pulsar.Client(service_url, logger=quiet_logger())
    schema = AvroSchema(Order)
    producer = client.create_producer(topic, schema=schema, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True, max_pending_messages=50000,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    note = "n" * 60
    for i in range(messages):
        producer.send_async(Order(id=i, item=f"item-{i % 1000}", qty=i % 50, price=i * 0.01, note=note), None)
    producer.flush()
    producer.close()
    client.close()
    return len(schema.encode(Order(id=1, item="item-1", qty=1, price=0.01, note=note)))


def run_schema_scenario(args: Any) -> None:
    from pyspark.sql import SparkSession

    with LocalBroker() as broker:
        admin = TopicAdmin(broker.admin_url)
        topic = TopicName.parse(f"bench-schema-{int(time.time())}")
        admin.create_partitioned_topic(topic, args.partitions)
        t0 = time.perf_counter()
        size = produce_orders(broker.service_url, str(topic), args.messages)
        print(f"produced {args.messages:,} Avro records of {size} B on {args.partitions} partitions in {time.perf_counter() - t0:.1f} s")
        spark = (SparkSession.builder.master(f"local[{args.processes}]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")

        def drain(decode: bool) -> float:
            t = time.perf_counter()
            df = (spark.readStream.format("pulsar-throttled").option("service.url", broker.service_url)
                  .option("admin.url", broker.admin_url).option("topic", str(topic)).option("startingOffsets", "earliest")
                  .option("decodeSchema", str(decode).lower()).load())
            assert ("price" in df.columns) == decode, df.columns
            q = df.writeStream.format("noop").trigger(availableNow=True).start()
            q.awaitTermination()
            elapsed = time.perf_counter() - t
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            assert rows == args.messages, rows
            return elapsed

        drain(False)  # warm-up passes (class loading, JIT, Python workers)
        drain(True)
        raw_s: list[float] = []
        decoded_s: list[float] = []
        for r in range(args.rounds):
            raw_s.append(drain(False))
            decoded_s.append(drain(True))
            print(f"round {r + 1}: raw bytes {raw_s[-1]:.2f} s, decoded columns {decoded_s[-1]:.2f} s")
        spark.stop()
        admin.close()

    raw, decoded = statistics.median(raw_s), statistics.median(decoded_s)
    print(f"raw read (decodeSchema=false): median {raw:6.2f} s  {args.messages / raw:>12,.0f} msg/s")
    print(f"Avro decoded into 5 columns:    median {decoded:6.2f} s  {args.messages / decoded:>12,.0f} msg/s")
    print(f"decode cost: decoded/raw {decoded / raw:.2f} (target <= 2.0)")
