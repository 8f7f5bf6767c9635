"""Precise mode prices stretches of alike batches from a grid of looked-up entries (uniform_batching),
and anything else exactly: on the shared fake admin API (fakes.py), whose entries' stored sizes
are given so that they can be compared with their ledger's average entry (100 bytes there)."""

from __future__ import annotations

from builders import P0, backlog_after, entries_holding
from fakes import FakeAdmin, LookupPools

from pulsar_throttled_source.metadata.backlog_sizes import BacklogSizes
from pulsar_throttled_source.metadata.uniform_batching import GRID


def drain(admin: FakeAdmin, quota: float, windows: int, start: int = -1) -> list[int]:
    """Plan `windows` windows of `quota` messages one after another, as a query drains a backlog
    (each planned batch prefetches the next window's lookups): the messages each window admits."""
    pools = LookupPools()
    counts = BacklogSizes(admin, pool=pools)  # type: ignore[arg-type]
    total = len(admin.counts)
    read: list[int] = []
    for _ in range(windows):
        counts.new_plan()
        backlog = backlog_after(start, total)
        estimate = counts.learner(P0, backlog)(quota, 0.0).msgs
        admitted = entries_holding(estimate, quota)
        read.append(sum(admin.counts[start + 1:start + 1 + admitted]))
        counts.prefetch(P0, backlog, admitted)
        for lookup in pools.settle():  # what runs while the batch runs
            lookup.exception()
        start += admitted
    counts.close()
    return read


def test_a_drain_of_alike_batches_looks_up_one_entry_per_grid_and_admits_the_quota_exactly():
    admin = FakeAdmin([10] * 5_000, sizes=[100] * 5_000)
    read = drain(admin, 400, 100)  # 4,000 entries
    assert read == [400] * 100
    assert len(admin.lookups) <= 4_000 // GRID + 3  # the first entry, the grid, and the next window's
    assert len(set(admin.lookups)) == len(admin.lookups)


def test_a_change_of_batching_is_found_at_the_grid_and_priced_exactly_there():
    # A producer that stopped batching, and one that started.
    for counts in ([10] * 300 + [1] * 8_000, [1] * 700 + [10] * 1_000):
        admin = FakeAdmin(counts, sizes=[100] * len(counts))
        read = drain(admin, 400, 20)
        assert all(390 < r <= 400 for r in read), read  # within one entry of the quota, never over
        assert len(admin.lookups) < 300  # exact only around the change


def test_entries_unlike_their_ledgers_average_or_of_unknown_size_are_counted_exactly():
    # Entries of 10 messages stored in 150 bytes, in a ledger whose average entry is 100 bytes: the
    # ledger mixes in other batches, so the grid cannot vouch for the entries between its points.
    for sizes in ([150] * 2_000, None):
        admin = FakeAdmin([10] * 2_000, sizes=sizes)
        read = drain(admin, 400, 10)
        assert read == [400] * 10
        assert len(admin.lookups) >= 400  # every entry admitted was looked up


def test_a_window_past_the_checked_stretch_checks_only_the_grid_entries_it_reaches():
    admin = FakeAdmin([10] * 1_000, sizes=[100] * 1_000)
    counts = BacklogSizes(admin)  # type: ignore[arg-type]
    counts.new_plan()
    estimate = counts.learner(P0, backlog_after(-1, 1_000))(1_000, 0.0).msgs  # 100 entries and one more
    assert entries_holding(estimate, 1_000) == 100
    assert sorted(admin.lookups) == [(5, 0), (5, 64), (5, 128)]  # the first, and the grid up to past the window
    counts.new_plan()
    assert entries_holding(counts.learner(P0, backlog_after(99, 1_000))(280, 0.0).msgs, 280) == 28
    assert len(admin.lookups) == 3  # within the checked stretch: nothing to ask
    counts.close()
