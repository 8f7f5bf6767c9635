"""What precise mode learns of the entries it is about to admit, on a fake admin API that answers
entry lookups the way the broker does (per-entry headers)."""

from __future__ import annotations

from pulsar_throttled_source.metadata.entry_counts import (
    EXACT_AHEAD,
    LOOKUPS_PER_PLAN,
    SAMPLES,
    EntryMessageCounts,
    messages_in_entry,
)
from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.positions import EntryPosition

P0 = "persistent://public/default/t-partition-0"


class FakeAdmin:
    """Entries of ledger 5 hold `counts[e]` messages; lookups are counted."""

    def __init__(self, counts: list[int], gone_from: int | None = None) -> None:
        self.counts = counts
        self.gone_from = gone_from
        self.lookups: list[tuple[int, int]] = []

    def entry_headers(self, partition, ledger_id: int, entry_id: int) -> dict[str, str] | None:
        self.lookups.append((ledger_id, entry_id))
        if self.gone_from is not None and entry_id >= self.gone_from:
            return None
        n = self.counts[entry_id]
        return {"X-Pulsar-num-batch-message": str(n)} if n > 1 else {"X-Pulsar-publish-time": "1"}


def backlog_after(entry: int, entries: int):
    layout = PartitionLayout.from_internal_stats(P0, {
        "ledgers": [{"ledgerId": 5, "entries": 0, "size": 0}], "lastConfirmedEntry": f"5:{entries - 1}",
        "currentLedgerEntries": entries, "currentLedgerSize": entries * 100, "entriesAddedCounter": entries})
    return layout.backlog_after(EntryPosition(5, entry))


def test_a_reader_is_handed_a_batch_whole_a_chunked_message_once_and_no_marker():
    assert messages_in_entry({"X-Pulsar-num-batch-message": "10"}) == 10
    assert messages_in_entry({}) == 1
    assert messages_in_entry({"x-pulsar-chunk-id": "0", "x-pulsar-num-chunks-from-msg": "3"}) == 1
    assert messages_in_entry({"x-pulsar-chunk-id": "2", "x-pulsar-num-chunks-from-msg": "3"}) == 0
    assert messages_in_entry({"X-Pulsar-marker-type": "20"}) == 0
    assert messages_in_entry({"X-Pulsar-txn-aborted": "true", "X-Pulsar-num-batch-message": "5"}) == 0


def test_entries_a_quota_could_admit_are_counted_exactly_then_sampled_and_each_looked_up_once():
    admin = FakeAdmin([1] * 200 + [10] * 100 + [20] * 200)
    counts = EntryMessageCounts(admin)  # type: ignore[arg-type]
    counts.new_plan()
    known = counts.learner(P0, backlog_after(199, 500))(100)  # the batched part, quota 100
    assert known.counts == (10,) * 11 and known.msgs(10) == 100  # ten entries hold the quota, and one more
    assert sorted(admin.lookups) == [(5, e) for e in range(200, 200 + EXACT_AHEAD)]
    many = counts.learner(P0, backlog_after(199, 500))(2_000)  # past the exact part: sampled
    assert len(many.counts) == EXACT_AHEAD and many.beyond is not None and 10 < many.beyond < 20
    assert len(admin.lookups) == EXACT_AHEAD + SAMPLES
    for _ in range(50):  # idle polls, and the next window from the same start
        counts.new_plan()
        assert counts.learner(P0, backlog_after(199, 500))(100).counts == (10,) * 11
    assert len(admin.lookups) == EXACT_AHEAD + SAMPLES and len(set(admin.lookups)) == len(admin.lookups)


def test_what_the_query_moved_past_is_forgotten_and_the_next_entries_learned():
    admin = FakeAdmin([10] * 40)
    counts = EntryMessageCounts(admin)  # type: ignore[arg-type]
    counts.learner(P0, backlog_after(-1, 40))(50)
    counts.learner(P0, backlog_after(4, 40))(50)  # five entries read: five more to learn
    assert sorted(admin.lookups) == [(5, e) for e in range(EXACT_AHEAD + 5)]
    assert set(counts._known[P0]) == {(5, e) for e in range(5, EXACT_AHEAD + 5)}


def test_lookups_stop_at_the_budget_and_at_a_deleted_entry():
    admin = FakeAdmin([1] * 1000)
    counts = EntryMessageCounts(admin)  # type: ignore[arg-type]
    counts.new_plan()
    partitions = [f"{P0[:-1]}{i}" for i in range(20)]
    learned = [counts.learner(p, backlog_after(-1, 1000))(10_000) for p in partitions]
    assert len(admin.lookups) == LOOKUPS_PER_PLAN and learned[-1].counts == ()
    counts.new_plan()
    assert len(counts.learner(partitions[-1], backlog_after(-1, 1000))(10).counts) == 11
    gone = EntryMessageCounts(FakeAdmin([1] * 10, gone_from=3))  # type: ignore[arg-type]
    assert gone.learner(P0, backlog_after(-1, 10))(10).counts == (1, 1, 1)


def test_the_next_window_is_looked_up_in_the_background_once_a_batch_is_planned():
    admin = FakeAdmin([10] * 300)
    counts = EntryMessageCounts(admin)  # type: ignore[arg-type]
    counts.new_plan()
    counts.learner(P0, backlog_after(-1, 300))(100)
    counts.prefetch(P0, backlog_after(-1, 300), 10)  # the batch admitted ten entries
    for lookup in counts._pending[P0].values():  # what runs while the batch runs
        lookup.result()
    asked = len(admin.lookups)
    assert {(5, e) for e in range(10, 10 + EXACT_AHEAD)} <= set(admin.lookups)
    counts.new_plan()
    assert counts.learner(P0, backlog_after(9, 300))(100).counts == (10,) * 11
    assert len(admin.lookups) == asked  # nothing left to ask when the next window plans


def test_a_background_lookup_that_failed_is_asked_again_when_needed():
    class Flaky(FakeAdmin):
        failures = 1

        def entry_headers(self, partition, ledger_id, entry_id):
            if entry_id == 12 and self.failures:
                self.failures -= 1
                raise RuntimeError("the broker restarted")
            return super().entry_headers(partition, ledger_id, entry_id)

    admin = Flaky([10] * 300)
    counts = EntryMessageCounts(admin)  # type: ignore[arg-type]
    counts.learner(P0, backlog_after(-1, 300))(100)
    counts.prefetch(P0, backlog_after(-1, 300), 10)
    counts.new_plan()
    assert counts.learner(P0, backlog_after(9, 300))(100).counts == (10,) * 11
