"""The checks of the cluster's congestion multiplier in a quota store that the SQLite store's unit tests and the Redis
store's integration tests share: planners that each decide in the same windows, at the same time, through their own
store object (as Spark applications on several hosts would)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pulsar_throttled_source.quota_settings import AdaptiveConfig
from pulsar_throttled_source.throttling.congestion import Verdict, decide
from pulsar_throttled_source.throttling.store import MultiplierState, QuotaStore

CLUSTER = "http://broker:8080"
CONFIG = AdaptiveConfig(slow_start=False)  # the AIMD rule from the ceiling; slow start's record: test_congestion.py
W = CONFIG.window_ms


def apply(store: QuotaStore, window_ms: int, verdict: Verdict, pause_s: float = 0.0) -> MultiplierState:
    """One planner's decision, as the controller makes it; `pause_s` between read and write invites a lost update."""
    with store.transaction() as tx:
        before = tx.get_multiplier(CLUSTER)
        time.sleep(pause_s)
        record = decide(before, window_ms, verdict, CONFIG)
        tx.put_multiplier(CLUSTER, record)
    return record


def planners_deciding_together(stores: list[QuotaStore], verdicts: list[list[Verdict]]) -> None:
    """Planner i decides verdicts[i][w] in window w, all planners at once in each window (a barrier between windows)."""
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def run(store: QuotaStore, mine: list[Verdict]) -> None:
        try:
            for window, verdict in enumerate(mine, start=1):
                barrier.wait()
                apply(store, window * W, verdict, pause_s=0.002)
        except BaseException as e:  # noqa: BLE001  # reported below, in the test's thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(s, v)) for s, v in zip(stores, verdicts, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


# Per window, what 4 planners saw; the window's m follows the most cautious verdict, once.
VERDICTS: list[list[Verdict]] = [
    ["decrease", "decrease", "decrease", "decrease"],  # 1.0 -> 0.5 (not 0.0625)
    ["increase", "decrease", "increase", "increase"],  # 0.5 -> 0.25 (not lost to the three that saw none)
    ["increase", "increase", "hold", "increase"],  # held at 0.25
    ["increase", "increase", "increase", "increase"],  # 0.25 -> 0.3 (one increase, not four)
]
EXPECTED_M = 0.3


def shared_store_checks(make_store: Callable[[], QuotaStore]) -> None:
    stores = [make_store() for _ in range(4)]
    planners_deciding_together(stores, [list(col) for col in zip(*VERDICTS, strict=True)])
    with make_store().transaction() as tx:
        record = tx.get_multiplier(CLUSTER)
    assert record == MultiplierState(4 * W, 0.25, "increase", EXPECTED_M)
