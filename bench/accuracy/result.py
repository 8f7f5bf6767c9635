"""What every runner is given (the broker, the Spark session, a work dir) and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar

from pulsar_throttled_source.metadata.admin import PulsarAdmin
from pulsar_throttled_source.topics import TopicName

from .long_run import LongRun
from .scenarios import Scenario
from .windows import Windows


@dataclass
class Bench:
    spark: Any
    service_url: str
    admin_url: str
    admin: PulsarAdmin
    client: pulsar.Client
    work: Path
    seconds: float


@dataclass
class Result:
    scenario: Scenario
    windows: Windows
    partitions: list[str]
    span: tuple[int, int]  # the windows measured (first, last), inclusive
    long_run: LongRun
    notes: list[str] = field(default_factory=list)  # scenario-specific lines, printed after the summary
    figures: dict[str, Any] = field(default_factory=dict)  # what the scenario's target is judged on


def partitions_of(topic: str, count: int) -> list[str]:
    name = TopicName.parse(topic)
    return [str(name.partition(i)) for i in range(count)]


def query_options(bench: Bench, scenario: Scenario, topic: str, subscription: str, quota_state: Path,
                  store_url: str | None = None) -> dict[str, object]:
    options: dict[str, object] = {
        "service.url": bench.service_url, "admin.url": bench.admin_url, "topic": topic,
        "startingOffsets": "earliest", "subscription": subscription, "throttlingMode": scenario.mode,
        scenario.quota_option: scenario.quota, "quotaStatePath": quota_state,
        "metadataRefreshIntervalMs": 500, "progressPerPartition": "true",  # the recorder reads each partition's backlog
    }
    if store_url:  # the server's URL with its password: the password goes in its own option (Spark hides it)
        from pulsar_throttled_source.admin_endpoint import userinfo, without_userinfo

        options["quotaStore"], options["quotaStorePassword"] = without_userinfo(store_url), userinfo(store_url)[1] or ""
    return options
