"""Which partition a message goes to, chosen by the sink (each partition has a producer of its own):

- a `partition` column's value (null or -1: none given), checked against the topic's partitions;
- else a key's partition as a Java producer with default settings chooses it: the Java client's default
  router hashes the key with `JavaStringHash` (String.hashCode over the key's UTF-16 units), modulo the
  partition count, sign-safe (pulsar-client for Python hashes with another function by default, so its keyed
  messages land elsewhere: the sink computes the Java choice itself);
- else round robin from the task's own starting partition, or the task's one partition (UseSinglePartition).

The choice depends only on the row and the task's partition id, so a retried task routes its rows as before.
"""

from __future__ import annotations

from functools import lru_cache

from ..topics import TopicName


@lru_cache(maxsize=65536)
def java_string_hash(key: str) -> int:
    """java.lang.String.hashCode(): s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    data = key.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def key_partition(key: str, partitions: int) -> int:
    """The Java client's choice for a key (RoundRobinPartitionMessageRouterImpl: signSafeMod(hash, n)); Python's % is sign-safe."""
    return java_string_hash(key) % partitions


class Router:
    """Routes one task's messages for one topic of `partitions` partitions (0: not partitioned)."""

    def __init__(self, topic: TopicName, partitions: int, task_partition: int, single_partition: bool) -> None:
        self.topic = topic
        self.partitions = partitions
        self.single = single_partition
        self._next = task_partition  # round robin starts at the task's own partition, so tasks spread out
        self._names = [str(topic.partition(i)) for i in range(partitions)]  # made once: a name per message costs
        self._index = topic.partition_index

    def destination(self, key: str | None, partition: int | None, column: str) -> str:
        """The partition topic (or the topic itself, not partitioned) the message goes to."""
        given = partition is not None and partition != -1
        index = self._index
        if self.partitions == 0:
            if given and partition != index:
                where = f"partition {index} of {self.topic.base}" if index >= 0 else "not partitioned"
                raise ValueError(f"Column '{column}' is {partition} but topic {self.topic} is {where}; set it to null "
                                 "(or -1) to let the sink route, or name the partitioned topic.")
            return str(self.topic)
        if given:
            assert partition is not None
            if not 0 <= partition < self.partitions:
                raise ValueError(f"Column '{column}' is {partition} but topic {self.topic} has {self.partitions} partitions "
                                 f"(0 to {self.partitions - 1}); null or -1 lets the sink route by key.")
            return self._names[partition]
        if key is not None:
            return self._names[key_partition(key, self.partitions)]
        chosen = self._next % self.partitions
        if not self.single:
            self._next += 1
        return self._names[chosen]
