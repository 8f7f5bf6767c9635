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
The metadata size is recomputed from the fields with protobuf's wire rules (checked against the
ledger sizes a broker reports, see tests/unit/test_entry_headers.py).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import datetime

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


def lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def messages_in_entry(headers: Mapping[str, str]) -> int:
    """What a reader is handed for one entry: a batch's messages; a chunked message once (its first
    chunk owns it); nothing for a transaction marker or an aborted entry."""
    h = lower(headers)
    if "x-pulsar-marker-type" in h or h.get("x-pulsar-txn-aborted", "").strip().lower() == "true":
        return 0
    chunk_id = int(h.get("x-pulsar-chunk-id", -1))
    if chunk_id >= 0 and int(h.get("x-pulsar-num-chunks-from-msg", 0)) > 1:
        return 1 if chunk_id == 0 else 0
    return max(1, int(h.get("x-pulsar-num-batch-message", 1)))


def stored_bytes(headers: Mapping[str, str]) -> float | None:
    """The entry's size in its ledger, or None when the headers cannot tell it."""
    h = lower(headers)
    if h.get("x-pulsar-is-encrypted", "false").lower() == "true":
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
            size += _tag(number) + _varint(int(h[name]))
    for name, number in TIME_FIELDS.items():
        if name in h:
            size += _tag(number) + _varint(_epoch_ms(h[name]))
    for name, number in TEXT_FIELDS.items():
        if name in h:
            size += _tag(number) + _length_delimited(len(h[name].encode("latin-1", "replace")))
    for name, number in BOOL_FIELDS.items():
        if name in h:
            size += _tag(number) + 1
    for name, number in BASE64_FIELDS.items():
        if name in h:
            size += _tag(number) + _length_delimited(len(base64.b64decode(h[name])))
    if h.get("x-pulsar-compression", "NONE").upper() != "NONE":
        size += _tag(8) + _varint(COMPRESSION_CODES.get(h["x-pulsar-compression"].upper(), 1))
    for key, value in _properties(h):
        pair = _tag(1) + _length_delimited(len(key)) + _tag(2) + _length_delimited(len(value))
        size += _tag(4) + _length_delimited(pair)
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


def _tag(number: int) -> int:
    return _varint(number << 3)


def _length_delimited(length: int) -> int:
    return _varint(length) + length


def _varint(value: int) -> int:
    if value < 0:
        return 10  # negative int64 values take ten bytes
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size
