"""What one stored entry's admin-API headers (HEAD .../ledger/L/entry/E) say about it: the messages
a reader is handed from it, and the bytes it takes in the ledger.

The broker's byte quotas count stored entry bytes: a 10-byte frame (magic, checksum, metadata size),
the serialized MessageMetadata, then the payload as stored (compressed). The headers carry every
metadata field a producer sets, and the payload size where it is unambiguous:
- a batch: `X-Pulsar-batch-size` is the frame and the stored payload (everything but the metadata);
- a single message without compression: `Content-Length` of the payload (0 when Jetty streams a
  large body, so 0 is "not known");
- otherwise (a compressed single message, an encrypted entry, a large single message): not known
  here; the planner prices it at its ledger's average entry size.
The metadata size is recomputed from the fields with protobuf's wire rules (protobuf_wire.py; checked
against the ledger sizes a broker reports, see tests/unit/test_entry_headers.py).
The headers are parsed once into an EntryHeaders, which the planner and read tasks share.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..protobuf_wire import length_delimited_size, tag_size, varint_size

FRAME_BYTES = 10  # magic (2), checksum (4), metadata size (4)
COMPRESSION_CODES = {"NONE": 0, "LZ4": 1, "ZLIB": 2, "ZSTD": 3, "SNAPPY": 4}
# Header -> (field number, wire kind) of MessageMetadata fields sent as text headers.
VARINT_FIELDS = {"x-pulsar-sequence-id": 2, "x-pulsar-uncompressed-size": 9, "x-pulsar-num-batch-message": 11,
                 "x-pulsar-marker-type": 20, "x-pulsar-txnid-least-bits": 22, "x-pulsar-txnid-most-bits": 23,
                 "x-pulsar-highest-sequence-id": 24, "x-pulsar-num-chunks-from-msg": 27,
                 "x-pulsar-total-chunk-msg-size": 28, "x-pulsar-chunk-id": 29}
TIME_FIELDS = {"x-pulsar-publish-time": 3, "x-pulsar-event-time": 12, "x-pulsar-deliver-at-time": 19}
TEXT_FIELDS = {"x-pulsar-producer-name": 1, "x-pulsar-replicated-from": 5, "x-pulsar-partition-key": 6,
               "x-pulsar-uuid": 26}
BOOL_FIELDS = {"x-pulsar-partition-key-b64-encoded": 17, "x-pulsar-null-value": 25, "x-pulsar-null-partition-key": 30}
BASE64_FIELDS = {"x-pulsar-base64-ordering-key": 18, "x-pulsar-base64-schema-version-b64encoded": 16}


@dataclass(frozen=True)
class EntryHeaders:
    """What the broker says of one stored entry (its admin-API headers), parsed once: read by the
    planner (the messages a reader gets, the stored bytes) and by read tasks (what an entry they
    never saw as a message is). Built by `parse`; the defaults are an ordinary stored message."""

    chunk_id: int = -1  # -1: not a chunk
    num_chunks: int = 0
    uuid: str = ""  # producer name and sequence id of a chunked message
    marker: bool = False  # a transaction commit/abort marker (never dispatched)
    aborted: bool = False  # written in a transaction that was aborted
    uncommitted: bool = False  # in a transaction that is still open
    encrypted: bool = False
    batch_messages: int = 1  # the messages of a batch (1: not batched)
    # Every header, names lower-cased: what sizing the entry's metadata needs.
    fields: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, headers: Mapping[str, str]) -> EntryHeaders:
        h = {k.lower(): v for k, v in headers.items()}  # HTTP header names are case-insensitive

        def flag(name: str) -> bool:
            return h.get(name, "false").strip().lower() == "true"

        return cls(chunk_id=int(h.get("x-pulsar-chunk-id", -1)), num_chunks=int(h.get("x-pulsar-num-chunks-from-msg", 0)),
                   uuid=h.get("x-pulsar-uuid", ""), marker="x-pulsar-marker-type" in h, aborted=flag("x-pulsar-txn-aborted"),
                   uncommitted=flag("x-pulsar-txn-uncommitted"), encrypted=flag("x-pulsar-is-encrypted"),
                   batch_messages=int(h.get("x-pulsar-num-batch-message", 1)), fields=h)

    @property
    def starts_chunked_message(self) -> bool:
        return self.chunk_id == 0 and self.num_chunks > 1

    @property
    def messages(self) -> int:
        """What a reader is handed for the entry: a batch's messages; a chunked message once (its first
        chunk owns it); nothing for a transaction marker or an aborted entry."""
        if self.marker or self.aborted:
            return 0
        if self.chunk_id >= 0 and self.num_chunks > 1:
            return 1 if self.chunk_id == 0 else 0
        return max(1, self.batch_messages)

    @property
    def stored_bytes(self) -> float | None:
        """The entry's size in its ledger, or None when the headers cannot tell it."""
        h = self.fields
        if self.encrypted:
            return None  # the encryption keys travel in the metadata but not in the headers
        if "x-pulsar-batch-size" in h:
            return int(h["x-pulsar-batch-size"]) + metadata_bytes(h)
        if h.get("x-pulsar-compression", "NONE").upper() != "NONE" or "x-pulsar-chunk-id" in h:
            return None  # Content-Length is the uncompressed (or reassembled) body
        body = int(h.get("content-length", 0) or 0)
        if body == 0:
            return None  # a streamed (large) body, or an empty one: the headers do not tell which
        return FRAME_BYTES + body + metadata_bytes(h)


def metadata_bytes(h: Mapping[str, str]) -> int:
    """The serialized MessageMetadata of the entry the (lower-cased) headers describe."""
    size = 0
    for name, number in VARINT_FIELDS.items():
        if name in h:
            size += tag_size(number) + varint_size(int(h[name]))
    for name, number in TIME_FIELDS.items():
        if name in h:
            size += tag_size(number) + varint_size(_epoch_ms(h[name]))
    for name, number in TEXT_FIELDS.items():
        if name in h:
            size += tag_size(number) + length_delimited_size(len(h[name].encode("latin-1", "replace")))
    for name, number in BOOL_FIELDS.items():
        if name in h:
            size += tag_size(number) + 1
    for name, number in BASE64_FIELDS.items():
        if name in h:
            size += tag_size(number) + length_delimited_size(len(base64.b64decode(h[name])))
    if h.get("x-pulsar-compression", "NONE").upper() != "NONE":
        size += tag_size(8) + varint_size(COMPRESSION_CODES.get(h["x-pulsar-compression"].upper(), 1))
    for key, value in _properties(h):
        pair = tag_size(1) + length_delimited_size(len(key)) + tag_size(2) + length_delimited_size(len(value))
        size += tag_size(4) + length_delimited_size(pair)
    return size


def _properties(h: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """Message properties: one JSON header on current brokers, one header per key on older ones."""
    pairs: dict[str, str] = {}
    if h.get("x-pulsar-property", "").startswith("{"):
        pairs.update(json.loads(h["x-pulsar-property"]))
    prefix = "x-pulsar-property-"
    pairs.update({k[len(prefix):]: v for k, v in h.items() if k.startswith(prefix)})
    return [(k.encode(), str(v).encode()) for k, v in pairs.items()]


def _epoch_ms(text: str) -> int:
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
