"""A read task's entry lookups, on the executor (the planner's are metadata.lookup_scheduler): entry
metadata from the admin API, for the few entries a reader does not see as messages (chunks,
transaction markers, aborted or deleted entries; on a plain topic: none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..metadata.admin_http import AdminError, TopicNotFound
from ..metadata.entry_headers import EntryHeaders
from ..positions import Position
from ..read_task import PartitionRange
from ..topics import TopicName

if TYPE_CHECKING:
    from ..metadata.admin import PulsarAdmin


class TaskLookup:
    """A read task's lookups: `lookup(position) -> EntryHeaders | None` (None: no longer stored) for one read task's
    partition, answers cached. One admin session per read task, opened on first use."""

    def __init__(self, part: PartitionRange) -> None:
        self._part = part
        self._admin: PulsarAdmin | None = None
        self._quick: PulsarAdmin | None = None  # range_gone's: one short attempt, never the retries of a lookup
        self._cache: dict[Position, EntryHeaders | None] = {}

    def __call__(self, position: Position) -> EntryHeaders | None:
        if position not in self._cache:
            from .watch import unless_gone

            api, topic = self._api(), self._topic()
            # The admin API rides through broker restarts for pollTimeoutMs; a deleted topic must not wait that long.
            gone = self.range_gone if self._part.runs else None
            headers = unless_gone(lambda: api.entry_headers(topic, *position), gone)()
            self._cache[position] = None if headers is None else EntryHeaders.parse(headers)
        return self._cache[position]

    def close(self) -> None:
        for admin in (self._admin, self._quick):
            if admin is not None:
                admin.close()

    def partition_gone(self) -> bool:
        """Whether the partition was deleted after planning: the broker does not hold the topic, or (a
        partition a reader's reconnect re-created empty: broker topic auto-creation) the partitioned
        topic it belonged to is gone. Metadata only: asking for an entry would cost a bookie read per
        task, a tenth of what a throttled query at 10 entries a window reads (bench/bookie_reads.py)."""
        assert self._part.runs
        topic, api = self._topic(), self._api()
        try:
            stats = api.internal_stats(topic)
        except TopicNotFound:
            return True
        if topic.partition_index < 0:
            return False
        # A partition that still holds the range's first planned ledger is the one planned on (one re-created by
        # topic auto-creation starts a new ledger), and Pulsar deletes a partitioned topic's partitions before its
        # metadata: then asking for the metadata too would only add a request to every task (issue 44).
        planned = self._part.runs[0][0]
        if any(int(ledger.get("ledgerId", -1)) == planned for ledger in stats.get("ledgers") or ()):
            return False
        return _partitioned_topic_gone(api, topic)

    def range_gone(self) -> bool:
        """Whether every planned entry is gone: the range's last planned entry is no longer stored
        (asked afresh). Ledgers are deleted oldest first, so nothing before it is stored either:
        the topic was deleted, or retention trimmed past the whole range."""
        assert self._part.runs
        ledger, first, count = self._part.runs[-1]
        if self._quick is None:
            from ..metadata.admin import PulsarAdmin

            self._quick = PulsarAdmin.for_quick_checks(self._part.config)
        # Asked while the broker may be deleting the topic: an answer that is not "not found" within a
        # few seconds raises (the caller takes it for "not known", and asks again later).
        topic = self._topic()
        try:
            return self._quick.entry_headers(topic, ledger, first + count - 1) is None
        except AdminError:
            if topic.partition_index < 0:
                raise
        # The broker cannot answer for the partition (being deleted, or brought back empty by a reader's
        # reconnect): the partitioned topic it belonged to is gone when its metadata is.
        return _partitioned_topic_gone(self._quick, topic)

    def _topic(self) -> TopicName:
        return TopicName.parse(self._part.partition)

    def _api(self) -> PulsarAdmin:
        if self._admin is None:
            from ..metadata.admin import PulsarAdmin  # only tasks that meet such an entry need requests loaded

            self._admin = PulsarAdmin.for_read_task(self._part.config)
        return self._admin


def _partitioned_topic_gone(api: PulsarAdmin, partition: TopicName) -> bool:
    """Whether the partitioned topic `partition` belongs to has no metadata any more (deleted)."""
    try:
        api.partition_count(partition.base)
    except TopicNotFound:
        return True
    return False
