"""Pulsar's primitive schemas: each payload one value, encoded as the Java client's schemas
write it (big-endian, fixed width; measured against a Java producer on the real broker), and the
column type it reads as. Temporal values keep all they carry up to Spark's microseconds: DATE,
TIME and TIMESTAMP are epoch milliseconds (java.util.Date, java.sql.Time, java.sql.Timestamp), so
all three are timestamps; INSTANT is seconds and nanoseconds; LOCAL_DATE epoch days; LOCAL_TIME
nanoseconds of the day (Spark has no time-of-day type on every version we run on: a long);
LOCAL_DATE_TIME days and nanoseconds, a timestamp without time zone."""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
EPOCH_LOCAL = datetime(1970, 1, 1)
EPOCH_DATE = date(1970, 1, 1)

_TIMESTAMP = pa.timestamp("us", tz="UTC")


def _unpacker(fmt: str) -> Callable[[bytes], Any]:
    # struct.unpack with the format (cached by struct), not a Struct: the package must stay
    # picklable by value (cloudpickle), and a Struct is not.
    def read(payload: bytes) -> Any:
        return struct.unpack(fmt, payload)[0]
    return read


def _millis(payload: bytes) -> datetime:
    return EPOCH + timedelta(milliseconds=_INT64(payload))


def _instant(payload: bytes) -> datetime:
    seconds, nanos = struct.unpack(">qi", payload)
    return EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)


def _local_date(payload: bytes) -> date:
    return EPOCH_DATE + timedelta(days=_INT64(payload))


def _local_date_time(payload: bytes) -> datetime:
    days, nanos = struct.unpack(">qq", payload)
    return EPOCH_LOCAL + timedelta(days=days, microseconds=nanos // 1000)


def _boolean(payload: bytes) -> bool:
    if len(payload) != 1:
        raise ValueError(f"{len(payload)} bytes, not 1")
    return payload != b"\x00"


_INT64 = _unpacker(">q")

# Schema type -> (column type, payload -> value). struct raises on a payload of the wrong length.
PRIMITIVES: dict[str, tuple[pa.DataType, Callable[[bytes], Any]]] = {
    "INT8": (pa.int8(), _unpacker(">b")),
    "INT16": (pa.int16(), _unpacker(">h")),
    "INT32": (pa.int32(), _unpacker(">i")),
    "INT64": (pa.int64(), _INT64),
    "FLOAT": (pa.float32(), _unpacker(">f")),
    "DOUBLE": (pa.float64(), _unpacker(">d")),
    "BOOLEAN": (pa.bool_(), _boolean),
    "DATE": (_TIMESTAMP, _millis),
    "TIME": (_TIMESTAMP, _millis),
    "TIMESTAMP": (_TIMESTAMP, _millis),
    "INSTANT": (_TIMESTAMP, _instant),
    "LOCAL_DATE": (pa.date32(), _local_date),
    "LOCAL_TIME": (pa.int64(), _INT64),
    "LOCAL_DATE_TIME": (pa.timestamp("us"), _local_date_time),
}
