"""Whether the broker deduplicates pulsar-client's batches right on a retry: what decides if deliveryGuarantee=
effectivelyOnce could send batched (it sends one message per entry: writing/producer_settings.py).

    .venv/bin/python bench/batch_dedup.py

On a local broker with deduplication on, a producer of a fixed name sends rows 0..999 (sequence ids 1..1000, in
batches of 100 when batched; the Python wrapper takes a sequence id of 0 as unset), then a second producer of the same
name "retries" three ways: every row again from the first, from a row inside a batch (550: the retry's batches are
cut elsewhere than the first attempt's), and the sink's own way (the rows above the producer's last_sequence_id()),
sending up to row 1,199. Each case's topic is then read whole: how many rows landed twice or not at all, and the last
sequence id the second producer was given. pulsar-client-cpp gives a batch its first message's sequence id and sets
no highest_sequence_id (lib/Commands.cc, MessageAndCallbackBatch), so the broker knows a batch by its first id only.
"""

from __future__ import annotations

import collections
import time

import pulsar
import requests

from pulsar_throttled_source.local_broker import LocalBroker

ROWS, RETRY_END, PER_BATCH = 1000, 1200, 100


def send(client: pulsar.Client, topic: str, rows: range, batched: bool) -> int:
    """Send `rows` as one producer named dedup-p (sequence id: row + 1); its last_sequence_id() when it opened."""
    producer = client.create_producer(topic, producer_name="dedup-p", batching_enabled=batched,
                                      batching_max_messages=PER_BATCH, batching_max_publish_delay_ms=60_000,
                                      block_if_queue_full=True)
    last = int(producer.last_sequence_id())
    for row in rows:
        producer.send_async(b"%d" % row, None, sequence_id=row + 1)
    producer.flush()
    producer.close()
    return last


def landed(client: pulsar.Client, topic: str) -> collections.Counter[int]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    rows: collections.Counter[int] = collections.Counter()
    while reader.has_message_available():
        rows[int(reader.read_next(10_000).data())] += 1
    reader.close()
    return rows


def main() -> None:
    with LocalBroker() as broker:
        admin = broker.admin_url
        requests.put(f"{admin}/admin/v2/namespaces/public/dedup", json={}, timeout=60)
        requests.post(f"{admin}/admin/v2/namespaces/public/dedup/deduplication", json=True, timeout=60).raise_for_status()
        client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        try:
            for batched in (True, False):
                for case, first in (("every row again", 0), ("from row 550", 550), ("rows above last_sequence_id()", None)):
                    topic = f"persistent://public/dedup/batch-dedup-{time.time_ns()}"
                    send(client, topic, range(ROWS), batched)
                    last = send(client, topic, range(0), batched)  # opens and closes: the id the broker gives back
                    start = last if first is None else first  # sequence id last is row last - 1: the next row is `last`
                    send(client, topic, range(start, RETRY_END), batched)
                    rows = landed(client, topic)
                    twice = sorted(r for r, n in rows.items() if n > 1)
                    missing = sum(1 for r in range(RETRY_END) if r not in rows)
                    print(f"{'batched' if batched else 'unbatched':9} retry {case:30}: last_sequence_id {last} (of {ROWS}); "
                          f"{sum(rows.values())} messages for {RETRY_END} rows, {len(twice)} rows twice"
                          + (f" ({twice[0]}..{twice[-1]})" if twice else "") + f", {missing} missing", flush=True)
        finally:
            client.close()


if __name__ == "__main__":
    main()
