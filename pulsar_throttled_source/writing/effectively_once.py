"""deliveryGuarantee=effectivelyOnce: every row persisted once although tasks and micro-batches run again, on
the broker's message deduplication (Pulsar's Python client has no transactions).

- Producer names are stable per write and Spark partition: `<sinkId or the query's id>-<partition>` and the batch cut
  rule's tag (writing.batch_cuts), so a retried task, or a micro-batch run again after a restart, writes as the same
  producer; a second live attempt of the same task is refused by the broker (a name is connected once per topic).
- A row's sequence id is `(batchId + 1) << 32 | its position in the task`: increasing in the order a producer sends,
  across micro-batches too (a batch write is batch 0). Executors read the micro-batch's id from the task's local
  property `streaming.sql.batchId` (as PySpark's own foreach sink does) and the query's id from `sql.streaming.queryId`.
- When a producer opens, the broker says the highest sequence id it persisted for that name
  (`last_sequence_id()`; with batches: the first id of the last batch it persisted): the rows of the batches it
  holds are skipped (writing.batch_cuts), the rest sent; what is resent anyway is dropped by the broker. This needs the same rows in the same order on a retry (docs/guides/writing.md, "Guarantees").
- Deduplication must be on for every target topic: checked at the write's start (a stream's: when Spark plans a
  micro-batch, a topic found deduplicating asked again after DEDUP_RECHECK_S) for the `topic` option, and by
  each task for a topic column's topics (deduplication_error names the topic and the admin command).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..admin_endpoint import AdminEndpoint
from ..metadata.admin import PulsarAdmin
from ..topics import TopicName
from .recent_answers import RecentAnswers

GUARANTEES = ("atLeastOnce", "effectivelyOnce")
ROW_BITS = 32  # a task writes fewer than 2^32 rows per micro-batch; batch ids stay under 2^31


@dataclass(frozen=True)
class ProducerIdentity:
    """One task's producers (one per partition topic, all of one name) and where its sequence ids start."""

    name: str
    batch_id: int

    def sequence_id(self, position: int) -> int:
        return (self.batch_id + 1) << ROW_BITS | position


def task_identity(sink_id: str | None, task_partition: int, tag: str = "") -> ProducerIdentity:
    """The producer name and batch of the running task, from the sink's id or the query's (local properties); `tag`:
    the batch cut rule's (batch_cuts.CutRule.tag)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = context.getLocalProperty("streaming.sql.batchId") if context else None
    prefix = sink_id or (context.getLocalProperty("sql.streaming.queryId") if context else None)
    if not prefix:
        raise ValueError("deliveryGuarantee=effectivelyOnce needs option 'sinkId' for a batch write (df.write): a name of "
                         "this write's own, the same when it is run again, which names its producers.")
    return ProducerIdentity(f"{prefix}-{task_partition}{tag}", int(batch) if batch else 0)


def deduplication_error(admin: PulsarAdmin, topic: TopicName) -> str | None:
    """Why `topic` cannot be written effectively once (deduplication off, or the topic missing), or None."""
    try:
        enabled = admin.deduplication_enabled(topic)
    except Exception as e:
        return (f"Option 'deliveryGuarantee'=effectivelyOnce: cannot read whether topic {topic} deduplicates messages ({e}); "
                "it must exist and the admin API must answer at option 'admin.url'.")
    if enabled:
        return None
    return (f"Option 'deliveryGuarantee'=effectivelyOnce needs message deduplication on topic {topic}, and it is off. Turn it "
            f"on: pulsar-admin topics set-deduplication --enable {topic} (or pulsar-admin namespaces set-deduplication "
            f"--enable {topic.namespace_name}), or write with deliveryGuarantee=atLeastOnce.")


DEDUP_RECHECK_S = 300.0  # a topic found deduplicating is asked again after this: a policy turned off mid-query shows up
_CHECKED: RecentAnswers[tuple[str, TopicName], bool] = RecentAnswers()  # (admin URL, topic) found deduplicating


def check_deduplication(endpoint: AdminEndpoint, topics: list[TopicName], clock: Callable[[], float] = time.monotonic) -> None:
    """Raise, naming the topic and the admin command, unless every topic deduplicates. A topic found deduplicating is
    not asked again by this process for DEDUP_RECHECK_S: Spark asks for a stream's writer (where this runs) at every
    micro-batch, twice (its planning and its commit), and every task of a topic column checks its topics."""
    now = clock()
    todo = [t for t in topics if not _CHECKED.get((endpoint.url, t.base), now, DEDUP_RECHECK_S)]
    if not todo:
        return
    admin = PulsarAdmin.at(endpoint, retry_timeout_s=0.0)
    try:
        for topic in todo:
            error = deduplication_error(admin, topic.base)
            if error:
                raise ValueError(error)
            _CHECKED.put((endpoint.url, topic.base), now, True)
    finally:
        admin.close()
