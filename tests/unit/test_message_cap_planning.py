"""maxMessagesPerTrigger (Kafka's maxOffsetsPerTrigger): the offset that may end inside an entry (old checkpoints
load as before), the cap split over partitions, and micro-batches cut inside batched entries, on fake layouts, a
fake clock and fake entry lookups. Against a real broker, on both read paths: tests/integration/test_message_cap.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from builders import P0, P1, PLANNER_START, layout, reader, unlimited
from fakes import FakeAdmin, FakeCatalog, FakeClock
from pyspark.sql.streaming.datasource import ReadAllAvailable

from pulsar_throttled_source.metadata.backlog_sizes import BacklogSizes
from pulsar_throttled_source.offsets import CHECKPOINT_HINT, SourceOffset
from pulsar_throttled_source.planning.message_cap import MessageCap, split_messages
from pulsar_throttled_source.positions import EntryPosition, MessagePosition
from pulsar_throttled_source.read_task import PartitionRange, ranges_of

OLD = {P0: {"ledgerId": 5, "entryId": 3}, P1: {"ledgerId": 6, "entryId": -1}, "queryId": "0123456789abcdef0123456789abcdef"}


# --- the offset


def test_an_offset_written_before_batch_indexes_loads_unchanged_and_is_written_back_byte_for_byte():
    offset = SourceOffset.from_json(json.loads(json.dumps(OLD)), "checkpointed offset")
    assert offset.positions == {P0: EntryPosition(5, 3), P1: EntryPosition(6, -1)} and offset.cuts == {}
    assert json.dumps(offset.to_json()) == json.dumps(OLD)


def test_an_offset_cut_inside_an_entry_names_the_entry_and_the_first_message_not_included():
    written = {P0: {"ledgerId": 5, "entryId": 4, "batchIndex": 7}, P1: {"ledgerId": 6, "entryId": 0, "batchIndex": 3},
               "queryId": "0123456789abcdef0123456789abcdef"}
    offset = SourceOffset.from_json(written, "checkpointed offset")
    # In memory: the last entry wholly included (before ledger 6's first entry: 6:-1) and the index.
    assert offset.positions == {P0: EntryPosition(5, 3), P1: EntryPosition(6, -1)}
    assert offset.cuts == {P0: 7, P1: 3}
    assert offset.cut_message(P0) == MessagePosition(5, 4, 7) and offset.cut_message(P1) == MessagePosition(6, 0, 3)
    assert json.dumps(offset.to_json()) == json.dumps(written)
    assert offset != SourceOffset.from_json(OLD, "checkpointed offset")  # the same entries, not the same offset


@pytest.mark.parametrize("bad", [0, -1, "7", True, 1.5])
def test_a_bad_batch_index_is_a_checkpoint_error(bad):
    with pytest.raises(ValueError) as err:
        SourceOffset.from_json({P0: {"ledgerId": 5, "entryId": 4, "batchIndex": bad}}, "checkpointed offset")
    assert "batchIndex must be a positive integer" in str(err.value) and CHECKPOINT_HINT in str(err.value)


# --- the split


def test_the_cap_is_split_in_proportion_and_adds_up():
    assert split_messages(20, {"a": 30, "b": 10}) == {"a": 15, "b": 5}
    shares = split_messages(7, {"a": 1, "b": 1, "c": 1})
    assert sum(shares.values()) == 7 and sorted(shares.values()) == [2, 2, 3]
    assert split_messages(0, {"a": 3}) == {"a": 0}


class FakeCounts:
    """Each partition's entries (ledger by ledger, in backlog order) hold `counts[partition][i]` messages; the
    positions asked are recorded, and `unanswered` ones are never answered (a lookup over its deadline)."""

    def __init__(self, counts: dict[str, list[int]], catalog: FakeCatalog, unanswered: set[tuple[int, int]] | None = None) -> None:
        self.counts = counts
        self.order = {p: entries_of(catalog, p) for p in catalog.snap.layouts}
        self.unanswered = unanswered or set()
        self.asked: list[tuple[str, tuple[int, int]]] = []
        self.plans = 0

    def new_plan(self, partitions: int = 0) -> None:
        self.plans += 1

    def message_counts(self, partition, backlog, positions):
        self.asked += [(partition, p) for p in positions]
        order = self.order[partition]
        return {p: self.counts[partition][order.index(p)] for p in positions if p not in self.unanswered}


def entries_of(catalog: FakeCatalog, partition: str) -> list[tuple[int, int]]:
    return [(l.ledger_id, e) for l in catalog.snap.layouts[partition].ledgers for e in range(l.entries)]


def cap_reader(tmp_path, catalog: FakeCatalog, counts: FakeCounts | BacklogSizes, cap: int, clock=None, **options):
    r = reader(tmp_path, catalog, clock, maxMessagesPerTrigger=cap, **options)
    r.planner._p.message_cap = MessageCap(counts)  # the lookups on fakes instead of a broker
    return r


def messages_read(task, counts: dict[str, list[int]], catalog: FakeCatalog) -> Counter:
    """The (partition, ledger, entry, batch index) a read task delivers: its ranges' entries, the first and last
    bounded at their batch indexes, as the read loop keeps them (reading/range_progress.py)."""
    out: Counter = Counter()
    for r in ranges_of(task):
        assert isinstance(r, PartitionRange)
        order = entries_of(catalog, r.partition)
        for ledger, first, count in r.runs or ():
            for entry in range(first, first + count):
                lo, hi = 0, counts[r.partition][order.index((ledger, entry))]
                if r.first_message is not None and r.first_message[:2] == (ledger, entry):
                    lo = r.first_message[2]
                if r.end_message is not None and r.end_message[:2] == (ledger, entry):
                    hi = r.end_message[2]
                out.update((r.partition, ledger, entry, i) for i in range(lo, hi))
    return out


def run_batches(r, catalog, counts, limit=None, stop_after: int | None = None, start=None):
    """Plan and "read" micro-batches until nothing is new: each batch's message count, what all delivered, the
    last end offset (as Spark hands it back, JSON)."""
    start = start if start is not None else r.initialOffset()
    sizes, delivered = [], Counter()
    while stop_after is None or len(sizes) < stop_after:
        end = r.latestOffset(start, limit or unlimited())
        if end == start:
            break
        batch = Counter()
        for task in r.partitions(start, end):
            batch += messages_read(task, counts, catalog)
        sizes.append(sum(batch.values()))
        delivered += batch
        start = json.loads(json.dumps(end))  # through the checkpoint's JSON
    return sizes, delivered, start


def every_message(counts: dict[str, list[int]], catalog: FakeCatalog) -> Counter:
    out: Counter = Counter()
    for p in catalog.snap.layouts:
        for (ledger, entry), n in zip(entries_of(catalog, p), counts[p], strict=True):
            out.update((p, ledger, entry, i) for i in range(n))
    return out


# --- micro-batches cut inside entries


def test_batches_of_seven_from_entries_of_ten_end_inside_entries_and_deliver_each_message_once(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    counts = {P0: [10] * 10}
    r = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 7)
    start = r.initialOffset()
    first = r.latestOffset(start, unlimited())
    assert first[P0] == {"ledgerId": 5, "entryId": 0, "batchIndex": 7}
    (task,) = r.partitions(start, first)
    assert (task.start, task.end, task.first_message, task.end_message) == (EntryPosition(5, -1), EntryPosition(5, 0), None, (5, 0, 7))
    second = r.latestOffset(first, unlimited())
    assert second[P0] == {"ledgerId": 5, "entryId": 1, "batchIndex": 4}
    (task,) = r.partitions(first, second)
    assert (task.start, task.end, task.first_message, task.end_message) == (EntryPosition(5, -1), EntryPosition(5, 1), (5, 0, 7), (5, 1, 4))
    sizes, delivered, _ = run_batches(r, catalog, counts)
    assert sizes == [7] * 14 + [2]
    assert delivered == every_message(counts, catalog)  # each message exactly once


def test_a_batch_inside_one_large_entry_reads_its_middle(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 2)]))
    counts = {P0: [25, 3]}
    r = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 10)
    first = r.latestOffset(r.initialOffset(), unlimited())
    second = r.latestOffset(first, unlimited())
    assert (first[P0]["batchIndex"], second[P0]["batchIndex"]) == (10, 20)
    (task,) = r.partitions(first, second)
    assert (task.start, task.end, task.first_message, task.end_message) == (EntryPosition(5, -1), EntryPosition(5, 0), (5, 0, 10), (5, 0, 20))
    third = r.latestOffset(second, unlimited())
    assert third[P0] == {"ledgerId": 5, "entryId": 1}  # 5 + 3: the batch ends on an entry boundary, no index


def test_the_cap_is_spread_over_partitions_in_proportion_to_their_backlogs(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 30)]), layout(P1, [(6, 10)]))
    counts = {P0: [10] * 30, P1: [10] * 10}
    r = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 20)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert end[P0] == {"ledgerId": 5, "entryId": 1, "batchIndex": 5}  # 15 = 10 + 5
    assert end[P1] == {"ledgerId": 6, "entryId": 0, "batchIndex": 5}
    sizes, delivered, _ = run_batches(r, catalog, counts)
    assert all(s == 20 for s in sizes[:-1]) and sizes[-1] <= 20
    assert delivered == every_message(counts, catalog)


def test_what_a_short_partition_cannot_use_goes_to_the_others(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]), layout(P1, [(6, 10)]))
    counts = {P0: [1] * 10, P1: [10] * 10}
    r = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 60)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert end[P0] == {"ledgerId": 5, "entryId": 9} and end[P1] == {"ledgerId": 6, "entryId": 4}  # 10 + 50


def test_available_now_keeps_the_cap_and_trigger_once_reads_everything(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 4)]))
    counts = {P0: [10] * 4}
    r = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 7)
    r.prepareForTriggerAvailableNow()
    sizes, delivered, _ = run_batches(r, catalog, counts)
    assert sizes == [7] * 5 + [5] and delivered == every_message(counts, catalog)
    once = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 7)
    assert once.latestOffset(once.initialOffset(), ReadAllAvailable())[P0] == {"ledgerId": 5, "entryId": 3}


def test_a_restart_from_a_checkpoint_cut_inside_an_entry_goes_on_from_the_next_message(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    counts = {P0: [10] * 10}
    first = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 7)
    before, delivered_before, checkpoint = run_batches(first, catalog, counts, stop_after=2)
    assert before == [7, 7] and checkpoint[P0] == {"ledgerId": 5, "entryId": 1, "batchIndex": 4}
    restarted = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 7)  # a new planner, as after a restart
    after, delivered_after, _ = run_batches(restarted, catalog, counts, start=checkpoint)
    assert after == [7] * 12 + [2]
    assert delivered_before + delivered_after == every_message(counts, catalog)


def test_a_quota_that_admits_fewer_entries_ends_the_batch_on_an_entry(tmp_path):
    """The cap is applied first, as maxEntriesPerTrigger is; a quota admitting less leaves the batch under it."""
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    counts = {P0: [10] * 10}
    r = cap_reader(tmp_path, catalog, FakeCounts(counts, catalog), 25, FakeClock(PLANNER_START), throttlingMode="batch",
                   dispatchThrottlingRatePerTopicInMsg=1)
    assert r.latestOffset(r.initialOffset(), unlimited())[P0] == {"ledgerId": 5, "entryId": 0}


def test_an_entry_not_answered_in_time_ends_the_batch_before_it_never_past_the_cap(tmp_path):
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    counts = {P0: [3] * 10}
    fake = FakeCounts(counts, catalog, unanswered={(5, 2)})
    r = cap_reader(tmp_path, catalog, fake, 8)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert end[P0] == {"ledgerId": 5, "entryId": 1}  # 6 messages: the third entry's are not known yet
    assert len(set(fake.asked)) <= 9  # entries for 8 messages at one per entry, and one more


def test_the_lookups_are_the_entries_own_headers(tmp_path):
    """Through BacklogSizes and the admin API's entry headers (a FakeAdmin): 10 messages per entry."""
    catalog = FakeCatalog(layout(P0, [(5, 10)]))
    admin = FakeAdmin(counts=[10] * 10)
    clock = FakeClock(PLANNER_START)
    r = cap_reader(tmp_path, catalog, BacklogSizes(admin, clock=clock, waiter=clock.wait), 15, clock)
    end = r.latestOffset(r.initialOffset(), unlimited())
    assert end[P0] == {"ledgerId": 5, "entryId": 1, "batchIndex": 5}
    assert set(admin.lookups) <= {(5, e) for e in range(10)} and len(admin.lookups) <= 16
