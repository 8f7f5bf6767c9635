"""The source's offset (SourceOffset): the JSON that checkpoints already hold parses and is written back
byte for byte, round trips, and a malformed offset is an error that says what to do."""

from __future__ import annotations

import json

import pytest

from pulsar_throttled_source.offsets import CHECKPOINT_HINT, SourceOffset, new_query_id, positions_from_json, positions_to_json
from pulsar_throttled_source.positions import BEFORE_EARLIEST, EntryPosition

P = "persistent://public/default/orders-partition-"
QID = "0123456789abcdef0123456789abcdef"

# Offsets as a query's checkpoint holds them (<checkpointLocation>/offsets), written by the version before
# SourceOffset (Spark stores json.dumps of what latestOffset returned): the first batch's end offset ...
FIRST_BATCH_END = (
    '{"persistent://public/default/orders-partition-0": {"ledgerId": 4, "entryId": 3}, '
    '"persistent://public/default/orders-partition-2": {"ledgerId": 5, "entryId": 9}, '
    '"persistent://public/default/orders-partition-10": {"ledgerId": 7, "entryId": -1}, '
    '"queryId": "0123456789abcdef0123456789abcdef", '
    '"ledgerEnds": {"persistent://public/default/orders-partition-2": 9}, '
    '"queryStart": {"persistent://public/default/orders-partition-0": {"ledgerId": -1, "entryId": -1}, '
    '"persistent://public/default/orders-partition-2": {"ledgerId": 5, "entryId": -1}}}')
# ... a later one, and an initial offset (or one from before query identities).
LATER_END = ('{"persistent://public/default/orders-partition-0": {"ledgerId": 4, "entryId": 3}, '
             '"queryId": "0123456789abcdef0123456789abcdef"}')
INITIAL = '{"persistent://public/default/orders-partition-0": {"ledgerId": 4, "entryId": -1}}'


def test_an_offset_in_the_checkpointed_format_parses_into_its_parts():
    offset = SourceOffset.from_json(json.loads(FIRST_BATCH_END), "checkpointed offset")
    assert offset.positions == {P + "0": EntryPosition(4, 3), P + "2": EntryPosition(5, 9), P + "10": EntryPosition(7, -1)}
    assert offset.query_id == QID
    assert offset.ledger_ends == {P + "2": 9}
    assert offset.query_start == {P + "0": BEFORE_EARLIEST, P + "2": EntryPosition(5, -1)}
    later = SourceOffset.from_json(json.loads(LATER_END), "checkpointed offset")
    assert (later.query_id, later.ledger_ends, later.query_start) == (QID, {}, None)
    initial = SourceOffset.from_json(json.loads(INITIAL), "checkpointed offset")
    assert initial == SourceOffset({P + "0": EntryPosition(4, -1)})


@pytest.mark.parametrize("checkpointed", [FIRST_BATCH_END, LATER_END, INITIAL])
def test_an_offset_is_written_back_byte_for_byte_as_the_checkpoint_holds_it(checkpointed):
    # Spark compares offsets as JSON strings: a re-ordered key would be a new batch.
    assert json.dumps(SourceOffset.from_json(json.loads(checkpointed), "checkpointed offset").to_json()) == checkpointed


def test_partitions_and_ledger_ends_are_written_in_partition_order_whatever_the_order_given():
    offset = SourceOffset({P + "10": EntryPosition(7, -1), P + "0": EntryPosition(4, 3), P + "2": EntryPosition(5, 9)},
                          QID, {P + "2": 9}, {P + "2": EntryPosition(5, -1), P + "0": BEFORE_EARLIEST})
    assert json.dumps(offset.to_json()) == FIRST_BATCH_END


@pytest.mark.parametrize("offset", [
    SourceOffset({}),
    SourceOffset({P + "1": EntryPosition(3, 4)}),
    SourceOffset({P + "1": EntryPosition(3, 4)}, new_query_id()),
    SourceOffset({P + "1": EntryPosition(3, 4), P + "0": BEFORE_EARLIEST}, new_query_id(), {P + "1": 5}),
    SourceOffset({P + "1": EntryPosition(3, 4)}, new_query_id(), query_start={}),  # a first batch from no partitions
    SourceOffset({P + "1": EntryPosition(3, 4)}, new_query_id(), query_start={P + "1": EntryPosition(2, -1)}),
])
def test_round_trip_through_json(offset):
    assert SourceOffset.from_json(json.loads(json.dumps(offset.to_json())), "x") == offset


def test_positions_json_has_fixed_partition_order_and_round_trips():
    positions = {f"persistent://public/default/t-partition-{i}": EntryPosition(i, i) for i in (10, 2, 1)}
    as_json = positions_to_json(positions)
    assert list(as_json) == [f"persistent://public/default/t-partition-{i}" for i in (1, 2, 10)]
    assert positions_from_json(json.loads(json.dumps(as_json))) == positions


@pytest.mark.parametrize("bad", [[1, 2], {"p": {"ledgerId": "1", "entryId": 2}}, {"p": {"ledgerId": 1}}, {"p": 5},
                                 {"p": {"ledgerId": -7, "entryId": 0}}])
def test_corrupted_positions_give_a_clear_error(bad):
    with pytest.raises(ValueError, match="checkpointed offset"):
        positions_from_json(bad)


@pytest.mark.parametrize(("bad", "message"), [
    ([1, 2], "expected a JSON object"),
    ({P + "0": {"ledgerId": 1}}, "for partition .*orders-partition-0: expected an object"),
    ({P + "0": {"ledgerId": 1, "entryId": -2}}, "ledgerId and entryId must be integers >= -1"),
    ({"orders": {"ledgerId": 1, "entryId": 2}}, "'orders' is not a partition name"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "queryId": "x"}, "queryId must be 32 lowercase hex digits, got 'x'"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "queryId": QID.upper()}, "queryId must be 32 lowercase hex digits"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "ledgerEnds": {P + "0": -1}}, "ledgerEnds must map partitions to ledger ids"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "ledgerEnds": {P + "0": True}}, "ledgerEnds must map partitions"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "ledgerEnds": [9]}, "ledgerEnds must map partitions"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "queryStart": {P + "0": {"ledgerId": "x"}}}, r"start offset \(queryStart\)"),
    ({P + "0": {"ledgerId": 1, "entryId": 2}, "queryStart": 3}, r"start offset \(queryStart\): expected a JSON object"),
])
def test_a_malformed_offset_is_an_error_naming_where_and_what_to_do(bad, message):
    with pytest.raises(ValueError, match=message) as raised:
        SourceOffset.from_json(bad, "start offset")
    assert str(raised.value).startswith("start offset") and str(raised.value).endswith(CHECKPOINT_HINT)
