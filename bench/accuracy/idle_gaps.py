"""Runner of precise-idle-gaps: a query tails a live topic written in bursts (bursts.py).

A window is judged only when its partition still had backlog after it (saturated: the quota, not
the data, limited it); windows in which the reader drained the last of a burst, or idled, are
reported apart. The check the gaps exist for: the first windows after an idle stretch admit no
more than the quota. Pulsar's rate limiter does not bank idle time, and neither may the source.
"""

from __future__ import annotations

import math
import time

from .bursts import CATCH_UP_TIMEOUT_S, GAP_S, BurstProducer, burst_seconds, warm_up
from .charges import charged_windows
from .long_run import over_saturated, saturated_cells
from .query import charged_query, stop_cleanly, wait_for
from .recorder import Recorder, RunRecord
from .result import Bench, Result, partitions_of
from .scenarios import Scenario
from .windows import Windows, attribute, entries_by_partition, measure_of

RATE_FACTOR = 1.6  # publish rate per partition during a burst, x the quota: a backlog forms
MIN_IDLE_WINDOWS = 2  # an idle stretch: at least this many planned windows with nothing to read
AFTER_IDLE = 3  # windows judged after an idle stretch: saved-up quota would show in them


def run_idle_gaps(bench: Bench, scenario: Scenario, topic: str) -> Result:
    partitions = partitions_of(topic, scenario.partitions)
    rec = Recorder()
    with charged_query(bench, scenario, topic, rec) as (query, log):
        wait_for(lambda: len(query.recentProgress) > 0, 180, "the query's first trigger", query)  # it tails an empty topic
        warmed = warm_up(bench.client, partitions)
        wait_for(lambda: rec.delivered_msgs() >= warmed, 180, "the warm-up messages (start-up)", query)
        # The first burst starts GAP_S after the warm-up was read: the table begins with that gap.
        bursts_from = math.floor(time.time())
        producer = BurstProducer(bench.client, partitions, burst_seconds(bench.seconds), RATE_FACTOR * scenario.quota,
                                 lambda produced: rec.delivered_msgs() >= produced, warmed)
        producer.start()
        producer.join(3 * (burst_seconds(bench.seconds) + GAP_S + CATCH_UP_TIMEOUT_S))
        if producer.is_alive() or producer.error is not None:
            raise RuntimeError(f"the burst producer did not finish: {producer.error!r}")
        wait_for(lambda: rec.delivered_msgs() >= producer.produced, CATCH_UP_TIMEOUT_S, "the reader to catch up", query)
        time.sleep(GAP_S)  # idle windows after the last drain too
        record = stop_cleanly(query, rec, bench.work / f"progress-{scenario.name}.json")
    charged, unmatched = charged_windows(record, log, partitions, scenario.unit, scenario.quota)
    w = attribute([record], measure_of(scenario.unit), charged)
    assert w.last_planned is not None, "no trigger was recorded"
    span = (bursts_from, w.last_planned)
    result = Result(scenario, w, partitions, span, over_saturated(w, partitions, scenario.quota, span))
    result.figures["after_idle"] = after_idle(w, partitions, span)
    if unmatched:
        result.notes.append("windows from the progress timestamps, not the source's charges, for partition(s) " + ", ".join(unmatched))
    result.notes += burst_notes(record, producer.spans, span)
    misses, unexplained = miss_notes(record, w, partitions, scenario.quota, span)
    result.notes += misses
    result.figures["unexplained_misses"] = unexplained
    return result


def burst_notes(record: RunRecord, spans: list[tuple[str, float, float, int]], span: tuple[int, int]) -> list[str]:
    """When each burst ran, and the entries the reader got from it (messages per entry: mean, largest)."""
    entries = entries_by_partition(record)
    starts = [math.floor(start) for _, start, _, _ in spans] + [span[1] + 1]
    out = []
    for i, (batching, start, end, n) in enumerate(spans):
        sizes = [m for v in entries.values() for _, m, x in v if starts[i] <= x < starts[i + 1]]
        shape = f"{len(sizes)} entries of {sum(sizes) / len(sizes):.1f} msgs on average, largest {max(sizes)}" if sizes else "no entries"
        out.append(f"burst {batching}: {end - start:.0f} s from window {starts[i] - span[0]:+d}, {n} msgs in all; read as {shape}")
    return out


def miss_notes(record: RunRecord, w: Windows, partitions: list[str], quota: float,
               span: tuple[int, int]) -> tuple[list[str], int]:
    """Why a saturated window missed 5%: precise mode admits the entry count nearest the quota, so a
    window short by more than half its next entry, or over by more than half its last one, is the
    planner's (counted: the second value); within that, whole entries larger than 5% of the quota
    cannot land closer."""
    unexplained = 0
    entries = entries_by_partition(record)
    out = []
    for x, p in saturated_cells(w, partitions, span):
        d = w.delivered(x, p)
        if abs(d - quota) <= 0.05 * quota:
            continue
        mine = [(pos, m) for pos, m, wx in entries.get(p, []) if wx == x]
        later = [m for pos, m, _ in entries.get(p, []) if mine and pos > mine[-1][0]]
        nxt = later[0] if later else None
        # What the window had to give: the quota less the debt the windows before it left (replayed).
        carried = 0.0
        for y in range(w.first_data or x, x):
            carried = max(0.0, carried + w.delivered(y, p) - quota)
        left = quota - carried
        rounding = (nxt is not None and left - d <= nxt / 2) if d < left else (bool(mine) and d - left <= mine[-1][1] / 2)
        unexplained += not rounding
        out.append(f"  window {x - span[0]:+d} partition {p.rsplit('-', 1)[-1]}: {d:.0f} ({100 * (d - quota) / quota:+.1f}%) in "
                   f"{len(mine)} entries (largest {max((m for _, m in mine), default=0)} msgs), debt carried in {carried:.0f}; "
                   f"the next entry held {nxt if nxt is not None else '?'} msgs: "
                   + ("within half an entry of what was left (nearest-entry rounding)" if rounding
                      else "more than half an entry off what was left"))
    return ((["saturated windows outside 5%:"] + out) if out else []), unexplained


def after_idle(w: Windows, partitions: list[str], span: tuple[int, int]) -> list[tuple[int, str, float]]:
    """(window, partition, delivered) of the first AFTER_IDLE planned windows with data that follow an
    idle stretch (MIN_IDLE_WINDOWS or more planned windows with nothing delivered and nothing left)."""
    out = []
    for p in partitions:
        idle, judged = 0, 0
        for x in range(min(span[0], w.first_data or span[0]), span[1] + 1):  # the warm-up's idle windows count too
            if x not in w.planned:
                continue  # no trigger in that window: neither idle nor busy as far as we know
            delivered = w.delivered(x, p)
            if delivered == 0 and w.backlog_after.get(x, {}).get(p, 0) == 0:
                idle += 1
                judged = 0
                continue
            if idle >= MIN_IDLE_WINDOWS:
                judged = AFTER_IDLE
            idle = 0
            if judged > 0 and delivered > 0 and x >= span[0]:
                out.append((x, p, delivered))
                judged -= 1
    return out


def window_kind(w: Windows, window: int, partition: str) -> str:
    """S: saturated (backlog left after the window); D: data, caught up after it; idle: neither."""
    if w.backlog_after.get(window, {}).get(partition, 0) > 0:
        return "S"
    return "D" if w.delivered(window, partition) > 0 else "idle"
