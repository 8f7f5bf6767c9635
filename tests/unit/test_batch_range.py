"""A batch query's start checked against its end once, after both are resolved: message by message where both
options give the partition a position and either names a message inside an entry, else entry by entry."""

from __future__ import annotations

import json

import pytest
from builders import URLS

from pulsar_throttled_source.offsets import SourceOffset
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planning.batch_range import check_start_before_end
from pulsar_throttled_source.positions import EntryPosition

P0 = "persistent://public/default/orders-partition-0"


def options(start: dict | None = None, end: dict | None = None, **more: str):
    raw = {**URLS, "topic": "orders", **more}
    if start is not None:
        raw["startingOffsets"] = json.dumps({"orders-partition-0": start})
    if end is not None:
        raw["endingOffsets"] = json.dumps({"orders-partition-0": end})
    return parse_options({k.lower(): v for k, v in raw.items()})


def resolved(start: tuple[int, int], end: tuple[int, int]) -> tuple[SourceOffset, SourceOffset]:
    """Offsets as resolve_start and resolve_end give them: the entry before the first read, the last entry read."""
    return SourceOffset({P0: EntryPosition(*start)}), SourceOffset({P0: EntryPosition(*end)})


def test_messages_inside_one_entry_are_compared_by_batch_index():
    o = options({"ledgerId": 5, "entryId": 3, "batchIndex": 5}, {"ledgerId": 5, "entryId": 3, "batchIndex": 2})
    with pytest.raises(ValueError, match=r"start \(5:3:5\) is after the end \(5:3:2\): options 'startingOffsets' and "
                                         r"'endingOffsets'.*ledger:entry:batchIndex"):
        check_start_before_end(o, *resolved((5, 2), (5, 3)))  # entry by entry, the start (5:2) is before the end
    o = options({"ledgerId": 5, "entryId": 3, "batchIndex": 2}, {"ledgerId": 5, "entryId": 3, "batchIndex": 5})
    check_start_before_end(o, *resolved((5, 2), (5, 3)))  # messages 2 to 4 of entry 5:3


def test_entry_positions_are_compared_as_resolved_naming_the_options_that_set_them():
    o = options({"ledgerId": 5, "entryId": 7}, {"ledgerId": 5, "entryId": 4})
    with pytest.raises(ValueError, match=r"start \(5:7\) is after the end \(5:4\): options 'startingOffsets' and 'endingOffsets'"):
        check_start_before_end(o, *resolved((5, 6), (5, 3)))
    check_start_before_end(options({"ledgerId": 5, "entryId": 4}, {"ledgerId": 5, "entryId": 4}), *resolved((5, 3), (5, 3)))
    timed = options(startingTime="2000", endingTime="1000")
    with pytest.raises(ValueError, match=r"start \(5:7\) is after the end \(5:4\): options 'startingTime' and 'endingTime'"):
        check_start_before_end(timed, *resolved((5, 6), (5, 3)))


def test_a_message_start_against_latest_is_compared_by_entry():
    """As before the check was one: with no end position there is no message to compare with."""
    o = options({"ledgerId": 5, "entryId": 4, "batchIndex": 1})
    check_start_before_end(o, *resolved((5, 3), (5, 3)))  # latest is entry 5:3; the start's entry 5:4 is not there yet
