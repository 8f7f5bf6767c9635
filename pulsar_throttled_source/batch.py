"""The Spark-facing reader of a batch query: `spark.read.format("pulsar-throttled")`.

Reads the messages between `startingOffsets` (or `startingTime`) and `endingOffsets` (or `endingTime`) once, split into
read tasks as a stream's micro-batch is (`maxEntriesPerTask`), with the same columns, decoding,
chunked and transactional handling and data-loss rules: planned by planning/batch_range.py.

Quotas and trigger limits throttle a stream's micro-batches; a batch query has one batch, read at
once, so they are refused with an error that says so (options/query_kinds.py; a throttled backfill is a stream
with Trigger.AvailableNow).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .metadata.admin import PulsarAdmin
from .metadata.catalog import CatalogSettings, PartitionCatalog
from .options import SourceOptions
from .options.query_kinds import check_batch_options
from .planning.batch_range import plan_batch
from .read_task import PartitionRange
from .reading.read import read_range
from .schemas.columns import ValueSchema
from .schemas.schema_guard import TopicSchemaGuard


class PulsarBatchReader(DataSourceReader):
    """partitions(): the query's read tasks, planned once on the driver; read(): one task, on an executor."""

    def __init__(self, options: SourceOptions, value_schema: ValueSchema | None = None) -> None:
        check_batch_options(options)
        self.options = options
        self.value_schema = value_schema

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        admin = PulsarAdmin.for_planning(o)
        guard = TopicSchemaGuard(admin, self.value_schema).check if o.decode_schema else None
        # With the publish counters: their messages per entry size the read tasks' receiver queues (reading/receiver_queue.py).
        catalog = PartitionCatalog(admin, CatalogSettings.of(o, streaming=False), on_topics=guard)
        try:
            return plan_batch(o, catalog, admin, o.read_task_config(self.value_schema))
        finally:
            catalog.close()
            admin.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PartitionRange):
            return iter(())  # an empty range: PySpark still runs one task, with a partition of its own
        return read_range(partition)
