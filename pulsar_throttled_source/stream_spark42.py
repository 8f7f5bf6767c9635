"""The Spark-facing reader on PySpark 4.2+: Spark's admission control for Python streaming sources.

Spark passes each latestOffset() call its start and read limit, and Trigger.AvailableNow is
supported natively (the query reads what was there when it started, in throttled batches).
"""

from __future__ import annotations

from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from .planning.micro_batch_planner import Unchanged
from .planning.read_limit import UNLIMITED_ROWS, from_spark_limit
from .stream import START_FROM_CHECKPOINT, PulsarStreamReader


class AdmissionControlStreamReader(PulsarStreamReader, SupportsTriggerAvailableNow):
    def getDefaultReadLimit(self) -> ReadLimit:
        # Never ReadAllAvailable: that one is reserved for Trigger.Once, read unthrottled.
        return ReadMaxRows(self.options.max_entries_per_trigger or UNLIMITED_ROWS)

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.fix_available_now_target()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        end = self.planner.plan_end(self.offset_of(start, START_FROM_CHECKPOINT), from_spark_limit(limit))
        # Unchanged: Spark's own start back, as it gave it (it compares offsets as JSON strings).
        return start if isinstance(end, Unchanged) else self.to_spark(end)
