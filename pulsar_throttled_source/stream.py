"""Driver side: the stream reader's core, shared by the Spark-facing readers of each Spark line
(stream_spark42: admission control, 4.2+; stream_spark40: latestOffset() only, 4.0 and 4.1).

It only answers Spark's calls: offsets cross as JSON here, and every question goes to the query's
planner (planning/micro_batch_planner.py), built once by planner_wiring.py at the first planning call, in
the one long-lived Python process where Spark plans. Read tasks get pickled copies of a reader that never
planned: it carries the options only (docs/PROCESSES.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from .offsets import SourceOffset
from .options import SourceOptions
from .options.query_kinds import check_stream_options
from .planner_wiring import build_planner
from .planning.micro_batch_planner import MicroBatchPlanner
from .read_task import ReadTask
from .reading.read import read_ranges
from .schemas.columns import ValueSchema

# What an offset Spark hands over is, in the errors that a malformed one raises.
START_FROM_CHECKPOINT = "start offset (from the checkpoint)"
START_OF_BATCH, END_OF_BATCH = "start offset of the micro-batch", "end offset of the micro-batch"


class PulsarStreamReader(DataSourceStreamReader):
    """Everything but latestOffset, whose signature depends on the Spark line (see the module doc)."""

    # Where the query progress report goes: reportLatestOffset (4.2+), or, where Spark shows a Python
    # source nothing else (4.0, 4.1), also each planned end offset (offsets.py, "progress").
    progress_in_offset = False
    admission_control = True  # Spark passes latestOffset its start and read limit (4.2+; spark_support.py)

    def __init__(self, options: SourceOptions, clock: Callable[[], float] = time.time,
                 value_schema: ValueSchema | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        check_stream_options(options, self.admission_control)
        self.options = options
        self.value_schema = value_schema  # how read tasks decode payloads (None: raw bytes)
        self._clock, self._sleep = clock, sleep
        self._planner: MicroBatchPlanner | None = None  # built at the first planning call, where Spark plans
        self._last_planned: tuple[dict, SourceOffset] | None = None  # the last end offset handed to Spark, and parsed

    def __getstate__(self) -> dict:
        # Pickled into read tasks (and by any caller that pickles a planned reader): the options, never the planner.
        return {**self.__dict__, "_planner": None, "_last_planned": None}

    @property
    def planner(self) -> MicroBatchPlanner:
        if self._planner is None:
            self._planner = build_planner(self.options, self.value_schema, self._clock, self._sleep, self.progress_in_offset)
        return self._planner

    # -- offsets: SourceOffset inside, JSON only at Spark's calls ------------------------------
    def initialOffset(self) -> dict:
        return self.planner.initial_offset().to_json()

    def offset_of(self, value: dict, where: str) -> SourceOffset:
        """An offset Spark hands over, parsed: usually the end this reader planned last, which it keeps
        parsed (parsing and checking 1,000 positions again cost more than the plan)."""
        if self._last_planned is not None and value == self._last_planned[0]:
            return self._last_planned[1]
        return SourceOffset.from_json(value, where)

    def to_spark(self, offset: SourceOffset) -> dict:
        """An end offset as Spark stores it, remembered so that Spark's next start is not parsed again."""
        value = offset.to_json()
        self._last_planned = (value, offset)
        return value

    def reportLatestOffset(self) -> dict | None:
        return self._planner.report() if self._planner is not None else None

    # -- execution --------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self.planner.plan_tasks(self.offset_of(start, START_OF_BATCH), self.offset_of(end, END_OF_BATCH))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReadTask)
        return read_ranges(partition)

    def commit(self, end: dict) -> None:
        self.planner.commit(self.offset_of(end, "committed offset"))

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.stop()
