"""Issue 34: a batch query's range starting and ending inside batched entries (startingOffsets/endingOffsets
with a batchIndex): exactly the messages from the start message (inclusive) to the end message (exclusive), on
both read paths, and the errors around it."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from helpers import create_topic, produce
from native_path import read_paths
from streaming import source_options


def read_batch(spark, opts: dict[str, str]) -> Counter:
    return Counter(bytes(r.value) for r in spark.read.format("pulsar-throttled").options(**opts).load().collect())


def at(position: tuple[int, int, int]) -> dict[str, int]:
    ledger, entry, index = position
    return {"ledgerId": ledger, "entryId": entry, "batchIndex": index}


@pytest.mark.parametrize("read_path", read_paths("native", "python"))
def test_a_range_from_inside_one_batched_entry_to_inside_another(spark, broker, admin, pulsar_client, unique, read_path):
    topic = create_topic(admin, f"batchidx-{unique}-{read_path}", 2)
    sent = produce(pulsar_client, topic, 240, batch=10)  # entries of 10 messages, 12 per partition
    p0, p1 = f"{topic}-partition-0", f"{topic}-partition-1"
    by_entry = Counter(s.position[:2] for s in sent if s.partition == 0)
    entries = sorted(by_entry)
    assert all(by_entry[e] >= 8 for e in entries[2:6]), by_entry  # the bounds below are inside batched entries
    start0, end0 = (*entries[2], 3), (*entries[5], 7)
    start1 = next((*s.position[:2], 4) for s in sorted(sent, key=lambda s: s.position) if s.partition == 1
                  and s.position[1] > 0)
    opts = source_options(broker, topic, readPath=read_path, maxEntriesPerTask="2",  # bounds on the first and last tasks
                          startingOffsets=json.dumps({p0: at(start0), p1: at(start1)}),
                          endingOffsets=json.dumps({p0: at(end0)}))  # partition 1: to latest
    expected = Counter(s.payload for s in sent if (s.partition == 0 and start0 <= s.position < end0)
                       or (s.partition == 1 and s.position >= start1))
    assert read_batch(spark, opts) == expected
    # Arrow batches of 3 rows: an entry's messages arrive in several groups (the native path), each bounded.
    assert read_batch(spark, {**opts, "maxRowsPerArrowBatch": "3"}) == expected

    # Both bounds inside one entry, and a batchIndex past the entry's last message (the whole entry).
    inside = json.dumps({p0: at((*entries[7], 2))}), json.dumps({p0: at((*entries[7], 6))})
    assert read_batch(spark, source_options(broker, topic, readPath=read_path, startingOffsets=inside[0],
                                            endingOffsets=inside[1])) == \
        Counter(s.payload for s in sent if s.partition == 0 and (*entries[7], 2) <= s.position < (*entries[7], 6))
    whole = json.dumps({p0: at((*entries[8], 999))})
    assert read_batch(spark, source_options(broker, topic, readPath=read_path, startingOffsets=inside[0],
                                            endingOffsets=whole)) == \
        Counter(s.payload for s in sent if s.partition == 0 and (*entries[7], 2) <= s.position < (*entries[9], 0))


def test_a_start_after_the_end_inside_an_entry_and_a_stream_given_a_batch_index_are_clear_errors(
        spark, broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"batchidxbad-{unique}", 0)
    sent = produce(pulsar_client, topic, 40, batch=10)
    ledger, entry = sent[15].position[:2]
    started = time.monotonic()
    with pytest.raises(Exception, match=rf"start \({ledger}:{entry}:5\) is after the end \({ledger}:{entry}:2\)"):
        read_batch(spark, source_options(broker, topic, startingOffsets=json.dumps({topic: at((ledger, entry, 5))}),
                                         endingOffsets=json.dumps({topic: at((ledger, entry, 2))})))
    same = json.dumps({topic: at((ledger, entry, 4))})
    assert read_batch(spark, source_options(broker, topic, startingOffsets=same, endingOffsets=same)) == Counter()
    with pytest.raises(Exception, match=r"'startingOffsets' for partition .*\"batchIndex\" .* applies to batch queries"):
        spark.readStream.format("pulsar-throttled").options(**source_options(broker, topic, startingOffsets=same)).load() \
            .writeStream.format("noop").start().awaitTermination(30)
    assert time.monotonic() - started < 30
