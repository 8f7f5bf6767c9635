"""Runner of the scenarios that drain a backlog produced beforehand (batch, precise*, large-entries-*).

The query starts from the earliest entry; its start-up (the first batch can take seconds) is not
measured: the run lasts `seconds` from the first data batch. The long run counts every window from
the first trigger after that start-up batch to the last planned one (or the last before the
backlog ran out), with the debt the buckets owed at both ends (long_run.py, charges.py).
"""

from __future__ import annotations

import time

from .backlogs import LARGE_BATCH
from .charges import charged_windows
from .long_run import over_span
from .query import charged_query, stop_cleanly, wait_for
from .recorder import Recorder, RunRecord
from .result import Bench, Result, partitions_of
from .scenarios import LEGACY, Scenario
from .stored_bytes import StoredSizes, stored_sizes
from .windows import Windows, attribute, measure_of


def run_drain(bench: Bench, scenario: Scenario, topic: str) -> Result:
    rec = Recorder()
    partitions = partitions_of(topic, scenario.partitions)
    with charged_query(bench, scenario, topic, rec) as (query, log):
        wait_for(lambda: rec.data_batches() > 0, 180, "the first data batch", query)  # start-up is not measured
        time.sleep(bench.seconds)
        record = stop_cleanly(query, rec, bench.work / f"progress-{scenario.name}.json")
    stored = stored_sizes(bench.admin, partitions) if scenario.unit == "bytes" else None
    measure = measure_of(scenario.unit, stored.size if stored else None)
    charged, unmatched = charged_windows(record, log, partitions, scenario.unit, scenario.quota)
    exact = attribute([record], measure, charged)
    assert exact.first_data is not None and exact.last_planned is not None, "no data batch was recorded"
    # The start-up batch (Spark's first, seconds long) is followed by windows without a trigger that
    # are start-up, not pacing: the long run begins with the first trigger after it.
    first, end = exact.first_data, exact.last_planned
    start = min((x for x in exact.planned if x > first), default=first)
    ran_out = _ran_out(exact, partitions, start)
    if ran_out is not None:
        end = min(end, ran_out - 1)  # the window that read the last of a partition's backlog was not saturated
    carried = {p: log.carried(p, scenario.unit, scenario.quota) for p in partitions} if log.states else None
    table = attribute([record], measure) if scenario.name in LEGACY else exact
    result = Result(scenario, table, partitions, (first, exact.last_planned),
                    over_span(exact, partitions, scenario.quota, start, end, carried, table_from=table.first_data))
    if ran_out is not None:
        result.notes.append(f"the backlog ran out in window {ran_out - first:+d}: the long run ends before it")
    if unmatched or carried is None:
        result.notes.append("windows from the progress timestamps, not the source's charges, for partition(s) "
                            + (", ".join(unmatched) or "all (the buckets could not be read)"))
    if scenario.data == "large-400":
        result.notes += _large_entry_notes(scenario, record, partitions, stored)
    return result


def _ran_out(w: Windows, partitions: list[str], start: int) -> int | None:
    """The first window from `start` whose plan left a partition with no backlog (as the source reported it)."""
    return min((x for x, left in w.backlog_after.items() if x >= start and any(left.get(p, 1) == 0 for p in partitions)),
               default=None)


def _large_entry_notes(scenario: Scenario, record: RunRecord, partitions: list[str], stored: StoredSizes | None) -> list[str]:
    entries = {p: sum(len(b[p].entries) for b in record.batches.values() if p in b) for p in partitions}
    notes = [f"per-window error is not meaningful here: one entry ({LARGE_BATCH} messages"
             + (f", {_mean_entry(stored):,.0f} B stored" if stored else "")
             + f") exceeds a window's quota ({scenario.quota:,} {scenario.unit}); the source admits one entry and "
             "carries the rest as debt, so only the long run is judged",
             "entries delivered: " + ", ".join(f"partition {p.rsplit('-', 1)[-1]} {n}" for p, n in entries.items())]
    if stored is not None:
        payload = sum(d.payload_bytes for b in record.batches.values() for d in b.values())
        notes.append(f"stored bytes = each delivered entry's payload (HEAD .../ledger/L/entry/E: X-Pulsar-batch-size) + "
                     f"its ledger's mean frame and metadata bytes per entry ({stored.mean_overhead():.1f} B: ledger size - "
                     f"payloads, over entries); the message values alone came to {payload:,} B")
    return notes


def _mean_entry(stored: StoredSizes) -> float:
    sizes = [stored.size(p, e) for p, entries in stored.payload.items() for e in entries]
    return sum(sizes) / len(sizes) if sizes else 0.0
