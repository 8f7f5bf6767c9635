"""Executor side: where a read task's reader starts, the same for both read paths."""

from __future__ import annotations

from typing import Any

from ..positions import BEFORE_EARLIEST
from ..read_task import PartitionRange


def reader_start(part: PartitionRange, exclusive_only: bool) -> tuple[Any, bool]:
    """Where a reader of the range starts (a pulsar.MessageId), and whether inclusively.

    Where planning listed the range's entries, at the first one, inclusively: started after
    `start`, the broker would read the entry at `start` too, only for the client to drop it (a
    bookie read per reader opened). Else (or `exclusive_only`: a native library that cannot set
    it) after `start`: the broker delivers the start entry itself for batch index -1, and the
    read loop skips entries at or before `start`."""
    import pulsar

    if part.start == BEFORE_EARLIEST:
        return pulsar.MessageId.earliest, False
    partition = max(part.partition_index, -1)
    if part.runs and not exclusive_only:
        ledger, first, _ = part.runs[0]
        return pulsar.MessageId(partition, ledger, first, -1), True
    return pulsar.MessageId(partition, part.start.ledger_id, part.start.entry_id, -1), False
