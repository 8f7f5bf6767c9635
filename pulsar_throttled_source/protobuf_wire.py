"""Protobuf wire format, the little of it this source needs: varints, field tags and sizes, and the
MessageIdData fields read from a message id's bytes (its batch index and size, a chunked message's first chunk).

Used on the driver (metadata/entry_headers.py sizes an entry's MessageMetadata from its headers) and in
read tasks (the read loop splices message ids and finds a chunked message's first chunk), so it sits
below both and imports nothing of the package.
"""

from __future__ import annotations

VARINT, LENGTH_DELIMITED = 0, 2  # the wire types met here
BATCH_INDEX_TAG = 0x20  # MessageIdData.batch_index: field 4, varint
BATCH_SIZE_FIELD = 6  # MessageIdData.batch_size: varint
FIRST_CHUNK_FIELD = 7  # MessageIdData.first_chunk_message_id: a nested MessageIdData


# -- sizes (what a field takes on the wire) ----------------------------------------------------------
def varint_size(value: int) -> int:
    if value < 0:
        return 10  # negative int64 values take ten bytes
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def tag_size(field_number: int) -> int:
    return varint_size(field_number << 3)


def length_delimited_size(length: int) -> int:
    """A length-delimited value's bytes: its length as a varint, then the value."""
    return varint_size(length) + length


# -- encoding and decoding ---------------------------------------------------------------------------
def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_CACHED_VARINTS = 4096  # batch indexes, on the read loop's hot path: producers batch up to 1000 by default
_VARINTS = [encode_varint(i) for i in range(_CACHED_VARINTS)]


def varint(value: int) -> bytes:
    """encode_varint, cached for the small values a batch index takes."""
    return _VARINTS[value] if value < _CACHED_VARINTS else encode_varint(value)


def read_varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at `data[i]` and the offset after it."""
    value = shift = 0
    while i < len(data):
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return value, i


# -- MessageIdData ------------------------------------------------------------------------------------
def batch_index_field(data: bytes) -> int | None:
    """Offset of the batch_index tag (field 4, varint) in a serialized MessageIdData whose
    earlier fields (ledgerId, entryId, partition) are all varints; None otherwise."""
    i = 0
    while i < len(data):
        tag = data[i]
        if tag == BATCH_INDEX_TAG:
            return i
        if tag not in (0x08, 0x10, 0x18):
            return None
        i += 1
        while i < len(data) and data[i] & 0x80:
            i += 1
        i += 1
    return None


def batch_size_field(serialized_id: bytes) -> int:
    """The batch_size (field 6) of a serialized MessageIdData: how many messages the entry of a
    batched message holds, as the C++ client writes it; 0 when absent or unreadable."""
    value = _field(serialized_id, BATCH_SIZE_FIELD)
    return value if isinstance(value, int) else 0


def first_chunk_position(serialized_id: bytes) -> tuple[int, int] | None:
    """The first chunk's (ledger, entry) of a chunked message from its serialized MessageIdData
    (field 7, first_chunk_message_id); None for any other message. The client reports a chunked
    message by its LAST chunk and keeps the first only in this field."""
    nested = _field(serialized_id, FIRST_CHUNK_FIELD)
    return _ledger_entry(nested) if isinstance(nested, bytes) else None


def message_id_fields(serialized_id: bytes) -> tuple[int, int, int] | None:
    """(ledger id, entry id, batch index or -1) of a serialized MessageIdData, the ids as signed int64 (the Java
    client's MessageId.earliest is -1:-1); None when the bytes are not one."""
    found = _ledger_entry(serialized_id)
    if found is None:
        return None
    ledger, entry = (v - (1 << 64) if v >= 1 << 63 else v for v in found)
    batch = _field(serialized_id, 4)
    return ledger, entry, batch if isinstance(batch, int) else -1


def _field(data: bytes, field_number: int) -> int | bytes | None:
    """The first value of a field (of a one-byte tag) in a serialized message: a varint's number, a
    length-delimited field's bytes; None when absent, or past a wire type not met here (then the
    bytes are not a MessageIdData we know: the message is treated as an ordinary one)."""
    i, n = 0, len(data)
    while i < n:
        tag = data[i]
        wire = tag & 7
        if wire == VARINT:
            value, i = read_varint(data, i + 1)
            if tag >> 3 == field_number:
                return value
        elif wire == LENGTH_DELIMITED:
            length, i = read_varint(data, i + 1)
            if tag >> 3 == field_number:
                return data[i:i + length]
            i += length
        else:
            return None
    return None


def _ledger_entry(data: bytes) -> tuple[int, int] | None:
    ledger = entry = None
    i = 0
    while i < len(data):
        tag = data[i]
        value, i = read_varint(data, i + 1)
        if tag == 0x08:
            ledger = value
        elif tag == 0x10:
            entry = value
        elif tag & 7 != VARINT:
            return None
    return (ledger, entry) if ledger is not None and entry is not None else None
