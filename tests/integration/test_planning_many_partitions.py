"""Issue 17: a plan over more than 64 partitions with backlog prices the partitions far below their
quotas by estimate (throttling/headroom.py) instead of looking up each new entry; every message is
still planned and read exactly once. Planning and reading are driven directly (the driver's reader,
then the executor's read_range in this process), as Spark drives them trigger after trigger."""

from __future__ import annotations

from collections import Counter

from helpers import create_topic, produce, wait_until
from streaming import source_options

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planning.read_limit import UNLIMITED_ROWS
from pulsar_throttled_source.reading.read import read_ranges
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.throttling.headroom import ESTIMATE_ABOVE

PARTITIONS = ESTIMATE_ABOVE + 6


def test_many_partitions_far_below_their_quotas_are_planned_without_lookups_and_read_exactly_once(
        broker, admin, pulsar_client, unique, tmp_path):
    from pyspark.sql.streaming.datasource import ReadMaxRows

    topic = create_topic(admin, f"many-partitions-{unique}", PARTITIONS)
    opts = source_options(broker, topic, startingOffsets="earliest", subscription=f"many-{unique}",
                          quotaStatePath=str(tmp_path / "quota.sqlite"),
                          metadataRefreshIntervalMs="0",  # each plan reads the topic's layout then: this round's entries
                          dispatchThrottlingRatePerTopicInMsg="1000000",  # precise mode (the default) and
                          dispatchThrottlingRatePerSubscriptionInByte="1000000000")  # a byte quota: entries priced
    reader = AdmissionControlStreamReader(parse_options({k.lower(): str(v) for k, v in opts.items()}))
    sent: list[bytes] = []
    delivered: list[bytes] = []
    lookups: list[int] = []
    try:
        start = reader.initialOffset()
        for round_ in range(4):  # a producer batching 3 messages per entry, two entries per partition a round
            sent += [s.payload for s in produce(pulsar_client, topic, PARTITIONS * 6, batch=3, prefix=f"r{round_}")]
            before = reader.planner.admin.requests_by_kind["entry"]
            end = reader.latestOffset(start, ReadMaxRows(UNLIMITED_ROWS))
            for part in reader.partitions(start, end):
                delivered += [row["value"] for batch in read_ranges(part) for row in batch.to_pylist()]
            reader.commit(end)
            start = end
            lookups_started = reader.planner.admission.backlog_sizes.lookups  # some run in the background: wait for them
            wait_until(lambda: lookups_started.unanswered == 0, what="the plan's background lookups answered")
            lookups.append(reader.planner.admin.requests_by_kind["entry"] - before)
    finally:
        reader.stop()
    # The first plan with data (a new partition's entries become readable once its transaction buffer
    # has caught up: a trigger or two) knows nothing and looks entries up; once known, far below the
    # quotas, the partitions are priced by estimate.
    assert max(lookups) >= PARTITIONS and lookups[-1] == 0, lookups
    assert Counter(delivered) == Counter(sent) and len(delivered) == len(sent)  # nothing lost, nothing twice
