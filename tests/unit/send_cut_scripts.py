"""Scripted sequences of effectivelyOnce rows, and the decisions each sender makes of them, for the conformance test
of the batch cuts (test_send_cuts_conformance.py). A script is one task's rows (each a producer's lane and payload
bytes), each lane's last persisted sequence id L, the cut rule, and how the native sender is called (Arrow batches,
and pns_send calls within them, as native_write and NativeTask.send_admitted make them).

The Python side is writing.batch_cuts (TaskCuts, LaneCuts.place/.sent), as write_task.send_messages and
NativeTask.send_admitted use it. The native side is the library's pns_send loop (lane_place, lane_sent) over
tests/native_fake/fake_libpulsar.c's producers, which batch as pulsar-client-cpp does under effectivelyOnce's
settings and log each send and flush. Run as a script (`python send_cut_scripts.py FAKE_LIBPULSAR`, the library at
reading.native_library's path: the installed one, or LIBRARY_ENV's), it prints the native side's decisions as JSON:
the test runs it in a child process (also under AddressSanitizer), so a crash fails the test, not pytest.

Both sides answer, per row: skipped or sent, flushed after its send (the sender's cut), the batch it lands in (per
producer, numbered from 0), and the rows held in batches not cut yet after it (the pacing leaves them out).
"""

from __future__ import annotations

import ctypes
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_throttled_source.writing.batch_cuts import CutRule, TaskCuts

BASE = 7 << 32  # ProducerIdentity.sequence_id(0) of micro-batch 6: (batch id + 1) << 32 | position
LOG_FIELDS = 4  # fake_libpulsar.c's FAKE_LOG_FIELDS: kind (0 send, 1 flush), sequence id, size, batch


@dataclass(frozen=True)
class Script:
    rule: CutRule
    rows: tuple[tuple[int, int], ...]  # (lane, payload bytes)
    last: tuple[int, ...]  # each lane's last persisted sequence id (-1: none)
    batches: tuple[int, ...] = ()  # the Arrow batches' row counts (empty: one batch of every row)
    calls: int = 1  # pns_send calls per Arrow batch (split at rows drawn by the script's seed)
    seed: int = 0

    @property
    def lanes(self) -> int:
        return len(self.last)


def one_lane(rule: CutRule, sizes: list[int], last: int) -> Script:
    return Script(rule, tuple((0, s) for s in sizes), (last,))


BY_COUNT = CutRule(4, 1 << 20)
SCRIPTS: dict[str, Script] = {
    "by count, no last id": one_lane(BY_COUNT, [10] * 10, -1),
    "by count, last id at a batch start": one_lane(BY_COUNT, [10] * 10, BASE | 4),
    "by count, last id inside a batch cut elsewhere": one_lane(BY_COUNT, [10] * 10, BASE | 5),
    "by count, last id at the last row": one_lane(BY_COUNT, [10] * 10, BASE | 9),
    "by count, last id beyond the rows": one_lane(BY_COUNT, [10] * 10, BASE | 100),
    "by count, last id of an earlier micro-batch": one_lane(BY_COUNT, [10] * 10, (6 << 32) | 99),
    "by count, last id at the first row": one_lane(BY_COUNT, [10] * 10, BASE),
    "by bytes": one_lane(CutRule(100, 100), [30, 30, 50, 10, 10, 10, 10, 10, 90, 5, 5], -1),
    "by bytes, last id inside a batch": one_lane(CutRule(100, 100), [30, 30, 50, 10, 10, 10, 10, 10, 90, 5, 5], BASE | 4),
    "by bytes, a row larger than the cut": one_lane(CutRule(100, 64), [10, 200, 10, 10, 80, 0, 0, 64, 1], -1),
    "by bytes, a row larger than the cut, last id on it": one_lane(CutRule(100, 64), [10, 200, 10, 10, 80, 0, 0, 64, 1], BASE | 1),
    "by bytes and count, empty payloads": one_lane(CutRule(3, 20), [0, 0, 0, 0, 5, 15, 0, 0, 30, 0], BASE | 2),
    "unbatched (1/1)": one_lane(CutRule(1, 1), [10, 0, 300, 10, 10, 10], -1),
    "unbatched (1/1), last id inside": one_lane(CutRule(1, 1), [10, 0, 300, 10, 10, 10], BASE | 3),
    "three lanes, each its own last id": Script(
        CutRule(3, 1 << 20), tuple((i % 3, 10) for i in range(30)), (-1, BASE | 4, BASE | 13), batches=(7, 11, 12), calls=2),
}


def random_script(seed: int) -> Script:
    """A task's rows over 1-4 lanes (round robin or at random), a rule by count and bytes, each lane's L drawn from:
    none, an earlier micro-batch's, one of its batch starts, a row inside one of its batches (cut elsewhere: most
    often, as the case where the rows after L start a batch of their own), any row's, past the rows; Arrow batches and
    pns_send calls split at random."""
    rnd = random.Random(seed)
    rule = rnd.choice([CutRule(1, 1), CutRule(2, 1 << 20), CutRule(3, 50), CutRule(7, 400), CutRule(50, 1000),
                       CutRule(1000, 8000), CutRule(1000, 128 * 1024)])
    lanes, n = rnd.choice([1, 2, 4]), rnd.randrange(0, 400)
    round_robin = rnd.random() < 0.5
    rows = tuple((i % lanes if round_robin else rnd.randrange(lanes), rnd.choice([0, 1, 10, 40, 200, 5000]))
                 for i in range(n))
    starts = batch_starts(Script(rule, rows, (-1,) * lanes))
    last = []
    for lane in range(lanes):
        ids = [BASE | i for i, (r, _) in enumerate(rows) if r == lane]
        inside = [i for i in ids if i not in starts[lane]]
        kind = rnd.choice(["none", "earlier", "start", "inside", "inside", "inside", "any", "beyond"])
        if kind == "earlier":
            last.append(BASE - 1)
        elif kind == "start" and starts[lane]:
            last.append(rnd.choice(starts[lane]))
        elif kind == "inside" and inside:
            last.append(rnd.choice(inside))
        elif kind == "any" and ids:
            last.append(rnd.choice(ids))
        elif kind == "beyond":
            last.append(BASE | (n + rnd.randrange(1, 10)))
        else:
            last.append(-1)
    sizes, left = [], n
    while left > 0:
        sizes.append(min(left, rnd.randrange(1, 150)))
        left -= sizes[-1]
    return Script(rule, rows, tuple(last), tuple(sizes), rnd.randrange(1, 5), seed)


RANDOM_SEEDS = range(40)


def script(name: str) -> Script:
    return random_script(int(name.split()[-1])) if name.startswith("random ") else SCRIPTS[name]


ALL_NAMES = [*SCRIPTS, *(f"random {seed}" for seed in RANDOM_SEEDS)]


def batch_starts(s: Script) -> list[list[int]]:
    """Each lane's batches' first sequence ids when nothing is skipped (where L falls when a first attempt persisted them)."""
    cuts = TaskCuts(s.rule)
    lanes = [cuts.lane(-1) for _ in range(s.lanes)]
    starts: list[list[int]] = [[] for _ in range(s.lanes)]
    for i, (lane, size) in enumerate(s.rows):
        if lanes[lane].count == 0:
            starts[lane].append(BASE | i)
        lanes[lane].place(BASE | i, size)
    return starts


def python_decisions(s: Script) -> dict[str, Any]:
    """batch_cuts' decisions, as write_task.send_messages takes them: per row [skipped, flushed, batch (None: skipped)]
    and the rows held after it; the rows held at the end."""
    cuts = TaskCuts(s.rule)
    lanes = [cuts.lane(last) for last in s.last]
    batch = [0] * s.lanes
    rows, held = [], []
    for i, (lane, size) in enumerate(s.rows):
        skip, flush = lanes[lane].place(BASE | i, size)
        if skip:
            rows.append([True, False, None])
        else:
            lanes[lane].sent()
            rows.append([False, flush, batch[lane]])
            if lanes[lane].closes:
                batch[lane] += 1
        held.append(cuts.held)
    return {"rows": rows, "held": held, "open": cuts.held}


# ---- the native side (in the child process) ---------------------------------------------------------------------
def _native(fake_path: str) -> tuple[Any, Any, Any]:
    from pulsar_throttled_source.reading.native_library import _native_library_path, load_native_library
    from pulsar_throttled_source.writing.native_sender import _load

    path = _native_library_path()
    assert path is not None, "no native library installed"
    loaded = load_native_library(path, Path(fake_path))
    assert loaded.available, loaded.reason
    sender = _load(loaded)
    assert sender.available, sender.reason
    lib = sender.lib
    lib.pns_task_held.restype, lib.pns_task_held.argtypes = ctypes.c_int64, [ctypes.c_void_p]
    fake = ctypes.CDLL(fake_path)  # the instance par_load bound (the same path)
    fake.fake_producer_log.restype = ctypes.c_int64
    fake.fake_producer_log.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    fake.fake_producer_open.restype, fake.fake_producer_open.argtypes = ctypes.c_int64, [ctypes.c_void_p]
    fake.fake_live.restype = ctypes.c_long
    return loaded, lib, fake


def _calls(s: Script) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """The Arrow batches (first row, rows) and, in each, the pns_send calls' row spans (relative to the batch)."""
    rnd = random.Random(s.seed)
    out, first = [], 0
    for rows in s.batches or (len(s.rows),):
        cuts = sorted(rnd.sample(range(1, rows), min(s.calls - 1, rows - 1))) if rows > 1 else []
        bounds = [0, *cuts, rows]
        out.append((first, rows, [(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]))
        first += rows
    return out


def native_decisions(lib: Any, fake: Any, client: int, s: Script, per_row: bool) -> dict[str, Any]:
    """pns_send over the fake's producers: the Arrow batches and calls of the script (per_row: one Arrow batch, a
    pns_send per row, with the rows held read after each)."""
    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StructField, StructType

    from pulsar_throttled_source.writing.message_columns import write_columns
    from pulsar_throttled_source.writing.native_sender import batch_columns, setting_text

    columns = write_columns(StructType([StructField("value", BinaryType())]), True)
    task = lib.pns_task_create(s.lanes if s.lanes > 1 else 0, -1, 0, 0)
    assert task and lib.pns_task_cuts(task, s.rule.max_messages, s.rule.max_bytes) == 0
    settings = {"batching_enabled": s.rule.batched, "batching_max_messages": s.rule.max_messages}
    names = (ctypes.c_char_p * 2)(*[k.encode() for k in settings])
    values = (ctypes.c_char_p * 2)(*[setting_text(v) for v in settings.values()])
    producers = []
    for lane, last in enumerate(s.last):
        result, err = ctypes.c_int(0), ctypes.create_string_buffer(256)
        producer = lib.pns_producer_create(client, f"t-partition-{lane}".encode(), names, values, 2, ctypes.byref(result),
                                           err, len(err))
        assert producer, err.value
        assert lib.pns_task_set_producer(task, lane, producer, last) == 0
        producers.append(producer)
    held: list[int] = []
    skipped = ctypes.c_int64(0)
    total_skipped = 0
    spans = [(0, len(s.rows), [(r, r + 1) for r in range(len(s.rows))])] if per_row else _calls(s)
    for first, rows, calls in spans:
        batch = pa.record_batch([pa.array([b"x" * size for _, size in s.rows[first:first + rows]], pa.binary())],
                                names=["value"])
        view, keep = batch_columns(batch, columns)
        dest = (ctypes.c_int32 * max(rows, 1))(*[lane for lane, _ in s.rows[first:first + rows]])
        for a, b in calls:
            handed = lib.pns_send(task, ctypes.byref(view), dest, ctypes.sizeof(dest), a, b, BASE | first,
                                  ctypes.byref(skipped))
            assert handed == b - a - skipped.value, (handed, a, b, skipped.value)
            total_skipped += skipped.value
            if per_row:
                held.append(lib.pns_task_held(task))
        del keep
    rows_out: list[list[Any]] = [[True, False, None] for _ in s.rows]
    for producer in producers:
        log = (ctypes.c_int64 * (LOG_FIELDS * (len(s.rows) * 2 + 1)))()
        events = fake.fake_producer_log(producer, log, len(log))
        assert events >= 0
        row = None
        for e in range(events):
            kind, sequence_id, size, number = log[e * LOG_FIELDS:(e + 1) * LOG_FIELDS]
            if kind == 0:
                row = sequence_id - BASE
                assert 0 <= row < len(s.rows) and rows_out[row][0] and size == s.rows[row][1], (row, size)
                rows_out[row] = [False, False, number]
            else:
                assert row is not None, "a flush before any send"
                rows_out[row][1] = True
    open_rows = sum(fake.fake_producer_open(p) for p in producers)
    assert total_skipped == sum(1 for r in rows_out if r[0])
    out = {"rows": rows_out, "held": held if per_row else None, "open": open_rows, "task_held": lib.pns_task_held(task)}
    for producer in producers:
        lib.pns_producer_close(producer)  # fails the open batch, as libpulsar's close: the task's last answers
    lib.pns_task_free(task)
    return out


def main() -> None:
    loaded, lib, fake = _native(sys.argv[1])
    client = loaded.lib.par_client_create(b"pulsar://fake:6650", (ctypes.c_char_p * 1)(), (ctypes.c_char_p * 1)(), 0,
                                          ctypes.create_string_buffer(256), 256)
    assert client
    results = {}
    for name in ALL_NAMES:
        s = script(name)
        results[name] = {"per row": native_decisions(lib, fake, client, s, True),
                         "calls": native_decisions(lib, fake, client, s, False)}
    loaded.lib.par_client_free(client)
    print("results " + json.dumps({"scripts": results, "leaked": int(fake.fake_live())}))


if __name__ == "__main__":
    main()
