"""The protobuf wire helpers every other module sizes, encodes or reads varints and message ids with."""

from __future__ import annotations

import pytest

from pulsar_throttled_source.protobuf_wire import (
    batch_size_field,
    encode_varint,
    length_delimited_size,
    read_varint,
    tag_size,
    varint,
    varint_size,
)

VALUES = [0, 1, 127, 128, 300, 4095, 4096, 16383, 16384, 70000, 2**31, 2**40, 2**63 - 1]


def test_varint_matches_protobuf_encoding():
    assert varint(0) == b"\x00"
    assert varint(127) == b"\x7f"
    assert varint(128) == b"\x80\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(70000) == b"\xf0\xa2\x04"


@pytest.mark.parametrize("value", VALUES)
def test_cached_encoded_sized_and_read_varints_agree(value):
    encoded = encode_varint(value)
    assert varint(value) == encoded
    assert varint_size(value) == len(encoded)
    assert read_varint(b"\xff" + encoded + b"\x01", 1) == (value, 1 + len(encoded))


def test_negative_int64_takes_ten_bytes_and_fields_add_their_tag_and_length():
    assert varint_size(-1) == 10
    assert tag_size(15) == 1 and tag_size(16) == 2  # field numbers above 15 need a two-byte tag
    assert length_delimited_size(127) == 128 and length_delimited_size(128) == 130


def test_batch_size_is_read_from_a_batched_id_and_zero_where_absent_or_unreadable():
    assert batch_size_field(bytes.fromhex("081410001800200530ad02")) == 301  # ledger 20, entry 0, index 5, size 301
    assert batch_size_field(bytes.fromhex("0814100018002005")) == 0  # no batch_size field
    assert batch_size_field(bytes.fromhex("0a0100" + "3003")) == 3  # after a length-delimited field
    assert batch_size_field(bytes.fromhex("0d00000000" + "3003")) == 0  # a fixed32 first: not an id we know
