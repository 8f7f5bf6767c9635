"""Opt-in durable subscription (option durableSubscription): a cursor on the broker that follows
the query's commits, so retention keeps every entry the query has not read yet and its backlog
shows in Pulsar's own tools (`pulsar-admin topics stats`).

Reads still use non-durable readers: the subscription only marks progress. Spark calls
`commit(end)` one micro-batch behind, so the cursor trails the checkpoint by at most one batch,
which is exactly what a restart may read again. Remove the subscription when a query is retired:
`pulsar-admin topics unsubscribe <topic> -s <subscription>` (per partitioned topic).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..positions import BEFORE_EARLIEST, EntryPosition
from ..topics import TopicName
from .admin import PulsarAdmin
from .admin_http import AdminError

log = logging.getLogger(__name__)


class DurableCursor:
    def __init__(self, admin: PulsarAdmin, subscription: str) -> None:
        self._admin = admin
        self.subscription = subscription
        self._created: set[str] = set()
        self._marked: dict[str, EntryPosition] = {}  # what the broker's cursor holds, as last set here

    def ensure(self, positions: Mapping[str, EntryPosition]) -> None:
        """Create the subscription on each partition, consumed up to its position (kept if it exists)."""
        for partition, position in positions.items():
            if partition not in self._created:
                self._admin.create_subscription(TopicName.parse(partition), self.subscription, position)
                self._created.add(partition)

    def follow(self, committed: Mapping[str, EntryPosition]) -> None:
        """Mark every entry up to each committed position consumed. A failure is logged, not raised: the
        cursor is a retention aid, and the next commit moves it again."""
        for partition, position in committed.items():
            if position == BEFORE_EARLIEST or self._marked.get(partition) == position:
                continue
            try:
                self.ensure({partition: position})
                self._admin.mark_consumed(TopicName.parse(partition), self.subscription, position)
                self._marked[partition] = position
            except AdminError as e:
                log.warning("Could not move subscription %s of %s to %s: %s; retrying at the next commit",
                            self.subscription, partition, position, e)
