"""The transactions probe: each partition's transaction max read position, the last entry the broker dispatches
now (an open transaction holds back what follows it), so that planning never plans past it."""

from __future__ import annotations

from ..positions import EntryPosition
from ..topics import TopicName
from .admin import PulsarAdmin
from .admin_http import TopicNotFound, TransactionsDisabled
from .layout import PartitionLayout
from .request_pool import RequestPool


class MaxReadPositions:
    """What the broker dispatches of each partition, asked only where it can differ from the newest entry; learns
    at the first answer whether the broker runs transactions at all (one without them is never asked again)."""

    def __init__(self, admin: PulsarAdmin, requests: RequestPool) -> None:
        self._admin = admin
        self._requests = requests
        self._transactions: bool | None = None  # whether the broker runs a transaction coordinator
        self._max_read: dict[str, EntryPosition] = {}

    @property
    def may_hold_back(self) -> bool:
        """Whether open transactions may hold entries back (the broker runs transactions, or that is not known yet):
        then each topic's stats come with its layouts, their open-transaction counts saying whom to ask."""
        return self._transactions is not False

    def moved_past(self, partition: str, layout: PartitionLayout) -> bool:
        """Whether entries lie past the partition's last known max read position."""
        known = self._max_read.get(partition)
        return known is None or layout.latest > known

    def positions(self, layouts: dict[str, PartitionLayout],
                  open_transactions: dict[str, int | None]) -> dict[str, EntryPosition]:
        """Each partition's transaction max read position, asked only where entries lie past the last
        one known and a transaction is open (without one it is simply the newest entry). The counts
        of open transactions were read after the layouts: a partition with none then dispatches
        every entry of its layout. One partition is asked in any case until the broker is known to
        run transactions or not (a broker without them refuses the request)."""
        if self._transactions is False:
            return {}
        moved = [name for name, layout in layouts.items() if self.moved_past(name, layout)]
        settled = [name for name in moved if open_transactions.get(name) == 0]
        asked = [name for name in moved if open_transactions.get(name) != 0]  # open, or a broker too old to say
        if self._transactions is None and not asked and settled:
            asked, settled = settled[:1], settled[1:]
        try:
            answers = self._requests.each(lambda name: self._admin.max_read_position(TopicName.parse(name)), asked)
        except TransactionsDisabled:
            self._transactions = False
            return {}
        for name in settled:
            self._max_read[name] = layouts[name].latest
        for name, answer in zip(asked, answers, strict=True):
            if isinstance(answer, TopicNotFound):
                continue
            self._transactions = True
            # No open transaction: nothing is held back up to the newest entry seen now.
            latest = layouts[name].latest
            self._max_read[name] = latest if answer is None else min(latest, EntryPosition.parse(answer, f"max read position of {name}"))
        return {name: self._max_read[name] for name in layouts if name in self._max_read}


def open_transactions(stats: dict) -> int | None:
    """A partition's open transactions, from its publish stats (None: a broker too old to report them)."""
    count = stats.get("ongoingTxnCount")
    return None if count is None else int(count)
