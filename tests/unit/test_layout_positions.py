"""Offset arithmetic: positions, JSON offsets, ledger layouts and backlogs."""

from __future__ import annotations

import json

import pytest

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.planning.admission import split_proportionally
from pulsar_throttled_source.positions import BEFORE_EARLIEST, EntryPosition
from pulsar_throttled_source.topics import TopicName, partition_sort_key


def stats(ledgers, current=(0, 0), lce="-1:-1", added=0):
    return {"ledgers": [{"ledgerId": l, "entries": e, "size": s} for l, e, s in ledgers],
            "currentLedgerEntries": current[0], "currentLedgerSize": current[1], "lastConfirmedEntry": lce,
            "entriesAddedCounter": added}


LAYOUT = PartitionLayout.from_internal_stats(
    "p", stats([(3, 5, 500), (6, 0, 0), (7, 5, 50), (9, 0, 0)], current=(2, 40), lce="9:1", added=12))


def test_layout_uses_current_ledger_counts_and_skips_empty_ledgers():
    assert [(l.ledger_id, l.entries, l.size) for l in LAYOUT.ledgers] == [(3, 5, 500), (7, 5, 50), (9, 2, 40)]
    assert LAYOUT.first == EntryPosition(3, 0)
    assert LAYOUT.latest == EntryPosition(9, 1)
    assert LAYOUT.total_entries == 12


def test_a_refresh_reuses_the_layout_of_a_partition_that_did_not_move_and_rebuilds_one_that_did():
    base = stats([(3, 5, 500), (9, 0, 0)], current=(2, 40), lce="9:1", added=7)
    first = PartitionLayout.from_internal_stats("p", base)
    assert PartitionLayout.from_internal_stats("p", json.loads(json.dumps(base)), first) is first  # same stats: reused
    written = stats([(3, 5, 500), (9, 0, 0)], current=(3, 60), lce="9:2", added=8)
    trimmed = stats([(9, 0, 0)], current=(2, 40), lce="9:1", added=7)  # retention dropped ledger 3, nothing written
    acked = dict(base, cursors={"sub": {"markDeletePosition": "9:0"}})
    for moved in (written, trimmed, acked):
        layout = PartitionLayout.from_internal_stats("p", moved, first)
        assert layout is not first and layout == PartitionLayout.from_internal_stats("p", moved)
    assert PartitionLayout.from_internal_stats("q", base, first).partition == "q"


def test_rolled_over_empty_current_ledger_keeps_latest_on_a_real_entry():
    layout = PartitionLayout.from_internal_stats("p", stats([(3, 5, 500), (8, 0, 0)], lce="8:-1"))
    assert layout.latest == EntryPosition(3, 4)


def test_backlog_counts_entries_and_bytes_across_ledgers():
    b = LAYOUT.backlog_after(EntryPosition(3, 2))
    assert b.entries == 2 + 5 + 2
    assert b.bytes_for(2) == 200  # ledger 3 averages 100 bytes per entry
    assert b.bytes_for(3) == 210  # then 10 per entry in ledger 7
    assert b.bytes_for(9) == pytest.approx(200 + 50 + 40)
    assert b.position_after(EntryPosition(3, 2), 1) == EntryPosition(3, 3)
    assert b.position_after(EntryPosition(3, 2), 2) == EntryPosition(3, 4)
    assert b.position_after(EntryPosition(3, 2), 3) == EntryPosition(7, 0)
    assert b.position_after(EntryPosition(3, 2), 99) == EntryPosition(9, 1)
    # the walk planning uses over consecutive entries agrees with position_after and bytes_for, entry by entry
    walked = b.entries_between(0, 99)
    assert [(l, e) for l, e, _ in walked] == [(p.ledger_id, p.entry_id) for p in (b.position_after(EntryPosition(3, 2), k + 1) for k in range(9))]
    assert [avg for _, _, avg in walked] == [pytest.approx(b.bytes_for(k + 1) - b.bytes_for(k)) for k in range(9)]
    assert b.entries_between(3, 5) == walked[3:5] and b.entries_between(5, 5) == []
    assert [b.index_of((l, e)) for l, e, _ in walked] == list(range(9))
    assert b.index_of((3, 1)) is None and b.index_of((9, 2)) is None and b.index_of((8, 0)) is None


def test_backlog_from_beginning_until_bound_and_empty():
    assert LAYOUT.backlog_after(BEFORE_EARLIEST).entries == 12
    assert LAYOUT.backlog_after(BEFORE_EARLIEST, until=EntryPosition(7, 0)).entries == 6
    assert LAYOUT.backlog_after(EntryPosition(9, 1)).entries == 0
    start = EntryPosition(7, -1)  # "before entry 0 of ledger 7": a user position 7:0 minus one
    assert LAYOUT.backlog_after(start).entries == 7
    assert LAYOUT.backlog_after(EntryPosition(7, 2), until=EntryPosition(7, 2)).entries == 0


def test_lost_range_only_when_start_is_older_than_the_oldest_stored_ledger():
    assert LAYOUT.lost_range(BEFORE_EARLIEST) is None
    assert LAYOUT.lost_range(EntryPosition(3, 4)) is None
    assert LAYOUT.lost_range(EntryPosition(1, 7)) == (EntryPosition(1, 7), EntryPosition(3, 0))


def test_topic_names():
    t = TopicName.parse("orders")
    assert str(t) == "persistent://public/default/orders"
    assert str(TopicName.parse("a/b/c")) == "persistent://a/b/c"
    assert t.partition(3).partition_index == 3 and t.partition(3).base == t
    assert t.partition_index == -1
    assert partition_sort_key(str(t.partition(10))) > partition_sort_key(str(t.partition(9)))
    with pytest.raises(ValueError, match="non-persistent"):
        TopicName.parse("non-persistent://public/default/x")
    with pytest.raises(ValueError, match="invalid topic name"):
        TopicName.parse("a/b")


def test_split_proportionally_caps_total_in_proportion():
    assert split_proportionally({"a": 30, "b": 10}, 20) == {"a": 15, "b": 5}
    shares = split_proportionally({"a": 1, "b": 1, "c": 1}, 2)
    assert sum(shares.values()) == 2 and max(shares.values()) == 1
    assert split_proportionally({"a": 5}, 0) == {"a": 0}


def _after_trim(cursor: str | None) -> PartitionLayout:
    """Ledger 89 (read to its end, 89:19) was deleted by retention; ledger 90 holds 5 entries."""
    stats = {"ledgers": [{"ledgerId": 90, "entries": 0, "size": 0}], "currentLedgerEntries": 5, "currentLedgerSize": 500,
             "lastConfirmedEntry": "90:4", "entriesAddedCounter": 5}
    if cursor is not None:
        stats["cursors"] = {"ingest": {"markDeletePosition": cursor, "readPosition": "90:0"}, "other": {"markDeletePosition": "90:2"}}
    return PartitionLayout.from_internal_stats("persistent://public/default/t", stats)


@pytest.mark.parametrize("cursor, lost", [(None, True), ("89:19", False), ("89:25", True)])
def test_deleted_ledger_is_loss_unless_the_durable_cursor_had_passed_it(cursor, lost):
    from pulsar_throttled_source.planning.data_loss import DataLossPolicy
    from pulsar_throttled_source.reading.read_errors import DataLossError

    policy = DataLossPolicy("ingest", durable_subscription=cursor is not None, fail_on_data_loss=True)
    layout = _after_trim(cursor)
    assert layout.cursor("ingest") == (EntryPosition.parse(cursor, "test") if cursor else None)
    if lost:  # no cursor: ledger 89's size is unknown; cursor past the start: TTL or someone moved it
        with pytest.raises(DataLossError, match="entries after 89:19 and before 90:0"):
            policy.check_range(layout.partition, layout, EntryPosition(89, 19))
    else:
        policy.check_range(layout.partition, layout, EntryPosition(89, 19))
