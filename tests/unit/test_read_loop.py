"""The executor's read loop on a fake reader (what the Pulsar client would deliver) and fake entry
lookups (what the admin API says of entries the reader never delivered): exactly the planned
range, no waiting for entries that will never come, clear errors for those that are gone."""

from __future__ import annotations

import dataclasses
import time

import pulsar
import pyarrow as pa
import pytest
from fakes import FakeMessage, FakeReader, StandInId

from pulsar_throttled_source.metadata.entry_headers import EntryHeaders
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.read_task import ClientConfig, PartitionRange
from pulsar_throttled_source.reading.python_read import read_python_messages as _read_messages
from pulsar_throttled_source.reading.read_errors import DataLossError, ReadTimeout

P = "persistent://public/default/t-partition-0"


def task(start: tuple[int, int], end: tuple[int, int], runs, poll_ms: int = 3_000, **config) -> PartitionRange:
    cfg = ClientConfig("pulsar://x:6650", (), (), None, poll_ms, 10_000, **config)
    entries = sum(r[2] for r in runs) if runs is not None else -1
    return PartitionRange(P, 0, EntryPosition(*start), EntryPosition(*end), entries, cfg, runs)


def plain(position):  # every entry is an ordinary stored message
    return EntryHeaders()


def values(part: PartitionRange, reader: FakeReader, lookup=plain) -> list[bytes]:
    return [row["value"] for batch in _read_messages(reader, part, lookup) for row in batch.to_pylist()]


def test_exactly_the_planned_entries_without_the_exclusive_start_or_the_next_batch():
    # The broker delivers the start entry itself (exclusive by our check) and keeps going past the end.
    reader = FakeReader([FakeMessage.at(5, e) for e in range(2, 9)])
    got = values(task((5, 2), (5, 5), ((5, 3, 3),)), reader)
    assert got == [b"5:3:-1", b"5:4:-1", b"5:5:-1"]
    # Stopped at the end entry: the next batch's entries were never taken from the reader.
    assert [m.data() for m in reader.queue] == [b"5:6:-1", b"5:7:-1", b"5:8:-1"]


def test_every_message_of_a_batched_end_entry_is_read():
    msgs = [FakeMessage.at(5, 0, i) for i in range(3)] + [FakeMessage.at(5, 1, i) for i in range(4)] + [FakeMessage.at(5, 2, 0)]
    got = values(task((5, -1), (5, 1), ((5, 0, 2),)), FakeReader(msgs))
    assert len(got) == 7 and got[-1] == b"5:1:3"


def test_a_range_ending_on_a_transaction_marker_ends_without_waiting():
    # Entry 5:3 is a commit marker: the broker never dispatches it as a message.
    lookups = {(5, 3): EntryHeaders(marker=True)}
    started = time.monotonic()
    got = values(task((5, -1), (5, 3), ((5, 0, 4),), poll_ms=60_000), FakeReader([FakeMessage.at(5, e) for e in range(3)]),
                 lambda pos: lookups.get(pos, EntryHeaders()))
    assert got == [b"5:0:-1", b"5:1:-1", b"5:2:-1"]
    assert time.monotonic() - started < 5  # one idle check, not pollTimeoutMs


def test_aborted_entries_in_the_middle_are_skipped_and_the_rest_delivered():
    lookups = {(5, 1): EntryHeaders(aborted=True), (5, 2): EntryHeaders(aborted=True)}
    msgs = [FakeMessage.at(5, 0), FakeMessage.at(5, 3)]  # the broker filters aborted entries out
    got = values(task((5, -1), (5, 3), ((5, 0, 4),)), FakeReader(msgs), lambda pos: lookups.get(pos, EntryHeaders()))
    assert got == [b"5:0:-1", b"5:3:-1"]


def test_a_planned_entry_that_is_no_longer_stored_is_data_loss_at_once():
    started = time.monotonic()
    with pytest.raises(DataLossError, match=r"5:2.*failOnDataLoss=false"):
        values(task((5, -1), (5, 3), ((5, 0, 4),), poll_ms=60_000), FakeReader([FakeMessage.at(5, 0), FakeMessage.at(5, 1)]),
               lambda pos: None if pos >= (5, 2) else EntryHeaders())
    assert time.monotonic() - started < 5


def test_a_stored_entry_that_never_arrives_times_out_naming_the_option():
    with pytest.raises(ReadTimeout, match=r"pollTimeoutMs=600"):
        values(task((5, -1), (5, 3), ((5, 0, 4),), poll_ms=600), FakeReader([FakeMessage.at(5, 0)]))


def test_every_message_of_the_last_batched_entry_is_read_when_the_range_ends_before_the_next_ledger():
    # Planning checkpoints a range that ends a closed ledger as "before ledger 8" (8, -1).
    msgs = [FakeMessage.at(5, 0, i) for i in range(3)] + [FakeMessage.at(5, 1, i) for i in range(4)] + [FakeMessage.at(8, 0, 0)]
    got = values(task((5, -1), (8, -1), ((5, 0, 2),)), FakeReader(msgs))
    assert len(got) == 7 and got[-1] == b"5:1:3"


def test_without_an_entry_list_a_range_ending_before_a_ledger_stops_at_that_ledger():
    msgs = [FakeMessage.at(5, 0, i) for i in range(3)] + [FakeMessage.at(8, 0, 0), FakeMessage.at(8, 1, 0)]
    got = values(task((5, -1), (8, -1), None), FakeReader(msgs))
    assert got == [b"5:0:0", b"5:0:1", b"5:0:2"]


class MovingTopicReader(FakeReader):
    """While the topic's ownership moves, the broker answers the reader's "anything left?" question
    with an error until the reader has reconnected (what an unloaded topic's broker does)."""

    def __init__(self, messages: list[FakeMessage], failures: list[Exception]) -> None:
        super().__init__(messages)
        self.failures = failures
        self.asked = 0

    def has_message_available(self) -> bool:
        self.asked += 1
        if self.failures:
            raise self.failures.pop(0)
        return super().has_message_available()


def test_a_batched_end_entry_is_read_whole_while_the_topic_moves_to_another_broker():
    msgs = [FakeMessage.at(5, 0, i) for i in range(3)] + [FakeMessage.at(5, 1, i) for i in range(4)] + [FakeMessage.at(5, 2, 0)]
    reader = MovingTopicReader(msgs, [pulsar.BrokerMetadataError("Consumer not found"), pulsar.NotConnected("x")])
    got = values(task((5, -1), (5, 1), ((5, 0, 2),)), reader)
    assert got == [f"5:{e}:{i}".encode() for e, n in ((0, 3), (1, 4)) for i in range(n)]
    assert reader.asked >= 3


def test_messages_a_reconnected_reader_gives_again_are_delivered_once():
    """Issue 52, seen on a cluster whose bundles moved to the other broker again and again: after a reconnect the
    client may give again messages it gave before (one message of a batch came twice). The reader's position only
    moves forward: what comes again, a batch's tail, a whole batched entry, an unbatched entry, is dropped."""
    again = [FakeMessage.at(5, 0, i) for i in (0, 1, 2)] + [FakeMessage.at(5, 0, i) for i in (1, 2, 3)]  # mid-entry
    again += [FakeMessage.at(5, 1, i) for i in range(4)] * 2  # a whole batched entry twice
    again += [FakeMessage.at(5, 2), FakeMessage.at(5, 0, 3), FakeMessage.at(5, 2), FakeMessage.at(5, 3)]  # older ones
    again += [FakeMessage.at(5, 4)]  # the next range's
    got = values(task((5, -1), (5, 3), ((5, 0, 4),)), FakeReader(again))
    assert got == [f"5:{e}:{i}".encode() for e, n in ((0, 4), (1, 4)) for i in range(n)] + [b"5:2:-1", b"5:3:-1"]


def test_a_reader_whose_broker_never_answers_fails_naming_the_option():
    failures: list[Exception] = [pulsar.BrokerMetadataError("Consumer not found") for _ in range(20)]
    reader = MovingTopicReader([FakeMessage.at(5, 0, i) for i in range(3)], failures)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"t-partition-0: the broker at pulsar://x:6650 did not say whether messages are "
                                           r"left \(BrokerMetadataError.*pollTimeoutMs=1200 ms"):
        values(task((5, -1), (5, 0), ((5, 0, 1),), poll_ms=1_200), reader)
    assert 1.2 <= time.monotonic() - started < 4


def test_a_reader_error_a_retry_cannot_fix_fails_at_once():
    reader = MovingTopicReader([FakeMessage.at(5, 0, i) for i in range(3)], [pulsar.AuthorizationError("not allowed")])
    with pytest.raises(pulsar.AuthorizationError):
        values(task((5, -1), (5, 0), ((5, 0, 1),), poll_ms=60_000), reader)
    assert reader.asked == 1


@pytest.mark.parametrize("runs", [((5, 1, 3),), None], ids=["planned", "unplanned"])
def test_a_range_starting_and_ending_inside_batched_entries_reads_exactly_its_messages(runs):
    # Entries 5:1..5:3 of 4 messages each; the range is 5:1:2 (inclusive) .. 5:3:1 (exclusive).
    msgs = [FakeMessage.at(5, e, i) for e in range(0, 5) for i in range(4)]
    part = task((5, 0), (5, 3), runs).inside_entries((5, 1, 2), (5, 3, 1))
    assert values(part, FakeReader(msgs)) == [b"5:1:2", b"5:1:3", *(f"5:2:{i}".encode() for i in range(4)), b"5:3:0"]


def test_a_range_inside_one_entry_and_an_unbatched_bound_entry():
    msgs = [FakeMessage.at(5, 0, i) for i in range(6)] + [FakeMessage.at(5, 1)]
    assert values(task((5, -1), (5, 0), ((5, 0, 1),)).inside_entries((5, 0, 1), (5, 0, 4)), FakeReader(msgs)) == \
        [b"5:0:1", b"5:0:2", b"5:0:3"]
    # A message that is not batched is index 0: a start past it skips it, an end past it reads it.
    single = [FakeMessage.at(5, e) for e in range(4)]
    assert values(task((5, -1), (5, 2), ((5, 0, 3),)).inside_entries((5, 0, 1), (5, 2, 1)), FakeReader(single)) == \
        [b"5:1:-1", b"5:2:-1"]


def sized_entry(ledger: int, entry: int, size: int) -> list[FakeMessage]:
    return [FakeMessage(StandInId.sized(ledger, entry, i, size), value=f"{ledger}:{entry}:{i}".encode()) for i in range(size)]


@pytest.mark.parametrize("limit", [1, 3, 5, 100])
@pytest.mark.parametrize("runs", [((5, 1, 3),), None], ids=["planned", "unplanned"])
def test_entries_whose_ids_say_their_size_are_read_exactly_in_batches_of_any_size(runs, limit):
    # An entry's messages come in one group (or as many as fit the batch); a bounded first entry's rows
    # before its start and the end entry's after its end are dropped, without asking the broker anything.
    msgs = [m for e in range(5) for m in sized_entry(5, e, 4)]
    part = task((5, 0), (5, 3), runs).inside_entries((5, 1, 2), (5, 3, 1))
    part = dataclasses.replace(part, config=dataclasses.replace(part.config, max_rows_per_batch=limit))
    reader = FakeReader(msgs)
    reader.has_message_available = lambda: pytest.fail("asked the broker")  # type: ignore[method-assign]
    batches = list(_read_messages(reader, part, plain))
    assert [row["value"] for b in batches for row in b.to_pylist()] == \
        [b"5:1:2", b"5:1:3", *(f"5:2:{i}".encode() for i in range(4)), b"5:3:0"]
    assert all(0 < b.num_rows <= limit for b in batches)
    assert [row["messageId"] for b in batches for row in b.to_pylist()][-1] == StandInId.sized(5, 3, 0, 4).serialize()
    assert len(reader.queue) == 4  # the end entry was read to its end, the next one never taken


def test_a_message_after_a_short_batch_starts_the_next_entry():
    # An entry whose id says 4 messages but delivers 2 (the rest never comes): the next entry's first
    # message ends it and is read as the next entry's.
    msgs = sized_entry(5, 0, 4)[:2] + sized_entry(5, 1, 2) + [FakeMessage.at(5, 2)]
    assert values(task((5, -1), (5, 1), ((5, 0, 2),)), FakeReader(msgs)) == [b"5:0:0", b"5:0:1", b"5:1:0", b"5:1:1"]


def test_a_batch_whose_payloads_pyarrow_chunks_is_delivered_a_batch_per_chunk(monkeypatch):
    # Past 2 GiB of payloads (Arrow's 32-bit offsets) pa.array returns a ChunkedArray: the batch is then cut where
    # pyarrow cut the payloads, the bounded first entry's dropped rows still left out. Chunked here after 5 rows.
    from pulsar_throttled_source.reading.arrow_rows import Columns

    whole = Columns.value_array
    monkeypatch.setattr(Columns, "value_array", lambda self: (lambda a: pa.chunked_array([a.slice(0, 5), a.slice(5)]))(whole(self)))
    msgs = [m for e in range(5) for m in sized_entry(5, e, 4)]
    part = task((5, 0), (5, 3), ((5, 1, 3),)).inside_entries((5, 1, 2), (5, 3, 1))
    batches = list(_read_messages(FakeReader(msgs), part, plain))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert [[row["value"] for row in b.to_pylist()] for b in batches] == \
        [[b"5:1:2", b"5:1:3", b"5:2:0"], [b"5:2:1", b"5:2:2", b"5:2:3", b"5:3:0"]]
