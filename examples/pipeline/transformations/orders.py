"""A streaming table fed by the pulsar-throttled source. `spark` is the pipeline's session; the
settings come from the `configuration` section of spark-pipeline.yml."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.table(comment="Messages of the Pulsar topic, read at most pulsar.topicRateMsgs entries per second per partition.")
def orders() -> DataFrame:
    conf = spark.conf  # noqa: F821 (defined by spark-pipelines)
    return (spark.readStream.format("pulsar-throttled")  # noqa: F821
            .option("service.url", conf.get("pulsar.service.url"))
            .option("admin.url", conf.get("pulsar.admin.url"))
            .option("topic", conf.get("pulsar.topic"))
            .option("startingOffsets", "earliest")
            .option("throttlingMode", "batch")
            .option("dispatchThrottlingRatePerTopicInMsg", conf.get("pulsar.topicRateMsgs"))
            .load())
