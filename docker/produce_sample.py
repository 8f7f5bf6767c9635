"""Fill SAMPLE_TOPIC with SAMPLE_MESSAGES messages (10 per entry) unless it already has data.

Run by docker/spark-entrypoint.sh before the ingest job, so `docker compose up` has a backlog
to copy. Settings come from the environment: SERVICE_URL, ADMIN_URL, SAMPLE_TOPIC,
SAMPLE_MESSAGES, SAMPLE_PARTITIONS (default 4).
"""

from __future__ import annotations

import itertools
import logging
import os

import pulsar
import requests


def main() -> None:
    service_url, admin_url = os.environ["SERVICE_URL"], os.environ["ADMIN_URL"]
    topic = os.environ.get("SAMPLE_TOPIC", "persistent://public/default/orders")
    messages = int(os.environ.get("SAMPLE_MESSAGES", "20000"))
    partitions = int(os.environ.get("SAMPLE_PARTITIONS", "4"))
    path = f"{admin_url}/admin/v2/persistent/{topic.removeprefix('persistent://')}"

    created = requests.put(f"{path}/partitions", json=partitions, timeout=30)
    if created.status_code == 409:  # exists: produce only once per broker
        print(f"{topic} already exists; not producing a sample backlog again.")
        return
    created.raise_for_status()
    quiet = logging.getLogger("sample-producer")
    quiet.setLevel(logging.WARNING)
    client = pulsar.Client(service_url, logger=quiet)
    try:
        counter = itertools.count()
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                          batching_max_publish_delay_ms=50, block_if_queue_full=True,
                                          message_router=lambda msg, n: next(counter) % n)
        for i in range(messages):
            producer.send_async(f"order-{i:06d}".encode(), lambda result, msg_id: None)
        producer.flush()
        producer.close()
    finally:
        client.close()
    print(f"Produced {messages} messages on {topic} ({partitions} partitions).")


if __name__ == "__main__":
    main()
