"""adaptiveThrottling on a write (writing/write_congestion.py): the write quotas scaled by the cluster's multiplier m,
which the worker's controller moves on the write's own stress signals (the bookies' pending adds on the partitions it
writes to) and shares with every reader and writer of the same quota store; a fake clock, a fake admin API."""

from __future__ import annotations

from typing import Any

import pytest
from builders import URLS
from fakes import FakeClock
from memory_quota_store import MemoryQuotaStore

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.quota_settings import AdaptiveConfig
from pulsar_throttled_source.throttling.congestion import cluster_key
from pulsar_throttled_source.topics import TopicName
from pulsar_throttled_source.writing.write_congestion import WriteCongestion
from pulsar_throttled_source.writing.write_options import parse_write_options
from pulsar_throttled_source.writing.write_quota import PublishPermits, WriteQuota

P0 = "persistent://public/default/t-partition-0"
P1 = "persistent://public/default/t-partition-1"
TOPIC = "persistent://public/default/t"


class Stats:
    """The admin API's internal stats: pendingAddEntriesCount per partition, and who asked for which."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {P0: 0, P1: 0}
        self.asked: list[str] = []

    def at(self, endpoint: Any, retry_timeout_s: float = 0.0, known_good: bool = False) -> Stats:
        return self

    def internal_stats(self, partition: TopicName) -> dict[str, Any]:
        self.asked.append(str(partition))
        if str(partition) not in self.pending:
            raise RuntimeError("404")
        return {"pendingAddEntriesCount": self.pending[str(partition)]}

    def partitioned_internal_stats(self, topic: TopicName) -> dict[str, dict[str, Any]]:
        self.asked.append(f"{topic} partitions")
        return {p: {"pendingAddEntriesCount": n} for p, n in self.pending.items() if TopicName.parse(p).base == topic}

    def close(self) -> None:
        pass


@pytest.fixture
def stats(monkeypatch) -> Stats:
    s = Stats()
    monkeypatch.setattr(PulsarAdmin, "at", s.at)
    return s


def options(**extra: str):
    return parse_write_options(URLS | {"topic": "t", "publishThrottlingRateInMsg": "100", "adaptiveThrottling": "true",
                                       "adaptiveThrottlingWindow": "1s", "adaptiveThrottlingSlowStart": "false"} | extra)


def test_a_write_takes_adaptive_throttling_over_its_quotas_and_refuses_what_it_cannot_use():
    o = options(adaptiveThrottlingMinPercent="20")
    assert o.adaptive == AdaptiveConfig(min_multiplier=0.2, window_ms=1000, slow_start=False)
    assert parse_write_options(URLS).adaptive is None
    with pytest.raises(ValueError, match="'adaptiveThrottling': the controller scales the write's quotas, and none is set; "
                                         "set publishThrottlingRateInMsg or publishThrottlingRateInByte"):
        parse_write_options(URLS | {"adaptiveThrottling": "true"})
    with pytest.raises(ValueError, match="'adaptiveThrottlingTriggerInterval'.* apply to reads"):
        options(adaptiveThrottlingTriggerInterval="1s")  # batchDuration: a read's signal
    with pytest.raises(ValueError, match="'adaptiveThrottlingWindow' applies only with 'adaptiveThrottling'=true"):
        parse_write_options(URLS | {"publishThrottlingRateInMsg": "100", "adaptiveThrottlingWindow": "1s"})


def test_pending_adds_on_the_partitions_written_lower_m_and_the_quota_follows(stats):
    clock, store = FakeClock(1000.0), MemoryQuotaStore()
    congestion = WriteCongestion(options(), store, clock)
    permits = PublishPermits(WriteQuota(msgs=100), store, clock=clock, sleep=clock.sleep, multiplier=congestion.multiplier)

    def sent_in_one_window(destination: str) -> int:
        window, n = int(clock()), 0
        while int(clock()) == window:
            permits.take(destination, 10)
            n += 1
        return n - 1  # the last take waited into the next window

    assert sent_in_one_window(P0) == 100  # clear: m = 1
    # The topic of the partitions written to, once per controller window (the last take began the next).
    assert stats.asked == [f"{TOPIC} partitions"] * 2
    permits.take(P1, 10)  # same window: decided already, nothing asked
    assert stats.asked == [f"{TOPIC} partitions"] * 2
    stats.pending[P0] = 50  # the bookies fall behind on what this worker writes
    clock.advance(1)
    assert sent_in_one_window(P0) == 50  # pendingAdds fired (50 >= 8 and 2x the running minimum 0): m = 0.5
    assert set(stats.asked) == {f"{TOPIC} partitions"}  # each window: one request for both partitions written to
    assert congestion.controller.last is not None and congestion.controller.last.named("fired") == ["pendingAdds"]
    # The decision is the cluster's, in the shared store: a reader or another worker on the same store starts from it.
    with store.transaction() as tx:
        record = tx.get_multiplier(cluster_key(URLS["admin.url"]))
    assert record is not None and record.verdict == "decrease"


def test_a_partition_whose_stats_cannot_be_read_is_no_congestion(stats):
    clock, store = FakeClock(1000.0), MemoryQuotaStore()
    congestion = WriteCongestion(options(), store, clock)
    assert congestion.multiplier("persistent://public/default/gone") == 1.0
    clock.advance(1)
    assert congestion.multiplier("persistent://public/default/gone") == 1.0  # increase from the ceiling: still 1
    assert stats.asked == ["persistent://public/default/gone"] * 2  # an unpartitioned topic: its own stats, refused
