"""Scripted message-id sequences, and what each read path makes of them, for the conformance test
(test_read_path_conformance.py). A script is what a reader delivers: messages (their serialized
MessageIdData, as the client's ids carry it, and a payload naming the position) and timeouts.

The Python path reads a script through the unit fakes (FakeReader, FakeMessage, StandInId); the
native path through the library built from native/src over a stand-in libpulsar
(tests/native_fake/fake_libpulsar.c) that replays it. Run as a script (`python read_path_scripts.py
LIBRARY FAKE_LIBPULSAR`), it prints the native path's results as JSON: the test runs it in a child
process (also with AddressSanitizer preloaded), so a crash or a sanitizer report fails the test, not pytest.
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from pulsar_throttled_source.metadata.entry_headers import EntryHeaders
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.protobuf_wire import varint
from pulsar_throttled_source.read_task import ClientConfig, PartitionRange

P = "persistent://public/default/t-partition-0"
GROUP_FIELDS = ("rows_before", "rows", "batch_index", "new_entry", "entry_complete")
ENTRY_FIELDS = ("ledger", "entry", "first_chunk_ledger", "first_chunk_entry")
# The native library of these tests is built with a small value budget (columns.c PAR_BATCH_VALUE_BYTES), so a
# batch that would take a variable-width column past Arrow's 32-bit offsets is scripted in bytes, not gigabytes.
VALUE_BUDGET = 1_000
OVERFLOW_HEADROOM = 64  # columns.c: what would_overflow keeps free, scaled down with the budget


def message_id(ledger: int, entry: int, index: int = -1, size: int = 0, first_chunk: tuple[int, int] | None = None) -> bytes:
    """MessageIdData as the client serializes it: ledger, entry, partition, batch index and size when batched,
    the first chunk's position for a chunked message's id."""
    out = b"\x08" + varint(ledger) + b"\x10" + varint(entry) + b"\x18\x00"
    if index >= 0:
        out += b"\x20" + varint(index)
    if size > 0:
        out += b"\x30" + varint(size)
    if first_chunk is not None:
        nested = b"\x08" + varint(first_chunk[0]) + b"\x10" + varint(first_chunk[1])
        out += b"\x3a" + varint(len(nested)) + nested
    return out


@dataclass(frozen=True)
class Msg:
    ledger: int
    entry: int
    index: int = -1
    size: int = 0  # the batch size the id carries (0: not said)
    first_chunk: tuple[int, int] | None = None
    payload_bytes: int = 0  # 0: the payload is the position's name

    def id(self) -> bytes:
        return message_id(self.ledger, self.entry, self.index, self.size, self.first_chunk)

    def payload(self) -> bytes:
        name = f"{self.ledger}:{self.entry}:{self.index}".encode()
        return name.ljust(self.payload_bytes, b".") if self.payload_bytes else name


TIMEOUT = None  # a read that times out
Script = list[Msg | None]


def entry(ledger: int, e: int, n: int, size: int | None = None, first: int = 0, payload_bytes: int = 0) -> list[Msg | None]:
    """Messages first..n-1 of a batched entry whose ids say `size` (default n; 0: not said)."""
    return [Msg(ledger, e, i, n if size is None else size, payload_bytes=payload_bytes) for i in range(first, n)]


# name -> (script, max_rows of each read_group call)
GROUP_CASES: dict[str, tuple[Script, list[int]]] = {
    "unbatched": ([Msg(5, e) for e in range(4)], [100] * 5),
    "batched": ([*entry(5, 0, 3), *entry(5, 1, 1), *entry(5, 2, 4), Msg(5, 3)], [100] * 5),
    "batched, split by max_rows": ([*entry(5, 0, 3), *entry(5, 1, 5)], [2, 3, 4, 6, 8, 100]),
    "chunked": ([Msg(5, 0), Msg(5, 3, first_chunk=(5, 1)), *entry(5, 4, 2), Msg(5, 7, first_chunk=(5, 5)), Msg(5, 8)], [100] * 6),
    "unknown batch sizes": ([*entry(5, 0, 3, size=0), *entry(5, 1, 2, size=0), Msg(5, 2), *entry(5, 3, 2, size=0)],
                            [100] * 9),
    "unknown batch sizes, split by max_rows": ([*entry(5, 0, 4, size=0)], [1, 3, 100, 100, 100]),
    "timeouts inside and between entries": ([TIMEOUT, *entry(5, 0, 2, size=4), TIMEOUT, *entry(5, 0, 4, size=4, first=2),
                                             TIMEOUT, Msg(5, 1)], [100] * 7),
    # A reader started inside a batched entry (a range starting at a batch index): its first message is not index 0.
    "a continuing entry": ([*entry(5, 1, 4, first=2), *entry(5, 2, 3)], [100] * 3),
    # The rest of an entry never came (a short batch): the next entry's message whose index happens to follow
    # is that entry's first, not the rest of the last one.
    "another entry at the next index": ([*entry(5, 1, 4)[:2], TIMEOUT, *entry(5, 2, 4, first=2), *entry(5, 3, 2)],
                                        [100] * 5),
    "another entry at the next index, unknown sizes": ([*entry(5, 1, 2, size=0), *entry(5, 2, 4, size=0, first=2)],
                                                       [100] * 5),
}

BIG = VALUE_BUDGET // 4  # payloads large enough that a few fill the native batch's value budget
OVERFLOW_SCRIPT: Script = [*entry(5, 0, 3, payload_bytes=BIG), *entry(5, 1, 4, payload_bytes=BIG), Msg(5, 2, payload_bytes=BIG)]


# name -> (script, start, end, runs, first_message, end_message, max_rows_per_batch): ranges read by the one loop
@dataclass(frozen=True)
class LoopCase:
    script: Script
    start: tuple[int, int]
    end: tuple[int, int]
    runs: tuple[tuple[int, int, int], ...] | None
    first_message: tuple[int, int, int] | None = None
    end_message: tuple[int, int, int] | None = None
    limit: int = 100


LOOP_CASES: dict[str, LoopCase] = {
    "unbatched": LoopCase([Msg(5, e) for e in range(2, 9)], (5, 2), (5, 5), ((5, 3, 3),)),
    "inside batched entries": LoopCase([m for e in range(5) for m in entry(5, e, 4)], (5, 0), (5, 3), ((5, 1, 3),),
                                       (5, 1, 2), (5, 3, 1)),
    "inside batched entries, 3 rows a batch": LoopCase([m for e in range(5) for m in entry(5, e, 4)], (5, 0), (5, 3),
                                                       ((5, 1, 3),), (5, 1, 2), (5, 3, 1), limit=3),
    "inside batched entries, unplanned, 5 rows a batch": LoopCase([m for e in range(5) for m in entry(5, e, 4)], (5, 0),
                                                                  (5, 3), None, (5, 1, 2), (5, 3, 1), limit=5),
    "chunked": LoopCase([Msg(5, 1, first_chunk=(5, 0)), Msg(5, 3, first_chunk=(5, 2)), Msg(5, 4), Msg(5, 6, first_chunk=(5, 5))],
                        (5, 0), (5, 5), ((5, 4, 1),)),
    "unknown batch sizes": LoopCase([*entry(5, 0, 3, size=0), *entry(5, 1, 4, size=0), Msg(5, 2)], (5, -1), (5, 1),
                                    ((5, 0, 2),)),
    "past the value budget": LoopCase(OVERFLOW_SCRIPT, (5, -1), (5, 1), ((5, 0, 2),)),
}


def loop_part(case: LoopCase) -> PartitionRange:
    cfg = ClientConfig("pulsar://x:6650", (), (), None, 3_000, case.limit)
    entries = sum(r[2] for r in case.runs) if case.runs is not None else -1
    part = PartitionRange(P, 0, EntryPosition(*case.start), EntryPosition(*case.end), entries, cfg, case.runs)
    return part.inside_entries(case.first_message, case.end_message)


def plain(position: tuple[int, int]) -> EntryHeaders:  # every entry an ordinary stored message
    return EntryHeaders()


def group_record(g: Any) -> dict[str, int]:
    """What the loop reads of a group: on a timeout its status only; the entry's position where it starts one."""
    if g.status != 0:
        return {"status": int(g.status)}
    out = {"status": 0, **{f: int(getattr(g, f)) for f in GROUP_FIELDS}}
    if g.new_entry:
        out.update({f: int(getattr(g, f)) for f in ENTRY_FIELDS})
    return out


def batch_rows(batches: Iterator[Any]) -> list[list[str]]:
    """Each Arrow batch's rows, as "payload|messageId hex"."""
    return [[f"{row['value'].decode()}|{row['messageId'].hex()}" for row in b.to_pylist()] for b in batches]


def read_groups(source: Any, calls: list[int]) -> dict[str, Any]:
    """Each call's group; the batch is exported where a source says it is full (as the loop does), and at the end."""
    from pulsar_throttled_source.reading.native_library import STATUS_FULL

    groups, rows = [], []
    for max_rows in calls:
        g = source.read_group(1, max_rows)
        groups.append(group_record(g))
        if g.status == STATUS_FULL:
            rows += batch_rows(source.batches())
    return {"groups": groups, "rows": rows + batch_rows(source.batches())}


# -- the native path over the stand-in libpulsar --------------------------------------------------------
class ScriptedLibpulsar:
    """The stand-in libpulsar (fake_libpulsar.c), loaded once, scripted per case."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # the handle par_load's dlopen of the same path gets
        self.lib.fake_push.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        self.lib.fake_live.restype = ctypes.c_long

    def play(self, script: Script) -> None:
        self.lib.fake_reset()
        for m in script:
            if m is None:
                assert self.lib.fake_push(None, 0, None, 0, 1) == 0
            else:
                mid, payload = m.id(), m.payload()
                assert self.lib.fake_push(mid, len(mid), payload, len(payload), 0) == 0


def native_results(library: str, fake_path: str) -> dict[str, Any]:
    from pulsar_throttled_source.reading.native_library import GROUP_FIELDS, group_layout_problem, load_native_library
    from pulsar_throttled_source.reading.native_read import NativeEntrySource, read_native_messages
    from pulsar_throttled_source.reading.native_reader import NativeReader, create_client

    fake = ScriptedLibpulsar(fake_path)
    from pathlib import Path

    loaded = load_native_library(Path(library), Path(fake_path))
    assert loaded.lib is not None, loaded.reason
    part = loop_part(LOOP_CASES["unbatched"])
    client = create_client(loaded.lib, part.config)
    live = fake.lib.fake_live()  # the client
    out: dict[str, Any] = {"groups": {}, "loops": {}}

    def reader(script: Script) -> NativeReader:
        fake.play(script)
        return NativeReader.open(loaded, client, part.config, P, None, 10)

    for name, (script, calls) in [*GROUP_CASES.items(), ("past the value budget", (OVERFLOW_SCRIPT, [100] * 5))]:
        r = reader(script)
        out["groups"][name] = read_groups(NativeEntrySource(r, part), calls)
        r.close()
    for name, case in LOOP_CASES.items():
        r = reader(case.script)
        out["loops"][name] = batch_rows(read_native_messages(r, loop_part(case), plain))
        r.close()
    out["leaked"] = fake.lib.fake_live() - live  # messages, ids, configurations and readers not freed
    out["layout"] = group_layout_problem(loaded.lib, loaded.group_type)

    class Drifted(ctypes.Structure):  # a mirror with two fields swapped: the same size
        _fields_ = [GROUP_FIELDS[1], GROUP_FIELDS[0], *GROUP_FIELDS[2:]]

    out["drifted"] = group_layout_problem(loaded.lib, Drifted)
    loaded.lib.par_client_free(client)
    return out


# -- the Python path over the unit fakes ----------------------------------------------------------------
def python_reader(script: Script) -> Any:
    from fakes import FakeMessage, FakeReader, StandInId

    return FakeReader([None if m is None else FakeMessage(StandInId(m.ledger, m.entry, m.index, m.id()), value=m.payload())
                       for m in script])


def python_groups(name: str) -> dict[str, Any]:
    from pulsar_throttled_source.reading.python_read import PythonEntrySource

    script, calls = GROUP_CASES[name]
    return read_groups(PythonEntrySource(python_reader(script), loop_part(LOOP_CASES["unbatched"])), calls)


def python_loop(name: str) -> list[list[str]]:
    from pulsar_throttled_source.reading.python_read import read_python_messages

    case = LOOP_CASES[name]
    return batch_rows(read_python_messages(python_reader(case.script), loop_part(case), plain))


def with_limit(case: LoopCase, limit: int) -> LoopCase:
    return replace(case, limit=limit)


if __name__ == "__main__":
    print("results " + json.dumps(native_results(sys.argv[1], sys.argv[2])))
