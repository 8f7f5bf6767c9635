"""The admin calls only tests and benchmarks make: create, grow and delete topics, set dispatch-rate
and retention policies, trim and unload topics, read a partition's last message id. The source
itself only looks things up (pulsar_throttled_source.metadata.admin)."""

from __future__ import annotations

from typing import Any

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName


class TopicAdmin(PulsarAdmin):
    """PulsarAdmin plus topic management. Management calls are never retried (see retry.RETRIED_METHODS)."""

    def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        self.call("PUT", f"{topic.rest_path}/partitions", f"creating {topic} with {partitions} partitions", json=partitions)

    def update_partitions(self, topic: TopicName, partitions: int) -> None:
        self.call("POST", f"{topic.rest_path}/partitions", f"raising {topic} to {partitions} partitions", json=partitions)

    def create_topic(self, topic: TopicName) -> None:
        self.call("PUT", topic.rest_path, f"creating {topic}")

    def delete_topic(self, topic: TopicName, partitioned: bool) -> None:
        path = f"{topic.rest_path}/partitions" if partitioned else topic.rest_path
        self.call("DELETE", path, f"deleting {topic}", params={"force": "true"})

    def last_message_id(self, partition: TopicName) -> dict[str, Any]:
        return self.call("GET", f"{partition.rest_path}/lastMessageId", f"reading the last message id of {partition}",
                         not_found=f"Topic {partition} does not exist on {self.base}.")

    def set_dispatch_rate(self, topic: TopicName, rate: dict[str, Any]) -> None:
        self.call("POST", f"{topic.rest_path}/dispatchRate", f"setting the dispatch rate of {topic}", json=_full_rate(rate))

    def set_subscription_dispatch_rate(self, topic: TopicName, rate: dict[str, Any]) -> None:
        self.call("POST", f"{topic.rest_path}/subscriptionDispatchRate", f"setting the subscription dispatch rate of {topic}",
                  json=_full_rate(rate))

    def set_subscription_level_dispatch_rate(self, topic: TopicName, subscription: str, rate: dict[str, Any]) -> None:
        """One subscription's own dispatch rate (a topic policy for that subscription alone, not the others)."""
        self.call("POST", f"{topic.rest_path}/{subscription}/dispatchRate",
                  f"setting the dispatch rate of subscription {subscription} of {topic}", json=_full_rate(rate))

    def remove_dispatch_rate(self, topic: TopicName) -> None:
        self.call("DELETE", f"{topic.rest_path}/dispatchRate", f"removing the dispatch rate of {topic}")

    def set_retention(self, topic: TopicName, minutes: int, size_mb: int) -> None:
        self.call("POST", f"{topic.rest_path}/retention", f"setting the retention of {topic}",
                  json={"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb})

    def trim_topic(self, partition: TopicName) -> None:
        """Ask the broker to delete ledgers that retention no longer keeps (closed ledgers only)."""
        self.call("POST", f"{partition.rest_path}/trim", f"trimming {partition}")

    def unload_topic(self, topic: TopicName) -> None:
        self.call("PUT", f"{topic.rest_path}/unload", f"unloading {topic}")


def _full_rate(rate: dict[str, Any]) -> dict[str, Any]:
    """The broker wants all four fields; missing ones mean 'no limit', 1 s, absolute."""
    return {
        "dispatchThrottlingRateInMsg": int(rate.get("dispatchThrottlingRateInMsg", -1)),
        "dispatchThrottlingRateInByte": int(rate.get("dispatchThrottlingRateInByte", -1)),
        "relativeToPublishRate": bool(rate.get("relativeToPublishRate", False)),
        "ratePeriodInSecond": int(rate.get("ratePeriodInSecond", 1)),
    }
