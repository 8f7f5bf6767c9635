"""The read task's accounting of a planned range: gaps, their meaning, chunked-message ids."""

from __future__ import annotations

import pulsar
import pytest

from pulsar_throttled_source.metadata.entry_headers import EntryHeaders
from pulsar_throttled_source.protobuf_wire import first_chunk_position, varint
from pulsar_throttled_source.reading.range_entries import RangeAccount, RangeCursor

RUNS = ((7, 3, 3), (9, 0, 2))  # 7:3 7:4 7:5 9:0 9:1


def test_cursor_records_skipped_positions_as_gaps() -> None:
    c = RangeCursor(RUNS)
    c.saw((7, 3))
    c.saw((7, 5))  # 7:4 was not dispatched (a marker, a middle chunk...)
    assert list(c.gaps) == [(7, 4)] and not c.exhausted
    c.saw((9, 1))
    assert list(c.gaps) == [(7, 4), (9, 0)] and c.exhausted and c.seen == 3


def test_cursor_ignores_positions_outside_the_range() -> None:
    c = RangeCursor(RUNS)
    c.saw((7, 1))  # before the range (the reader's inclusive start entry)
    c.saw((7, 3))
    c.saw((8, 0))  # a ledger the plan does not hold: only advances
    assert list(c.gaps) == [(7, 4), (7, 5)] and c.seen == 1
    c.saw((12, 0))  # past the end
    assert c.exhausted and list(c.gaps) == [(7, 4), (7, 5), (9, 0), (9, 1)]


def test_first_chunk_of_a_delivered_message_is_no_gap() -> None:
    c = RangeCursor(RUNS)
    c.saw((7, 5))  # a chunked message: chunks 7:3 .. 7:5
    c.accounted((7, 3))
    assert list(c.gaps) == [(7, 4)] and c.peek() == (9, 0)
    c.skip_next()
    assert c.peek() == (9, 1)


def test_empty_range() -> None:
    c = RangeCursor(())
    assert c.exhausted and c.peek() is None and not c.gaps


def test_entry_metadata_from_broker_headers() -> None:
    first = EntryHeaders.parse({"X-Pulsar-chunk-id": "0", "X-Pulsar-num-chunks-from-msg": "3", "X-Pulsar-uuid": "p1-1-2",
                                "X-Pulsar-txn-uncommitted": "false"})
    assert first.starts_chunked_message and first.uuid == "p1-1-2" and not first.uncommitted
    assert not EntryHeaders.parse({"X-Pulsar-chunk-id": "2", "X-Pulsar-num-chunks-from-msg": "3"}).starts_chunked_message
    assert EntryHeaders.parse({"X-Pulsar-marker-type": "7"}).marker
    assert EntryHeaders.parse({"x-pulsar-txn-aborted": "true"}).aborted
    assert EntryHeaders.parse({"X-Pulsar-txn-uncommitted": "true"}).uncommitted
    plain = EntryHeaders.parse({})
    assert not (plain.starts_chunked_message or plain.marker or plain.aborted or plain.uncommitted)


PLAIN = EntryHeaders()


def chunk(i: int, n: int, uuid: str) -> EntryHeaders:
    return EntryHeaders(chunk_id=i, num_chunks=n, uuid=uuid)


class FakeBroker:
    """Entry metadata by position; positions it does not hold are not stored (deleted)."""

    def __init__(self, entries: dict) -> None:
        self.entries = entries
        self.asked: list = []

    def __call__(self, position):
        self.asked.append(position)
        return self.entries.get(position)


def test_plain_range_read_to_its_end_asks_the_broker_nothing() -> None:
    broker = FakeBroker({})
    account = RangeAccount(((5, 0, 3),), broker)
    for e in range(3):
        account.saw((5, e))
    assert account.settled() and broker.asked == []


def test_a_range_ending_on_transaction_markers_needs_no_wait() -> None:
    # 5:0 committed message, 5:1 aborted message, 5:2 commit marker, 5:3 abort marker
    broker = FakeBroker({(5, 0): PLAIN, (5, 1): EntryHeaders(aborted=True), (5, 2): EntryHeaders(marker=True),
                         (5, 3): EntryHeaders(marker=True)})
    account = RangeAccount(((5, 0, 4),), broker)
    account.saw((5, 0))
    assert not account.cursor.exhausted
    assert account.walk()  # the reader idles: the rest is never dispatched
    assert broker.asked == [(5, 1), (5, 2), (5, 3)] and account.skipped == 3 and not account.missing


def test_idle_reader_waits_for_a_plain_entry_still_coming() -> None:
    broker = FakeBroker({(5, 1): PLAIN})
    account = RangeAccount(((5, 0, 2),), broker)
    account.saw((5, 0))
    assert not account.walk() and not account.walk()  # a slow broker: keep waiting
    account.saw((5, 1))
    assert account.settled()


def test_chunked_message_completing_past_the_end_is_owed_until_it_arrives() -> None:
    # range 7:0..7:2; A = 7:1, 7:3 (first chunk in range, completes after it); 7:2 a plain entry
    broker = FakeBroker({(7, 1): chunk(0, 2, "A"), (7, 3): chunk(1, 2, "A")})
    account = RangeAccount(((7, 0, 3),), broker)
    account.saw((7, 0))
    account.saw((7, 2))  # passes over 7:1
    assert not account.settled() and account.owed == {(7, 1): "A"}
    assert account.owes((7, 1))
    account.saw((7, 3), first_chunk=(7, 1))
    assert account.settled()


def test_orphan_tail_chunks_of_an_earlier_range_are_skipped_but_owed_last_chunks_are_awaited() -> None:
    # range 8:0..8:3: 8:0 tail of X (first chunk before the range), 8:1 first chunk of Y,
    # 8:2 middle of Y, 8:3 last chunk of Y (not dispatched yet)
    broker = FakeBroker({(8, 0): chunk(2, 3, "X"), (8, 1): chunk(0, 3, "Y"), (8, 2): chunk(1, 3, "Y"), (8, 3): chunk(2, 3, "Y")})
    account = RangeAccount(((8, 0, 4),), broker)
    assert not account.walk()  # stops at 8:3: it completes Y, which the range owes
    assert account.owed == {(8, 1): "Y"} and account.cursor.peek() == (8, 3)
    account.saw((8, 3), first_chunk=(8, 1))
    assert account.settled() and account.skipped == 2


def test_interleaved_chunks_of_two_producers() -> None:
    # A: 9:0, 9:2   B: 9:1, 9:3   range 9:0..9:1 owns both; 9:2 and 9:3 come after it
    broker = FakeBroker({(9, 0): chunk(0, 2, "A"), (9, 1): chunk(0, 2, "B"), (9, 2): chunk(1, 2, "A"), (9, 3): chunk(1, 2, "B")})
    account = RangeAccount(((9, 0, 2),), broker)
    account.saw((9, 2), first_chunk=(9, 0))  # A arrives first: 9:1 was passed over
    assert not account.settled() and account.owed == {(9, 1): "B"}
    account.saw((9, 3), first_chunk=(9, 1))
    assert account.settled()


def test_deleted_ledger_is_looked_up_once_and_reported_missing() -> None:
    broker = FakeBroker({(3, 0): PLAIN})
    account = RangeAccount(((2, 0, 3), (3, 0, 1)), broker)
    assert not account.walk()  # ledger 2 is gone; 3:0 is still coming
    assert account.missing == [(2, 0), (2, 1), (2, 2)] and broker.asked == [(2, 0), (3, 0)]


def test_entry_past_the_max_read_position_is_waited_for_then_skipped_if_aborted() -> None:
    entries = {(4, 0): EntryHeaders(uncommitted=True)}
    account = RangeAccount(((4, 0, 1),), FakeBroker(entries))
    assert not account.walk() and account.held_back_at == (4, 0)  # still coming: not an error
    entries[(4, 0)] = EntryHeaders(aborted=True)  # the transaction aborted: never dispatched
    assert account.walk()


@pytest.mark.parametrize("ledger, entry, first", [(3, 3, (3, 1)), (123456789, 70000, (123456788, 5)), (58, 58, (58, 0))])
def test_first_chunk_position_matches_the_client(ledger: int, entry: int, first: tuple[int, int]) -> None:

    inner = b"\x08" + varint(first[0]) + b"\x10" + varint(first[1])
    data = b"\x08" + varint(ledger) + b"\x10" + varint(entry) + b"\x3a" + varint(len(inner)) + inner
    mid = pulsar.MessageId.deserialize(data)  # the client's own parser agrees on the shape...
    assert str(mid) == f"({first[0]},{first[1]},-1,-1);({ledger},{entry},-1,-1)"
    assert mid.serialize() == data  # ...and on the bytes
    assert first_chunk_position(data) == first


@pytest.mark.parametrize("mid", [pulsar.MessageId(0, 58, 58, -1), pulsar.MessageId(3, 7, 9, 4), pulsar.MessageId(-1, 2**40, 2**20, -1)])
def test_first_chunk_position_is_none_for_ordinary_ids(mid) -> None:
    assert first_chunk_position(mid.serialize()) is None
