"""The `pulsar-throttled` data source: name, schema, readers and writers. Glue only."""

from __future__ import annotations

from .spark_support import check_spark, has_admission_control

check_spark()  # before anything that needs Python data sources: one clear error instead of an ImportError

from functools import cached_property  # noqa: E402

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType  # noqa: E402

from .metadata.service_tls import check_service_certificate  # noqa: E402
from .options import parse_options  # noqa: E402
from .options.aliases import describe_names  # noqa: E402
from .options.query_kinds import check_spark_line  # noqa: E402
from .options.source_options import SourceOptions  # noqa: E402
from .options.spec import describe_options  # noqa: E402
from .reading.read_path import describe_read_path  # noqa: E402
from .schemas.columns import RAW_SPARK_SCHEMA_DDL, ValueSchema  # noqa: E402
from .schemas.topic_schema import value_schema_for  # noqa: E402


class PulsarThrottledDataSource(DataSource):
    # help() shows every option: the docstring is generated from the spec table, as the option reference (docs/reference/options.md) is.
    __doc__ = f"""A throttled Apache Pulsar source: the data source named "pulsar-throttled".

spark.readStream.format("pulsar-throttled").option("topic", ...).load(): a stream, its micro-batches throttled
by the quotas below; spark.read.format("pulsar-throttled")...load(): a batch query, read once.
df.write.format("pulsar-throttled").option("topic", ...).mode("append").save() and df.writeStream.format(...)
write to Pulsar (docs/guides/writing.md: columns, options, guarantees).

Options:
{describe_options()}

Option names of Spark's Kafka source and of pulsar-spark:
{describe_names()}
"""

    # Spark constructs the source alike for a read and a write: each parses the options as its kind on first use,
    # a read at load() (schema()), a write when it starts (writer(), streamWriter()).
    @cached_property
    def parsed(self) -> SourceOptions:
        """The options of a read, validated (a write's own options are refused by name)."""
        from .writing.write_options import refuse_write_options

        refuse_write_options(self.options)
        parsed = parse_options(self.options)
        check_spark_line(parsed, has_admission_control())  # what PySpark 4.0/4.1 cannot express fails here too
        return parsed

    @classmethod
    def name(cls) -> str:
        return "pulsar-throttled"

    def schema(self) -> str | StructType:
        o = self.parsed
        if o.read_path == "native":  # fail at load, naming why, rather than in every read task
            describe_read_path(o.read_path, o.client_kwargs, o.reader_kwargs)
        check_service_certificate(o.service_url, dict(o.client_kwargs))  # a refused certificate: now, not as a reader's retries
        value = self._value_schema()
        return RAW_SPARK_SCHEMA_DDL if value is None else value.spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        """spark.read: the messages between startingOffsets and endingOffsets, once (batch.py)."""
        from .batch import PulsarBatchReader

        return PulsarBatchReader(self.parsed, self._checked_value_schema(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        value = self._checked_value_schema(schema)
        if has_admission_control():
            from .stream_spark42 import AdmissionControlStreamReader

            return AdmissionControlStreamReader(self.parsed, value_schema=value)
        from .stream_spark40 import LatestOffsetStreamReader

        return LatestOffsetStreamReader(self.parsed, value_schema=value)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """df.write (append): each task's rows sent and confirmed before it ends (writing/)."""
        from .writing.writers import PulsarBatchWriter

        return PulsarBatchWriter(*self._write_plan(schema, overwrite, stream=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """df.writeStream: each micro-batch's rows sent and confirmed before its tasks end (writing/)."""
        from .writing.writers import PulsarStreamWriter

        return PulsarStreamWriter(*self._write_plan(schema, overwrite, stream=True))

    def _write_plan(self, schema: StructType, overwrite: bool, stream: bool) -> tuple:
        from .writing.writers import write_plan

        return write_plan(self.options, schema, overwrite, stream)

    def _checked_value_schema(self, schema: StructType) -> ValueSchema | None:
        value = self._value_schema()
        if value is not None and schema != value.spark_schema():
            raise ValueError("The topic's schema changed while the query was being defined, or a schema was given "
                             "with .schema(...): define the query again (the source decides its columns from the topic's "
                             "schema; decodeSchema=false reads raw bytes).")
        return value

    def _value_schema(self) -> ValueSchema | None:
        """The topics' schema, looked up once per instance (None: raw bytes)."""
        if not hasattr(self, "_value"):
            self._value = value_schema_for(self.parsed)
        return self._value
