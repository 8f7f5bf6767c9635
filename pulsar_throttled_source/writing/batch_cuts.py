"""deliveryGuarantee=effectivelyOnce with batches: where each producer's batches are cut, and which rows a retry skips.

pulsar-client (C++, every sender of the sink) gives a batch its first message's sequence id only, so the broker knows
a batch by that id, and a producer's `last_sequence_id()` after batched sends is the first id of the last batch it
persisted. A retry is exact only when its batches are cut at the same rows as the first attempt's. So the cuts are a
function of the rows alone, per producer (one per partition a task writes), counted from the first row the producer
is given (the task's first, or where the native sender handed the task over):

- a batch ends after CutRule.max_messages rows (the client's own cut: batchingMaxMessages), or after the row that
  brings its payloads to CutRule.max_bytes (the sender's cut: a flush). Both are decided by the rows up to the cut,
  never by the next one or by time (the publish delay is off), so rows an attempt never persisted (a row that
  failed, with whatever payload) do not move the cuts before them;
- a row is skipped when its batch starts at or below L = last_sequence_id() (the batches the broker holds), that is
  when its id is at most L or its batch starts at L. Should L fall inside a batch (an attempt cut elsewhere), only the
  rows up to L are skipped and the next row starts a batch: rows are sent twice then, never lost.

`held` counts the rows sent into batches not cut yet (they wait for the sender, not the broker): the senders' pacing
leaves them out of what is in flight.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_PUBLISH_DELAY_MS = 365 * 24 * 3600 * 1000  # the client's time cut, effectively never (a year; fits its timer)


@dataclass(frozen=True)
class CutRule:
    """A batch's rows at most (1: unbatched) and the payload bytes after which it is cut."""

    max_messages: int
    max_bytes: int

    @property
    def batched(self) -> bool:
        return self.max_messages > 1

    @property
    def tag(self) -> str:
        """The rule in a producer's name: an attempt under another rule (another batch size, or the unbatched sends
        before batching) is another producer to the broker, so its sequence ids never meet this rule's skips."""
        return f"-b{self.max_messages}x{self.max_bytes}" if self.batched else ""


class TaskCuts:
    """One task's producers' cuts (or one native-to-Python hand-over's part) and the rows they hold."""

    def __init__(self, rule: CutRule) -> None:
        self.rule = rule
        self.held = 0  # rows sent into batches not cut yet, over every lane

    def lane(self, last_persisted: int) -> LaneCuts:
        return LaneCuts(self, last_persisted)


class LaneCuts:
    """One producer's batches: the open batch's rows, payload bytes and first sequence id."""

    __slots__ = ("task", "last", "count", "bytes", "first", "held", "closes")

    def __init__(self, task: TaskCuts, last_persisted: int) -> None:
        self.task = task
        self.last = last_persisted
        self.count = self.bytes = self.held = 0
        self.first = -1
        self.closes = False  # the row placed last ends its batch

    def place(self, sequence_id: int, size: int) -> tuple[bool, bool]:
        """The next row of this producer: (skip it, flush after sending it: the sender cuts the batch there). A row sent
        is then counted by sent(), after the send (before it, the rows in its batch wait for it, not for the broker)."""
        last = self.last
        if self.count and sequence_id > last and self.first < last:
            self.count = self.bytes = 0  # the batch holding L was cut elsewhere: the first row above L starts a batch
        if not self.count:
            self.first = sequence_id
        skip = sequence_id <= last or self.first == last
        self.count += 1
        self.bytes += size
        rule = self.task.rule
        self.closes = self.count >= rule.max_messages or self.bytes >= rule.max_bytes
        if not self.closes:
            return skip, False
        flush = not skip and self.count < rule.max_messages  # at max_messages the client cuts it itself
        self.count = self.bytes = 0
        return skip, flush

    def sent(self) -> None:
        """The row placed last was handed to the producer: held in its batch until the batch is cut."""
        if self.closes:
            self.task.held -= self.held
            self.held = 0
        else:
            self.held += 1
            self.task.held += 1
