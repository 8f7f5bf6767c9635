"""The Spark application tests/spark_class_archive.py runs once per PySpark installation with
-XX:ArchiveClassesAtExit: what the suite's applications do, without a broker (a Python data source read in a batch
query and in a stream to a Parquet file sink and foreachBatch, a listener, Arrow both ways), so that the archive
holds the classes their starts and first queries load. Imports only PySpark and what it needs: it runs in the
compat venvs' Pythons too. Run as: python spark_archive_workload.py WORKDIR
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming import StreamingQueryListener

ROWS = 30


class _Reader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        for n in range(partition.value, ROWS, 2):
            yield (f"m{n}".encode(), n)


class _StreamReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, *_: object) -> dict:  # 4.2+ may pass (start, limit)
        return {"n": ROWS}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        first, end = partition.value
        for n in range(first, end):
            yield (f"m{n}".encode(), n)


class _Source(DataSource):
    @classmethod
    def name(cls) -> str:
        return "archive-workload"

    def schema(self) -> str:
        return "value binary, n long"

    def reader(self, schema: object) -> DataSourceReader:
        return _Reader()

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return _StreamReader()


class _Listener(StreamingQueryListener):
    def onQueryStarted(self, event: object) -> None: ...

    def onQueryProgress(self, event: object) -> None: ...

    def onQueryIdle(self, event: object) -> None: ...

    def onQueryTerminated(self, event: object) -> None: ...


def main(workdir: Path) -> None:
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    spark.dataSource.register(_Source)
    spark.streams.addListener(_Listener())
    assert spark.read.format("archive-workload").load().count() == ROWS
    stream = spark.readStream.format("archive-workload").load()
    query = stream.writeStream.format("parquet").option("path", str(workdir / "out")) \
        .option("checkpointLocation", str(workdir / "checkpoint")).trigger(availableNow=True).start()
    query.awaitTermination()
    counted: list[int] = []
    query = stream.writeStream.foreachBatch(lambda df, _: counted.append(df.count())) \
        .option("checkpointLocation", str(workdir / "checkpoint-each")).trigger(availableNow=True).start()
    query.awaitTermination()
    assert sum(counted) == ROWS, counted
    table = spark.read.parquet(str(workdir / "out")).groupBy((F.col("n") % 3).alias("k")).count().toPandas()
    assert int(table["count"].sum()) == ROWS
    assert spark.createDataFrame(table).selectExpr("sum(count)").first()[0] == ROWS
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
