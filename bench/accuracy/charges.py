"""The source's own account of a run: its topic buckets, polled while the query runs.

The query progress says when a trigger ran, not when the engine charged its buckets; a plan that
crosses a second boundary lands in the wrong window (the tables of the older scenarios show the
odd window with two plans and an empty one before it). The buckets say it exactly: every charge
writes the bucket's window and what it has used there. Polling them every 20 ms (plans of one query
are hundreds of ms apart) yields the charge history, which gives:

- the window each micro-batch was charged in (its charges, in order, matched to its batches);
- what the bucket still owed at any window (over-admission carried forward): the debt at a span's
  ends, in the engine's own units.

This reads the source's private bucket layout (throttling/sqlite_store.py, redis_store.py, buckets.py);
when it changes, the bench falls back to the progress timestamps (windows.py) and says so.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .recorder import RunRecord

State = tuple[int, float, float]  # (window, used_msgs, used_bytes), as stored
EPSILON = 1e-6


def topic_key(partition: str) -> str:
    return f"topic:options:{partition}"  # an option topic quota's bucket (throttling/buckets.py)


def sqlite_reader(path: str, partitions: list[str]) -> Callable[[], dict[str, State]]:
    conn: sqlite3.Connection | None = None
    keys = {topic_key(p): p for p in partitions}

    def read() -> dict[str, State]:
        nonlocal conn
        if conn is None:  # read-only: the planner's write lock is never taken
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1, check_same_thread=False)
        marks = ",".join("?" * len(keys))
        rows = conn.execute(f'SELECT key, "window", used_msgs, used_bytes FROM buckets WHERE key IN ({marks})', list(keys))
        return {keys[k]: (int(w), float(m), float(b)) for k, w, m, b in rows}

    return read


def redis_reader(url: str, partitions: list[str]) -> Callable[[], dict[str, State]]:
    import redis

    client = redis.Redis.from_url(url)

    def read() -> dict[str, State]:
        out = {}
        for p in partitions:
            row = client.hgetall("pulsar-throttled:bucket:" + topic_key(p))  # redis_store.KEY_PREFIX + "bucket:"
            if row:
                out[p] = (int(row[b"window"]), float(row[b"used_msgs"]), float(row[b"used_bytes"]))
        return out

    return read


@dataclass(frozen=True)
class Charge:
    window: int
    amount: float  # what this plan charged (in the unit judged)
    used: float  # what the bucket had used in `window` after it


class ChargeLog(threading.Thread):
    """Every distinct state of the partitions' topic buckets while it runs."""

    def __init__(self, read: Callable[[], dict[str, State]], interval_s: float = 0.02) -> None:
        super().__init__(name="bench-charge-log", daemon=True)
        self.read, self.interval_s = read, interval_s
        self.states: dict[str, list[State]] = {}
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                for partition, state in self.read().items():
                    seen = self.states.setdefault(partition, [])
                    if not seen or seen[-1] != state:
                        seen.append(state)
            except Exception:  # the store does not exist yet, or is busy: try again
                self.errors += 1
            time.sleep(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)
        try:  # the last state, once the query has stopped
            for partition, state in self.read().items():
                seen = self.states.setdefault(partition, [])
                if not seen or seen[-1] != state:
                    seen.append(state)
        except Exception:
            self.errors += 1

    def save(self, path: Path) -> None:
        """Beside the run record, for a closer look at a run."""
        path.write_text(json.dumps(self.states))

    def charges(self, partition: str, unit: str, quota: float) -> list[Charge]:
        """The charges of one partition's bucket, in order (batch mode counts entries as messages)."""
        index = 2 if unit == "bytes" else 1
        out, prev = [], None
        for state in self.states.get(partition, []):
            used = state[index]
            carried = _roll(prev, state[0], quota) if prev is not None else 0.0
            if used - carried > EPSILON:
                out.append(Charge(state[0], used - carried, used))
            prev = (state[0], used)
        return out

    def carried(self, partition: str, unit: str, quota: float) -> Callable[[int], float]:
        """What the bucket had used at the start of a window: debt (or part of a quota) from before it."""
        charges = self.charges(partition, unit, quota)

        def at(window: int) -> float:
            before = [c for c in charges if c.window < window]
            return _roll((before[-1].window, before[-1].used), window, quota) if before else 0.0

        return at


def _roll(prev: tuple[int, float], window: int, quota: float) -> float:
    """A bucket's use rolled forward: each window that ended paid back one quota."""
    return max(0.0, prev[1] - quota * max(0, window - prev[0]))


def charged_windows(run: RunRecord, log: ChargeLog, partitions: list[str], unit: str,
                    quota: float) -> tuple[dict[int, dict[str, int]], list[str]]:
    """batch -> partition -> the window its charge was made in: a partition's charges, in order, are
    its batches with data, in order (one query; a last charge may have no batch: the query stopped
    between plan and batch). Partitions whose charges do not cover their batches (a poll missed one)
    keep the progress timestamps; the second value says which."""
    out: dict[int, dict[str, int]] = {}
    unmatched = []
    for p in partitions:
        batches = sorted(b for b, parts in run.batches.items() if p in parts and parts[p].msgs > 0)
        charges = log.charges(p, unit, quota)
        if len(charges) < len(batches):
            unmatched.append(f"{p.rsplit('-', 1)[-1]} ({len(charges)} charges seen for {len(batches)} batches)")
            continue
        for batch_id, charge in zip(batches, charges, strict=False):
            out.setdefault(batch_id, {})[p] = charge.window
    return out, unmatched
