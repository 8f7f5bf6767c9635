"""The scenarios of the accuracy bench: what each one reads, how, and what is compared with the quota.

Quotas are topic quotas, per window (1 s) and partition, as in Pulsar.
"""

from __future__ import annotations

from dataclasses import dataclass

MSG_QUOTA = "dispatchThrottlingRatePerTopicInMsg"
BYTE_QUOTA = "dispatchThrottlingRatePerTopicInByte"


@dataclass(frozen=True)
class Scenario:
    name: str
    mode: str  # throttlingMode
    quota: int  # per window and partition, in `unit`
    unit: str  # "entries", "messages" or "bytes": what each window delivered, compared with the quota
    data: str  # a backlog of backlogs.produce_backlog, or "live" (produced while the query runs)
    runner: str  # "drain", "idle-gaps" or "shared" (runners.py)
    quota_option: str = MSG_QUOTA
    partitions: int = 2

    @property
    def per_window(self) -> bool:
        """Whether a single window's error means anything: not when one entry exceeds a window's quota
        (the source admits one entry and carries the rest as debt), nor for a live topic's idle windows."""
        return self.data != "large-400"


# The scenarios of old: their per-window tables keep attributing batches by the progress timestamps,
# as their recorded figures did; the newer ones use the source's charges (charges.py).
LEGACY = ("batch", "precise", "precise-variable", "precise-rebatched")

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("batch", "batch", 50, "entries", "batched-10", "drain"),
    Scenario("precise", "precise", 500, "messages", "batched-10", "drain"),
    Scenario("precise-variable", "precise", 500, "messages", "variable", "drain"),
    Scenario("precise-rebatched", "precise", 500, "messages", "rebatched", "drain"),
    # A live topic written in bursts faster than the quota, idle in between (bursts.py).
    Scenario("precise-idle-gaps", "precise", 500, "messages", "live", "idle-gaps"),
    # Entries of ~43.6 KB / 400 messages against a quota of 12.5 KB / 100 messages per window.
    Scenario("large-entries-bytes", "batch", 12_500, "bytes", "large-400", "drain", BYTE_QUOTA, 4),
    Scenario("large-entries-precise", "precise", 100, "messages", "large-400", "drain", MSG_QUOTA, 4),
    # Two Spark applications sharing one topic quota in Redis (quotaStore).
    Scenario("shared-redis", "batch", 50, "entries", "batched-10", "shared"),
    Scenario("shared-redis-precise", "precise", 500, "messages", "batched-10", "shared"),
)}
