"""effectivelyOnce with batches (writing.batch_cuts): a task's rows sent by a fake producer that batches as
pulsar-client-cpp's ProducerImpl does (a batch cut before a row that does not fit batchingMaxMessages or
batchingMaxAllowedSizeInBytes, after a row that fills it, and on flush; a batch carries its first row's sequence id)
to a fake broker that deduplicates as Pulsar does (a batch whose sequence id is at or below the producer name's highest
persisted one is dropped whole). An attempt dies after some rows (its open batch never sent), a retry of the same
rows follows; every row must be persisted exactly once, and the batches must hold more than one row."""

from __future__ import annotations

import random
import time

import pulsar
import pytest

from pulsar_throttled_source.writing.batch_cuts import CutRule, TaskCuts
from pulsar_throttled_source.writing.confirmations import Confirmations
from pulsar_throttled_source.writing.producer_settings import BYTES_NEVER_CUT_BY_CLIENT

BATCH = 1 << 32  # ProducerIdentity's sequence ids: (batch id + 1) << 32 | the row's position in the task


class FakeBroker:
    """Per producer name: the highest persisted sequence id (a batch's first) and the rows persisted, in order."""

    def __init__(self) -> None:
        self.highest: dict[str, int] = {}
        self.rows: dict[str, list[int]] = {}
        self.batches: dict[str, list[int]] = {}  # name -> each persisted batch's size

    def publish(self, name: str, batch: list[int]) -> None:
        if batch[0] <= self.highest.get(name, -1):
            return  # a duplicate: dropped whole
        self.highest[name] = batch[0]
        self.rows.setdefault(name, []).extend(batch)
        self.batches.setdefault(name, []).append(len(batch))


class FakeProducer:
    """pulsar-client-cpp's batch container (BatchMessageContainerBase: hasEnoughSpace before a row, isFull after it),
    its publish delay off, as effectivelyOnce configures it."""

    def __init__(self, broker: FakeBroker, name: str, max_messages: int, max_bytes: int = BYTES_NEVER_CUT_BY_CLIENT) -> None:
        self.broker, self.name = broker, name
        self.max_messages, self.max_bytes = max_messages, max_bytes
        self.open: list[int] = []
        self.open_bytes = 0

    def last_sequence_id(self) -> int:
        return self.broker.highest.get(self.name, -1)

    def send(self, sequence_id: int, size: int) -> None:
        if not (len(self.open) < self.max_messages and self.open_bytes + size <= self.max_bytes):
            self.flush()
        self.open.append(sequence_id)
        self.open_bytes += size
        if len(self.open) >= self.max_messages or self.open_bytes >= self.max_bytes:
            self.flush()

    def flush(self) -> None:
        if self.open:
            self.broker.publish(self.name, self.open)
        self.open, self.open_bytes = [], 0


def attempt(broker: FakeBroker, rows: list[tuple[int, int]], rule: CutRule, lanes: int, die_after: int | None,
            name: str = "sink-0") -> int:
    """One attempt of a task: rows (sequence id, size) routed round robin to `lanes` producers, sent from the first
    row, skipping what the broker holds; dies (its open batches lost) after `die_after` rows handed over, else
    flushes. The rows it skipped."""
    cuts = TaskCuts(rule)
    producers = [FakeProducer(broker, f"{name}-{lane}{rule.tag}", rule.max_messages) for lane in range(lanes)]
    lane_cuts = [cuts.lane(p.last_sequence_id()) for p in producers]
    skipped = handed = 0
    for position, (sequence_id, size) in enumerate(rows):
        lane = position % lanes
        skip, cut = lane_cuts[lane].place(sequence_id, size)
        if skip:
            skipped += 1
            continue
        if die_after is not None and handed == die_after:
            return skipped  # the process dies: what the producers still hold is never sent
        assert cuts.held == sum(len(p.open) for p in producers)  # before the send: the rows the open batches hold
        producers[lane].send(sequence_id, size)
        lane_cuts[lane].sent()
        handed += 1
        if cut:
            producers[lane].flush()
        assert cuts.held == sum(len(p.open) for p in producers)  # the pacing's rows not in flight: exactly the open batches
    for p in producers:
        p.flush()
    return skipped


def persisted(broker: FakeBroker) -> list[int]:
    return sorted(s for rows in broker.rows.values() for s in rows)


@pytest.mark.parametrize("seed", range(40))
def test_a_retry_after_any_death_lands_every_row_once_in_batches(seed: int) -> None:
    rnd = random.Random(seed)
    rule = CutRule(rnd.choice([1, 2, 3, 7, 50]), rnd.choice([1, 64, 300, 10_000]))
    lanes, n = rnd.choice([1, 2, 4]), rnd.randrange(1, 300)
    rows = [(BATCH | i, rnd.choice([0, 1, 10, 40, 200])) for i in range(n)]
    broker = FakeBroker()
    for _ in range(rnd.randrange(0, 4)):  # attempts dying after a random number of rows sent, each from the previous one's state
        attempt(broker, rows, rule, lanes, rnd.randrange(0, n + 1))
    attempt(broker, rows, rule, lanes, None)
    assert persisted(broker) == [s for s, _ in rows]


def test_the_retry_skips_to_the_end_of_the_persisted_batch_that_holds_the_last_sequence_id() -> None:
    # One lane, batches of 4: the first attempt sends rows 0..9 and dies: batches 0-3 and 4-7 persisted, 8-9 lost.
    rows = [(BATCH | i, 10) for i in range(20)]
    broker, rule = FakeBroker(), CutRule(4, 1 << 20)
    attempt(broker, rows, rule, 1, die_after=10)
    assert broker.highest["sink-0-0-b4x1048576"] == BATCH | 4  # the first id of the last persisted batch, not 7
    assert attempt(broker, rows, rule, 1, None) == 8  # rows 0..7 skipped (4..7 above last_sequence_id: inside its batch)
    assert persisted(broker) == [s for s, _ in rows]
    assert broker.batches["sink-0-0-b4x1048576"] == [4, 4, 4, 4, 4]  # the retry's batches cut where the first attempt's were


def test_a_batch_is_cut_after_the_row_that_reaches_the_byte_limit_whatever_the_next_row() -> None:
    # Cuts depend on the rows up to the cut: a row that failed on the first attempt (here: bigger then) and changed on
    # the retry moves no cut before it. The first attempt dies when it reaches row 5.
    sizes = [30, 30, 50, 10, 10, 10, 10, 10]
    first = [(BATCH | i, 1000 if i == 5 else s) for i, s in enumerate(sizes)]
    retry = [(BATCH | i, s) for i, s in enumerate(sizes)]
    broker, rule = FakeBroker(), CutRule(100, 100)
    attempt(broker, first, rule, 1, die_after=5)
    assert broker.batches["sink-0-0-b100x100"] == [3]  # rows 0-2 reach 100 bytes: cut after row 2 (a flush)
    attempt(broker, retry, rule, 1, None)
    assert persisted(broker) == [s for s, _ in retry] and broker.batches["sink-0-0-b100x100"] == [3, 5]


def test_a_last_sequence_id_inside_a_batch_skips_only_up_to_it_and_never_loses_a_row() -> None:
    # The broker holds rows up to id 5 from attempts under another rule (unbatched): a batch of 4 holds ids 4..7, so the
    # rows above 5 are sent, the next starting a batch of its own; nothing lost.
    rule = CutRule(4, 1 << 20)
    lane = TaskCuts(rule).lane(BATCH | 5)
    placed = [lane.place(BATCH | i, 1) for i in range(12)]
    assert [skip for skip, _ in placed] == [True] * 6 + [False] * 6
    broker = FakeBroker()
    producer = FakeProducer(broker, "p", 4)
    for i, (skip, cut) in enumerate(placed):
        if not skip:
            producer.send(BATCH | i, 1)
            if cut:
                producer.flush()
    producer.flush()
    assert broker.batches["p"] == [4, 2]  # ids 6..9 (re-based at the first row above 5), then 10..11


def test_unbatched_is_a_batch_of_one_and_skips_the_rows_at_or_below_the_last_id() -> None:
    lane = TaskCuts(CutRule(1, 1)).lane(BATCH | 3)
    assert [lane.place(BATCH | i, 100) for i in range(6)] == [(True, False)] * 4 + [(False, False)] * 2


@pytest.mark.timeout(20)  # counted wrong, the pace would wait for answers that never come
def test_the_pacing_leaves_rows_in_open_batches_out_of_what_is_in_flight() -> None:
    cuts = TaskCuts(CutRule(1000, 1 << 20))
    lane = cuts.lane(-1)
    answers = Confirmations(send_timeout_s=30.0, held=cuts)
    for i in range(1000):  # rows in a batch not cut yet: sending never waits for the broker (none is in flight)
        lane.place(BATCH | i, 10)
        answers.sending()  # the 1000th row too: the one whose send makes the client cut the batch
        lane.sent()
    assert answers.pending == 1000 and cuts.held == 0  # then cut: the batch's rows are in flight


def test_a_failed_task_waits_for_the_sends_in_flight_but_not_for_rows_in_batches_it_never_cuts() -> None:
    cuts = TaskCuts(CutRule(1000, 1 << 20))
    lane = cuts.lane(-1)
    answers = Confirmations(send_timeout_s=30.0, held=cuts)
    for i in range(5):  # five rows in an open batch: a task that does not fail flushes it, then waits for them
        lane.place(BATCH | i, 10)
        answers.sending()
        lane.sent()
    answers.sending()  # a row of another lane, sent in a batch of its own
    assert answers.wait(0.05) is False  # unanswered, and no error: every send is waited for
    answers.callback("t-partition-1")(pulsar.Result.Timeout, None)  # that batch failed
    started = time.monotonic()
    assert answers.wait(30.0) is True and time.monotonic() - started < 5  # the open batch is never sent: not waited for
