"""Pulsar topic names: parsing, partition names, and a stable order for offsets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote

PARTITION_SUFFIX = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d+)$")
NAME = re.compile(r"^(?P<domain>persistent|non-persistent)://(?P<tenant>[^/]+)/(?P<namespace>[^/]+)/(?P<local>[^/]+)$")


@dataclass(frozen=True, order=True)
class TopicName:
    """A fully qualified topic name such as persistent://public/default/orders."""

    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, name: str, option: str = "topic") -> TopicName:
        """Accept `persistent://t/ns/x`, `t/ns/x` or a short `x` (public/default), as Pulsar does."""
        return _parse(name, option)

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def rest_path(self) -> str:
        """The path segment of the admin REST API, e.g. persistent/public/default/orders. Each name is
        percent-encoded: `#`, `?` and `%` are legal in Pulsar names and would otherwise end the path."""
        return f"{self.domain}/{namespace_rest_path(self.namespace_name)}/{quote(self.local, safe='')}"

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local}-partition-{index}")

    @property
    def partition_index(self) -> int:
        """The partition number of a `-partition-N` topic, -1 for a non-partitioned topic."""
        match = PARTITION_SUFFIX.match(self.local)
        return int(match["index"]) if match else -1

    @property
    def base(self) -> TopicName:
        """The partitioned topic a partition belongs to (itself when not a partition)."""
        match = PARTITION_SUFFIX.match(self.local)
        return TopicName(self.domain, self.tenant, self.namespace, match["base"]) if match else self


# Parsed once per name: planning asks for the same partitions' names on every trigger (thousands a
# second at 1,000 partitions). A TopicName is immutable, so one instance serves every caller.
@lru_cache(maxsize=16384)
def _parse(name: str, option: str) -> TopicName:
    text = name.strip()
    if not text:
        raise ValueError(f"Option '{option}': empty topic name; expected e.g. persistent://public/default/orders")
    if "://" not in text:
        parts = text.split("/")
        if len(parts) == 1:
            text = f"persistent://public/default/{text}"
        elif len(parts) == 3:
            text = f"persistent://{text}"
        else:
            raise ValueError(f"Option '{option}': invalid topic name '{name}'; expected persistent://tenant/namespace/topic, tenant/namespace/topic or topic")
    match = NAME.match(text)
    if not match:
        raise ValueError(f"Option '{option}': invalid topic name '{name}'; expected persistent://tenant/namespace/topic")
    if match["domain"] != "persistent":
        raise ValueError(f"Option '{option}': topic '{name}' is non-persistent; only persistent topics can be read with offsets")
    return TopicName(match["domain"], match["tenant"], match["namespace"], match["local"])


def namespace_rest_path(namespace: str) -> str:
    """`tenant/namespace` with each name percent-encoded for an admin REST path."""
    return "/".join(quote(part, safe="") for part in namespace.split("/"))


def partition_sort_key(partition: str) -> tuple[str, int]:
    """Order partitions by topic, then numerically by index (partition-2 before partition-10)."""
    match = PARTITION_SUFFIX.match(partition)
    if match:
        return (match["base"], int(match["index"]))
    return (partition, -1)
