"""What counts as data loss, and what the query does about it (`failOnDataLoss`).

Two ways unread entries can vanish: retention or truncation deleted ledgers after the query's
offset, or a topic was deleted while the query read it. Either fails the query (as Spark's Kafka
source does) unless failOnDataLoss=false, which logs one warning per loss and continues.
"""

from __future__ import annotations

import logging

from ..data_loss_error import DataLossError
from ..metadata.catalog import CatalogSnapshot
from ..metadata.layout import PartitionLayout
from ..positions import EntryPosition
from ..topics import TopicName

log = logging.getLogger(__name__)


class DataLossPolicy:
    def __init__(self, subscription: str, durable_subscription: bool, fail_on_data_loss: bool, batch_query: bool = False) -> None:
        self._subscription = subscription
        self._durable = durable_subscription
        self._batch = batch_query  # a batch query's loss is its start, given by the user, not a checkpoint
        self._fail = fail_on_data_loss
        self._warned: set[tuple[str, object]] = set()

    def check_range(self, partition: str, layout: PartitionLayout, start: EntryPosition,
                    end: EntryPosition | None = None, ledger_after: int | None = None) -> None:
        """Unread entries after `start` (up to a planned `end`, for a batch re-run) that are no longer stored.
        `ledger_after`: the ledger that followed `start` when `start` ended a closed ledger (the offset's
        proof): still stored, it holds everything after `start`, so its deleted ledger held nothing unread."""
        lost = layout.lost_range(start)
        if lost is not None and ledger_after is not None and start.ledger_id < ledger_after and layout.holds_ledger(ledger_after):
            return
        if lost is None and end is not None and start < end and not layout.stores(end) and (layout.first is None or end < layout.first):
            # The planned range ends before the oldest stored entry: its entries were deleted.
            lost = (start, layout.first or EntryPosition(end.ledger_id, end.entry_id + 1))
        if lost is None:
            return
        cursor = layout.cursor(self._subscription) if self._durable else None
        if cursor is not None and cursor <= start:
            return  # the broker deletes nothing past a subscription's cursor: only read entries went
        after, before = lost
        message = (f"Data loss in {partition}: the entries after {after} and before {before} are no longer stored "
                   "(retention expired, or the topic was truncated or recreated)."
                   + ("" if self._durable or self._batch else
                      f" Ledger {after.ledger_id} is deleted, so whether it held entries after {after} is unknown;"
                      " durableSubscription=true keeps unread entries and tells the two apart."))
        if self._batch:
            message += (" The batch query's range (options 'startingOffsets' or 'startingTime', and 'endingOffsets' or "
                        "'endingTime') starts before the oldest stored entry.")
        if self._fail:
            raise DataLossError(message + " Set failOnDataLoss=false to continue from the oldest stored entry"
                                + (" (or start at 'earliest')." if self._batch else "."))
        if (partition, after) not in self._warned:
            self._warned.add((partition, after))
            log.warning("%s Continuing from %s because failOnDataLoss=false.", message, before)

    def drop_gone_partitions(self, starts: dict[str, EntryPosition], snap: CatalogSnapshot) -> dict[str, EntryPosition]:
        """Partitions of the checkpoint that no longer exist: fail, or continue without them."""
        gone = [p for p in starts if p not in snap.layouts]
        if not gone:
            return starts
        self.partitions_gone(gone)
        return {p: s for p, s in starts.items() if p in snap.layouts}

    def partitions_gone(self, gone: list[str]) -> None:
        """Partitions that no longer exist (their topic was deleted): fail naming the topics, or warn once."""
        if self._fail:
            # After a deletion nobody can tell whether unread messages went with it, so the
            # safe answer is to stop (as Spark's Kafka source does), naming what vanished.
            topics = sorted({str(TopicName.parse(p).base) for p in gone})
            raise DataLossError(f"Topic(s) {', '.join(topics)} were deleted while the query read them; partitions "
                                f"{', '.join(gone)} can no longer be read and messages not yet read may be lost. "
                                "Set failOnDataLoss=false to continue without them.")
        for p in gone:
            if ("gone", p) not in self._warned:
                self._warned.add(("gone", p))
                log.warning("Partition %s no longer exists; the query continues without it (failOnDataLoss=false).", p)
