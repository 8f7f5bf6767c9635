"""Where a new query starts: `startingOffsets` / `startingTime` resolved against the current layouts.

Offsets hold the last entry read, so every answer is a position *before* the first entry to read.
"""

from __future__ import annotations

from ..metadata.admin import PulsarAdmin
from ..metadata.catalog import CatalogSnapshot
from ..metadata.layout import PartitionLayout
from ..offsets import SourceOffset
from ..options import StartSpec
from ..positions import BEFORE_EARLIEST, EntryPosition, MessagePosition
from ..topics import TopicName


def before_first(layout: PartitionLayout) -> EntryPosition:
    """"earliest" as a concrete position (before the oldest stored entry), so that a batch re-run after
    retention deleted its entries is reported as loss, as Kafka's resolved earliest offsets are."""
    first = layout.first
    return BEFORE_EARLIEST if first is None else EntryPosition(first.ledger_id, -1)


def resolve_start(start: StartSpec, snap: CatalogSnapshot, admin: PulsarAdmin) -> SourceOffset:
    """The offset a query starts from (a stream's initial offset, a batch query's start)."""
    return SourceOffset(_start_positions(start, snap, admin))


def _start_positions(start: StartSpec, snap: CatalogSnapshot, admin: PulsarAdmin) -> dict[str, EntryPosition]:
    if start.kind == "earliest":
        return {p: before_first(layout) for p, layout in snap.layouts.items()}
    if start.kind == "latest":  # an open transaction's messages come after "latest" once it commits
        return {p: snap.readable_end(p) for p in snap.layouts}
    if start.kind == "time":
        assert start.time_ms is not None
        return {p: position_before_time(admin, p, layout, start.time_ms) for p, layout in snap.layouts.items()}
    given = known_positions("startingOffsets", start.positions, snap)
    out: dict[str, EntryPosition] = {}
    for p, layout in snap.layouts.items():
        value = given.get(p, "latest")
        if value == "earliest":
            out[p] = before_first(layout)
        elif value == "latest":
            out[p] = snap.readable_end(p)
        else:
            assert isinstance(value, EntryPosition | MessagePosition)
            # A user position is the first entry to read (a message's: its entry, whole; the read task
            # drops what comes before the message); offsets hold the last entry read.
            out[p] = EntryPosition(value.ledger_id, value.entry_id - 1)
    return out


def known_positions(option: str, positions: tuple[tuple[str, EntryPosition | MessagePosition | str], ...],
                    snap: CatalogSnapshot) -> dict[str, EntryPosition | MessagePosition | str]:
    """An offsets option's positions by partition; a partition the query does not read is an error naming it."""
    given = dict(positions)
    unknown = [p for p in given if p not in snap.layouts]
    if unknown:
        raise ValueError(f"Option '{option}' names partition(s) {', '.join(unknown)} that the query does not read; "
                         f"known partitions: {', '.join(snap.layouts) or 'none'}.")
    return given


def position_before_time(admin: PulsarAdmin, partition: str, layout: PartitionLayout, time_ms: int) -> EntryPosition:
    """The entry before the first one published at or after `time_ms` (the broker's lookup, per entry): where
    startingTime starts (offsets hold the last entry read), and the last entry endingTime reads."""
    found = admin.message_id_by_timestamp(TopicName.parse(partition), time_ms)
    ledger, entry = int(found.get("ledgerId", -1)), int(found.get("entryId", -1))
    if ledger < 0 or EntryPosition(ledger, entry) > layout.latest:
        return layout.latest  # nothing published at or after time_ms yet
    return EntryPosition(ledger, entry - 1)
