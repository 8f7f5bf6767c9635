"""The Spark-facing reader on PySpark 4.0 and 4.1, which have no admission control for Python
streaming sources: latestOffset() takes no arguments, so the reader keeps the batch's start itself.

What these versions offer, measured on 4.0.5 and 4.1.4:
  - on a fresh query Spark calls latestOffset() (then initialOffset()): the start is the initial offset;
  - on a restart Spark first calls partitions(end, end) with the last offset in its offset log
    (AcceptsLatestSeenOffset), and re-runs an unfinished batch with partitions(start, end): the
    start of the next batch is the end Spark last saw;
  - each later batch starts where the end this reader returned left off.
So processing-time triggers are throttled, exactly once and restartable as on 4.2+. Trigger.AvailableNow
and Trigger.Once call latestOffset() once and stop after that one batch: one quota's worth, not the
whole backlog (a WARN says so, naming catch_up.py: a processing-time trigger stopped once caught up).
What these versions cannot express (minEntriesPerTrigger) is refused by options/query_kinds.py.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition

from .console_log import enable_console_log
from .offsets import SourceOffset
from .planning.micro_batch_planner import Unchanged
from .planning.read_limit import BatchLimit
from .stream import END_OF_BATCH, START_OF_BATCH, PulsarStreamReader

log = logging.getLogger(__name__)

ONE_BATCH_TRIGGERS = (
    "PySpark {version} has no admission control for Python streaming sources: processing-time triggers are "
    "throttled, but Trigger.AvailableNow and Trigger.Once read one throttled micro-batch and stop (on 4.2+ "
    "AvailableNow reads the whole backlog in throttled batches). To catch up a backlog and stop, on every Spark "
    "line: pulsar_throttled_source.catch_up.catch_up(writer), a processing-time trigger stopped once caught up.")


class LatestOffsetStreamReader(PulsarStreamReader):
    progress_in_offset = True  # Spark shows these versions' sources nothing but their offsets
    admission_control = False
    _seen_end: SourceOffset | None = None  # the start of the next batch, once known
    _warned = False

    def latestOffset(self) -> dict:  # type: ignore[override]  # the 4.0/4.1 signature (typed against 4.2+)
        if not self._warned:
            self._warned = True
            import pyspark

            enable_console_log()  # Spark asks for this before anything else: the WARN must show
            log.warning(ONE_BATCH_TRIGGERS.format(version=pyspark.__version__))
        start = self._seen_end if self._seen_end is not None else self.planner.initial_offset()
        end = self.planner.plan_end(start, BatchLimit(max_entries=self.options.max_entries_per_trigger))
        self._seen_end = start if isinstance(end, Unchanged) else end
        return self.to_spark(self._seen_end)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        seen = self.offset_of(end, END_OF_BATCH)
        self._seen_end = seen  # a restart's latest seen offset (start == end) or a re-run batch
        return self.planner.plan_tasks(self.offset_of(start, START_OF_BATCH), seen)
