"""Issue 32: a micro-batch planned before its topic was deleted gets its tasks after the deletion.
A planned partition the catalog no longer holds, or whose planned entries are no longer stored (an
empty partition a reader's reconnect re-created), is data loss decided on the driver (failOnDataLoss)
and gets no task: a task without its entry list has nothing to tell a deleted topic from a slow one,
and waited pollTimeoutMs (120 s) for entries that never come."""

from __future__ import annotations

import logging

import pytest
from builders import P0, P1, TOPIC, layout, positions, reader, unlimited
from fakes import FakeCatalog

from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.reading.read_errors import DataLossError


def recreated(partition: str, ledger: int) -> PartitionLayout:
    """What internalStats shows of a partition re-created by topic auto-creation: one empty open ledger."""
    stats = {"ledgers": [{"ledgerId": ledger, "entries": 0, "size": 0}], "currentLedgerEntries": 0,
             "currentLedgerSize": 0, "lastConfirmedEntry": f"{ledger}:-1", "entriesAddedCounter": 0}
    return PartitionLayout.from_internal_stats(partition, stats)


def planned(tmp_path, fail: str):
    catalog = FakeCatalog(layout(P0, [(5, 10)]), layout(P1, [(6, 4)]))
    r = reader(tmp_path, catalog, failOnDataLoss=fail)
    start = r.initialOffset()
    return catalog, r, start, r.latestOffset(start, unlimited())


@pytest.mark.parametrize("after", ["gone", "recreated"])
def test_a_partition_deleted_between_plan_and_tasks_fails_the_query_naming_its_topic(tmp_path, after):
    catalog, r, start, end = planned(tmp_path, "true")
    catalog.set(layout(P0, [(5, 10)]), *([recreated(P1, 9)] if after == "recreated" else []))
    with pytest.raises(DataLossError, match=rf"{TOPIC}.*{P1}|{P1}.*6:-1") as e:
        r.partitions(start, end)
    assert "failOnDataLoss=false" in str(e.value)


@pytest.mark.parametrize("after", ["gone", "recreated"])
def test_a_partition_deleted_between_plan_and_tasks_gets_no_task_with_fail_on_data_loss_false(tmp_path, caplog, after):
    catalog, r, start, end = planned(tmp_path, "false")
    assert positions(end) == {P0: (5, 9), P1: (6, 3)}
    catalog.set(layout(P0, [(5, 10)]), *([recreated(P1, 9)] if after == "recreated" else []))
    with caplog.at_level(logging.WARNING):
        tasks = r.partitions(start, end)
    assert [(t.partition, t.entries, t.runs) for t in tasks] == [(P0, 10, ((5, 0, 10),))]
    assert any(P1 in rec.getMessage() and "failOnDataLoss=false" in rec.getMessage() for rec in caplog.records)
