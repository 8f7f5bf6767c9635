"""Executor side: how many permits a read task's reader gives the broker (its receiver queue), from what the
planner put in its range: entries, messages per entry, bytes per entry, and whether the query is under quotas.

Too few and the task waits on every broker read; too many and the broker reads past the range, entries the next
task reads again from the bookies unless it finds this reader parked (parked_readers.py)."""

from __future__ import annotations

import math

from ..read_task import PartitionRange

MAX_RECEIVER_QUEUE = 10_000  # a deep queue keeps the broker streaming while a large range is converted
# The client drops the entry a reader starts after (an exclusive start) without giving its permit
# back (pulsar-client-cpp ConsumerImpl::messageReceived, "Ignoring message from before the
# startMessageId"): a queue of 1 would never be refilled. A reader started inclusively at its
# range's first entry drops nothing, and a queue of 1 serves it.
MIN_RECEIVER_QUEUE = 2
MIN_INCLUSIVE_QUEUE = 1
# An encrypted batch a reader cannot decrypt (cryptoFailureAction consume or discard) is handed over,
# or dropped, as one message, and gives one permit back for the batch's many: the broker must read
# the range while its first permits last, so such a reader keeps the range-deep queue it had
# before the read-ahead bound (ranges of at most 100 entries are read in one broker read).
UNDECRYPTED_MIN_QUEUE = 64
# The entries a broker reads for a reader at a time at most (dispatcherMaxReadBatchSize's default).
BROKER_READ_ENTRIES = 100
# What a long range's queue in messages may hold in flight (stored bytes): 10,000 messages of 100 B are 1 MB,
# of 10 kB 100 MB; it never goes below a queue of the range's entries (the bound before issue 44).
QUEUE_BYTES = 8 * 1024 * 1024


def receiver_queue_for(part: PartitionRange, inclusive: bool = False) -> int:
    """The permits a task's reader gives the broker, within [2 (1 for a reader started inclusively at its first
    entry), 10,000]: under quotas a sixteenth of its range's entries (read_ahead_share); unthrottled, its range's
    entries when one broker read brings them all, else its range's messages (its entries times the planner's
    messages per entry) as far as they fit in QUEUE_BYTES (never fewer than its entries).

    The broker counts permits in messages but reads min(permits, 100) entries at a time whatever they hold
    (PersistentDispatcherSingleActiveConsumer.getRestrictedMaxEntriesForConsumer, without the broker's
    preciseDispatcherFlowControl), sends them all, and reads again only once the reader's permits are positive:
    its messages in flight below the queue's size. What it read past the range's end is read again from the
    bookies by the next range's task unless that task finds this reader parked (the same worker process: about
    half the time under Spark). Under quotas a sixteenth of the range's entries bounds each read, so what it
    reads past the range to about 6 % of the entries a throttled query delivers (bench/README.md,
    "bookie_reads.py"). Unthrottled, a range of at most 100 entries arrives in one read of exactly its entries
    (a queue of its messages would have the broker read 100 entries past a small range: 5-6 dispatched per
    delivered message in batch_timeline.py's small batches); a longer one takes several reads, and a queue of
    its entries, on a batched topic far fewer messages than one read brings, let the broker read again only once
    the task had all but emptied it: the task waited on every read (issue 44: 628 messages per entry, ranges of
    200 entries, a queue in messages read the backlog 10-16 % faster). A chunked message needs no deeper queue:
    the client gives a permit back for each chunk it buffers (pulsar-client-cpp since 3.4; test_chunked reads
    messages of more chunks than the queue)."""
    cfg = part.config
    if cfg.crypto_failure_action != "fail":
        return max(UNDECRYPTED_MIN_QUEUE, min(MAX_RECEIVER_QUEUE, part.entries))
    floor = MIN_INCLUSIVE_QUEUE if inclusive else MIN_RECEIVER_QUEUE
    if cfg.read_ahead_share > 1:
        permits = math.ceil(part.entries / cfg.read_ahead_share)
    elif part.entries <= BROKER_READ_ENTRIES:
        permits = part.entries
    else:
        per_entry = max(1.0, part.msgs_per_entry)
        permits = math.ceil(part.entries * per_entry)
        if part.entry_bytes > 0:  # large messages: what the queue holds in flight stays within QUEUE_BYTES
            permits = max(part.entries, min(permits, math.ceil(QUEUE_BYTES / part.entry_bytes * per_entry)))
    return max(floor, min(MAX_RECEIVER_QUEUE, permits))
