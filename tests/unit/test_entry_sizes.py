"""What precise mode learns of the entries it is about to admit, on a fake admin API that answers
entry lookups the way the broker does (per-entry headers)."""

from __future__ import annotations

import random
from concurrent.futures import Executor, Future

from builders import P0, P1, backlog_after, entries_holding
from fakes import FakeAdmin, FakeClock, LookupPools

from pulsar_throttled_source.metadata.backlog_estimates import ESTIMATE_REFRESH_S
from pulsar_throttled_source.metadata.backlog_sizes import BacklogSizes
from pulsar_throttled_source.metadata.lookup_scheduler import LOOKUPS_PER_PLAN, WAIT_ALL_UP_TO, wait_for_answer
from pulsar_throttled_source.metadata.window_pricing import EXACT_AHEAD, HEAD_CHUNK, REFINE_LOOKUPS, SAMPLES


def test_entries_a_quota_could_admit_are_counted_exactly_then_sampled_and_each_looked_up_once():
    admin = FakeAdmin([1] * 200 + [10] * 300 + [20] * 500)
    counts = BacklogSizes(admin)  # type: ignore[arg-type]
    counts.new_plan()
    known = counts.learner(P0, backlog_after(199, 1000))(100, 0.0).msgs  # the batched part, quota 100
    assert known.exact == (10,) * 11 and known.total(10) == 100  # ten entries hold the quota, and one more
    assert sorted(admin.lookups) == [(5, e) for e in range(200, 200 + HEAD_CHUNK)]  # no further than that
    many = counts.learner(P0, backlog_after(199, 1000))(4_000, 0.0).msgs  # past the exact part: sampled
    assert len(many.exact) == EXACT_AHEAD and many.knots and many.total(300) == 3_000  # the 10s end at entry 300
    assert many.total(350) == 3_000 + 50 * 20  # ... where the 20s begin: found, not averaged over
    asked = len(admin.lookups)
    assert asked < EXACT_AHEAD + SAMPLES + REFINE_LOOKUPS
    for _ in range(50):  # idle polls, and the next window from the same start
        counts.new_plan()
        assert counts.learner(P0, backlog_after(199, 1000))(100, 0.0).msgs.exact == (10,) * 11
        assert counts.learner(P0, backlog_after(199, 1000))(4_000, 0.0).msgs.total(350) == 4_000
    assert len(admin.lookups) == asked and len(set(admin.lookups)) == len(admin.lookups)


def test_a_window_crossing_a_change_of_batching_is_priced_on_both_sides_of_it():
    # Batched history, then a producer that stopped batching; and the other way round.
    for history, then in (([10] * 150, [1] * 3_000), ([1] * 1_000, [10] * 500)):
        admin = FakeAdmin(history + then)
        counts = BacklogSizes(admin)  # type: ignore[arg-type]
        truth = [sum(admin.counts[:k]) for k in range(len(admin.counts) + 1)]
        for start, quota in ((-1, 2_000), (99, 500), (-1, 3_000), (899, 500), (40, 1_200)):
            counts.new_plan()
            estimate = counts.learner(P0, backlog_after(start, len(admin.counts)))(quota, 0.0).msgs
            admitted = entries_holding(estimate, quota)
            read = truth[start + 1 + admitted] - truth[start + 1]
            assert abs(read - quota) <= 10, (history[0], start, quota, read)  # one entry at most
        assert len(admin.lookups) < 600  # nowhere near one lookup per entry read


def test_entries_of_varying_batches_within_a_window_are_all_counted():
    rng = random.Random(3)
    admin = FakeAdmin([rng.randint(8, 12) for _ in range(2_000)])
    counts = BacklogSizes(admin)  # type: ignore[arg-type]
    for start in range(-1, 1_500, 49):
        counts.new_plan()
        estimate = counts.learner(P0, backlog_after(start, 2_000))(500, 0.0).msgs
        admitted = entries_holding(estimate, 500)
        assert 488 < sum(admin.counts[start + 1:start + 1 + admitted]) <= 500


def test_what_the_query_moved_past_is_forgotten_and_the_next_entries_learned():
    admin = FakeAdmin([10] * 40)
    counts = BacklogSizes(admin)  # type: ignore[arg-type]
    counts.new_plan()  # as the planner does: a plan over few partitions waits for its lookups
    counts.learner(P0, backlog_after(-1, 40))(50, 0.0)
    counts.learner(P0, backlog_after(4, 40))(50, 0.0)  # five entries read: five more to learn
    assert sorted(admin.lookups) == [(5, e) for e in range(HEAD_CHUNK + 5)]
    assert set(counts.lookups.known(P0)) == {(5, e) for e in range(5, HEAD_CHUNK + 5)}


def test_the_same_question_over_the_same_entries_is_answered_without_work_until_more_is_known():
    admin, pools = FakeAdmin([10] * 100 + [30] * 100), LookupPools()
    counts = BacklogSizes(admin, pool=pools)  # type: ignore[arg-type]
    backlog = backlog_after(-1, 200)
    counts.new_plan()
    first = counts.learner(P0, backlog)(5_000, 0.0)  # reaches past the head: samples and bisection
    asked = len(admin.lookups)
    counts.new_plan()
    again = counts.learner(P0, backlog)(5_000, 0.0)
    assert len(admin.lookups) == asked  # everything it needed was known
    assert again == first and again.msgs.total(100) == 1_000 and again.msgs.total(110) == 1_300
    counts.prefetch(P0, backlog, 150)  # a batch planned up to entry 150: its next window is looked up
    for future in pools.settle():
        future.result()
    counts.new_plan()
    informed = counts.learner(P0, backlog)(5_000, 0.0)  # what became known is used, not the old answer
    assert informed != first and {i for i, _ in informed.msgs.knots} > {i for i, _ in first.msgs.knots}
    asked = len(admin.lookups)
    assert counts.learner(P0, backlog)(5_000, 0.0) == informed and len(admin.lookups) == asked


def test_lookups_stop_at_the_budget_and_at_a_deleted_entry():
    admin = FakeAdmin([1] * 1000)
    counts = BacklogSizes(admin)  # type: ignore[arg-type]
    counts.new_plan()
    partitions = [f"{P0[:-1]}{i}" for i in range(20)]
    learned = [counts.learner(p, backlog_after(-1, 1000))(10_000, 0.0) for p in partitions]
    assert len(admin.lookups) == LOOKUPS_PER_PLAN and learned[-1].msgs is None
    # nothing known of it yet: the engine reads one entry
    counts.new_plan()
    assert len(counts.learner(partitions[-1], backlog_after(-1, 1000))(10, 0.0).msgs.exact) == 11
    counts.new_plan()
    for p in partitions[:-1]:  # the budget goes to others: the partition keeps its last average
        counts.learner(p, backlog_after(99, 1000))(10_000, 0.0)
    later = counts.learner(partitions[-1], backlog_after(499, 1000))(10, 0.0).msgs
    assert later.exact == () and later.per_entry == 1.0 and later.total(10) == 10
    gone = BacklogSizes(FakeAdmin([1] * 10, gone_from=3))  # type: ignore[arg-type]
    gone.new_plan()
    assert gone.learner(P0, backlog_after(-1, 10))(10, 0.0).msgs.exact == (1, 1, 1)


def test_the_next_window_is_looked_up_in_the_background_once_a_batch_is_planned():
    admin, pools = FakeAdmin([10] * 300), LookupPools()
    counts = BacklogSizes(admin, pool=pools)  # type: ignore[arg-type]
    counts.new_plan()
    counts.learner(P0, backlog_after(-1, 300))(100, 0.0)
    counts.prefetch(P0, backlog_after(-1, 300), 10)  # the batch admitted ten entries
    for lookup in pools.settle():  # what runs while the batch runs
        lookup.result()
    asked = len(admin.lookups)
    assert {(5, e) for e in range(10, 10 + EXACT_AHEAD)} <= set(admin.lookups)
    counts.new_plan()
    assert counts.learner(P0, backlog_after(9, 300))(100, 0.0).msgs.exact == (10,) * 11
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
    counts = BacklogSizes(admin)  # type: ignore[arg-type]
    counts.new_plan()
    counts.learner(P0, backlog_after(-1, 300))(100, 0.0)
    counts.prefetch(P0, backlog_after(-1, 300), 10)
    counts.new_plan()
    assert counts.learner(P0, backlog_after(9, 300))(100, 0.0).msgs.exact == (10,) * 11


def test_a_byte_quota_is_priced_by_the_stored_size_of_the_entries_it_admits():
    # The ledger's average says 100 bytes per entry; its first entries are large batches.
    sizes = [2_000] * 50 + [50] * 950
    admin = FakeAdmin([20] * 1_000, sizes=sizes)
    learned = BacklogSizes(admin)  # type: ignore[arg-type]
    for start, quota in ((-1, 10_000), (44, 12_000), (44, 40_000), (199, 5_000)):
        learned.new_plan()
        estimate = learned.learner(P0, backlog_after(start, 1_000))(0.0, quota).bytes
        admitted = entries_holding(estimate, quota)
        read = sum(sizes[start + 1:start + 1 + admitted])
        assert quota - 2_000 < read <= quota, (start, quota, read)
    unknown = BacklogSizes(FakeAdmin([20] * 100))  # type: ignore[arg-type]
    unknown.new_plan()
    assert unknown.learner(P0, backlog_after(-1, 100))(0.0, 1_000).bytes.total(10) == 1_000  # ledger average


class BusyBroker(Executor):
    """The lookup pool of a busy broker: entries from `slow_from` on are answered only when
    answer() is called; the others at once. No threads, so nothing to wait for but the test."""

    def __init__(self, slow_from: int) -> None:
        self.slow_from = slow_from
        self.held: list[tuple[Future, object, tuple]] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        if args[-1] >= self.slow_from:  # (topic, ledger, entry): held until answer()
            self.held.append((future, fn, args))
        else:
            future.set_result(fn(*args))
        return future

    def answer(self) -> None:
        for future, fn, args in self.held:
            future.set_result(fn(*args))  # type: ignore[operator]
        self.held.clear()


def test_a_plan_waits_for_lookups_no_longer_than_its_deadline_and_admits_no_further_than_known():
    admin = FakeAdmin([10] * 100)
    broker, clock = BusyBroker(slow_from=100), FakeClock(0.0)
    sizes = BacklogSizes(admin, wait_s=0.1, clock=clock, waiter=clock.wait, pool=lambda: broker)  # type: ignore[arg-type]
    try:
        sizes.new_plan(partitions=WAIT_ALL_UP_TO)  # a few partitions: all lookups are waited for
        learned = sizes.learner(P0, backlog_after(49, 100))(50, 0.0)
        assert learned.reach is None and learned.msgs is not None and learned.msgs.exact == (10,) * 6
        broker.slow_from = 69  # the first chunk (50-65) is known: of the next, 66-68 come fast
        sizes.new_plan(partitions=WAIT_ALL_UP_TO + 1)  # many: no longer than the deadline
        t0 = clock.now
        learned = sizes.learner(P0, backlog_after(49, 100))(200, 0.0)
        assert clock.now - t0 <= 0.1  # the deadline, not the broker
        assert learned.msgs is not None and learned.msgs.exact == (10,) * 19 and learned.reach == 19
        assert sizes.lookups.unanswered == len(broker.held) > 0  # what a test waits for instead of a clock
        broker.answer()  # the answers come in while the batch runs
        assert sizes.lookups.unanswered == 0
        sizes.new_plan(partitions=WAIT_ALL_UP_TO + 1)
        learned = sizes.learner(P0, backlog_after(49, 100))(200, 0.0)
        assert learned.reach is None and learned.msgs is not None and learned.msgs.exact == (10,) * 21  # 200 messages, and one more
        assert len(set(admin.lookups)) == len(admin.lookups)  # nothing asked twice
    finally:
        broker.answer()
        sizes.close()


def test_an_estimate_is_the_last_learned_figure_of_the_partition_or_its_topic_and_is_refreshed_by_sampling():
    admin = FakeAdmin([4] * 50 + [9] * 50)
    clock, pools = FakeClock(0.0), LookupPools()
    sizes = BacklogSizes(admin, clock=clock, pool=pools)  # type: ignore[arg-type]
    try:
        sizes.new_plan()
        assert sizes.estimate(P0, backlog_after(9, 50)) is None  # nothing known yet ...
        pools.settle()  # ... its newest entry is looked up in the background
        assert sizes.estimate(P0, backlog_after(9, 50)) is not None
        assert (5, 49) in admin.lookups
        estimate = sizes.estimate(P0, backlog_after(9, 50))
        assert estimate is not None and estimate.msgs is not None and estimate.msgs.per_entry == 4.0
        sibling = sizes.estimate(P1, backlog_after(9, 50))  # another partition of the topic: its figure
        assert sibling is not None and sibling.msgs is not None and sibling.msgs.per_entry == 4.0
        asked = len(admin.lookups)
        for _ in range(10):  # within ESTIMATE_REFRESH_S nothing more is asked for P0
            sizes.estimate(P0, backlog_after(9, 100))
        assert len([a for a in admin.lookups[asked:] if a != (5, 49)]) == 0
        clock.advance(ESTIMATE_REFRESH_S)  # the producer has batched 9 per entry since: seen once sampled
        sizes.new_plan()
        sizes.estimate(P0, backlog_after(9, 100))  # due: samples the newest entry in the background
        pools.settle()
        estimate = sizes.estimate(P0, backlog_after(9, 100))
        assert estimate is not None and estimate.msgs is not None and estimate.msgs.per_entry == 9.0
        assert (5, 99) in admin.lookups
    finally:
        sizes.close()


def test_the_real_waiter_gives_up_at_its_timeout_and_takes_a_cancelled_lookup_as_answered():
    unanswered, answered, cancelled = Future(), Future(), Future()
    answered.set_result({})
    cancelled.cancel()
    assert not wait_for_answer(unanswered, 0.0)  # the deadline has come: left to a later call
    assert wait_for_answer(answered, 0.0) and wait_for_answer(answered, None)
    assert wait_for_answer(cancelled, None)  # closed: asked again by the planning call itself


def test_lookups_record_their_latency_and_failures_for_adaptive_throttling():
    from concurrent.futures import ThreadPoolExecutor

    from pulsar_throttled_source.metadata.lookup_scheduler import LookupScheduler
    from pulsar_throttled_source.metadata.stress_readings import LatencySamples

    samples = LatencySamples()
    admin = FakeAdmin([1, 1, 1])
    lookups = LookupScheduler(admin, latency=samples, pool=lambda: ThreadPoolExecutor(1))  # type: ignore[arg-type]
    lookups.new_plan(1)
    lookups.follow(P0, backlog_after(-1, 3))
    lookups.look_up(P0, [(5, 0), (5, 1)], wait=True)
    durations, failures = samples.drain()
    assert len(durations) == 2 and all(d >= 0 for d in durations) and failures == 0

    def broken(partition, ledger_id, entry_id):
        raise ConnectionError("broker restarting")
    admin.entry_headers = broken  # type: ignore[method-assign]
    future = lookups.start_one(P0, (5, 2))
    assert future is not None and isinstance(future.exception(timeout=5), ConnectionError)
    assert samples.drain() == ([], 1)
    lookups.close()
