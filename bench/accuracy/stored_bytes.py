"""The stored size of entries, for byte quotas: what the broker keeps per entry, which is what a
byte quota (like the broker's own dispatch byte rate) is about, not the payload a reader is handed.

An entry is stored as a small frame (magic, checksum, metadata size), the message metadata, then
the payload. The admin API tells the payload exactly: HEAD .../ledger/L/entry/E answers with
`X-Pulsar-batch-size` for a batched entry (its payload after the metadata: every message with its
single-message metadata) and `Content-Length` for an unbatched one. The frame and metadata are not
reported per entry; the ledgers' sizes (internalStats: closed ledgers' `size`, the open one's
`currentLedgerSize`) are exact per ledger, so the overhead per entry is (ledger size - sum of its
payloads) / its entries. The remaining approximation: every entry of a ledger is given that mean
overhead (about 30 bytes here), though metadata varies by a few bytes between entries (varint
sequence ids, the batch's message count).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName

Position = tuple[int, int]


@dataclass
class StoredSizes:
    payload: dict[str, dict[Position, int]] = field(default_factory=dict)  # partition -> entry -> payload bytes
    overhead: dict[str, dict[int, float]] = field(default_factory=dict)  # partition -> ledger -> mean bytes per entry

    def size(self, partition: str, entry: Position) -> float:
        return self.payload[partition][entry] + self.overhead[partition].get(entry[0], 0.0)

    def mean_overhead(self) -> float:
        values = [v for ledgers in self.overhead.values() for v in ledgers.values()]
        return sum(values) / len(values) if values else 0.0


def payload_bytes(headers: dict[str, str]) -> int:
    h = {k.lower(): v for k, v in headers.items()}
    return int(h["x-pulsar-batch-size"]) if "x-pulsar-batch-size" in h else int(h.get("content-length", 0))


def ledgers_of(stats: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(ledger, entries, size) of every ledger holding entries; the open ledger reports its live
    counts in separate fields (currentLedgerEntries, currentLedgerSize)."""
    raw = stats.get("ledgers") or []
    out = []
    for i, item in enumerate(raw):
        ledger, entries, size = int(item["ledgerId"]), int(item.get("entries", 0)), int(item.get("size", 0))
        if i == len(raw) - 1 and entries == 0:
            entries, size = int(stats.get("currentLedgerEntries", 0)), int(stats.get("currentLedgerSize", 0))
        if entries > 0:
            out.append((ledger, entries, size))
    return out


def stored_sizes(admin: PulsarAdmin, partitions: list[str]) -> StoredSizes:
    """Every stored entry of the partitions (call it while nothing is produced, after the run)."""
    out = StoredSizes()
    with ThreadPoolExecutor(8) as pool:
        for partition in partitions:
            name = TopicName.parse(partition)
            ledgers = ledgers_of(admin.internal_stats(name))
            positions = [(l, e) for l, n, _ in ledgers for e in range(n)]
            heads = pool.map(lambda pos, name=name: admin.entry_headers(name, *pos), positions)
            out.payload[partition] = {pos: payload_bytes(h) for pos, h in zip(positions, heads, strict=True) if h is not None}
            out.overhead[partition] = {
                l: (size - sum(out.payload[partition].get((l, e), 0) for e in range(n))) / n for l, n, size in ledgers}
    return out
