"""What a quota is, below every layer that uses it (options -> metadata -> throttling -> planning -> reading):
``Rate``, ``QuotaConfig`` and ``ThrottlingMode`` as options parse them, broker policies report them and the throttling
engine applies them; ``AdaptiveConfig``, the congestion controller's knobs (adaptiveThrottling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .credentials import BasicAuth

ThrottlingMode = Literal["precise", "batch"]


@dataclass(frozen=True)
class Rate:
    """One level's limit per period. -1 means unlimited for that unit.

    As in the Pulsar broker, any value <= 0 disables the limit for that unit (the broker
    config uses 0 for "disabled"); options parsing rejects an explicit 0 before we get here.
    """

    msgs: int = -1
    bytes: int = -1
    period_s: int = 1
    relative_to_publish_rate: bool = False

    def __post_init__(self) -> None:
        if self.period_s < 1:
            raise ValueError(f"period_s must be >= 1 second, got {self.period_s}")

    def is_unlimited(self) -> bool:
        return self.msgs <= 0 and self.bytes <= 0


@dataclass(frozen=True)
class QuotaConfig:
    source: Rate  # source-wide level (one bucket per query)
    mode: ThrottlingMode = "precise"
    throttle_non_backlog: bool = True  # dispatchThrottlingOnNonBacklogConsumerEnabled
    non_backlog_threshold_entries: int = 0
    query_id: str = "query"  # names the source-wide bucket: the planner sets it to the query's identity

    def __post_init__(self) -> None:
        if self.mode not in ("precise", "batch"):
            raise ValueError(f"throttling mode must be 'precise' or 'batch', got {self.mode!r}")
        if self.non_backlog_threshold_entries < 0:
            raise ValueError(
                "non_backlog_threshold_entries must be >= 0, "
                f"got {self.non_backlog_threshold_entries}"
            )


@dataclass(frozen=True)
class AdaptiveConfig:
    """adaptiveThrottling's knobs: the multiplier m of the quotas moves in [min_multiplier, 1], once per window
    (throttling.congestion has the rule and its time constants)."""

    min_multiplier: float = 0.1  # m_min: the floor, so a backfill never stops entirely
    decrease: float = 0.5  # a fired signal: m <- m x (1 - decrease)
    increase: float = 0.05  # a window with no signal fired: m <- m + increase
    window_ms: int = 10_000  # one decision per window per cluster; windows are aligned to the epoch
    trigger_interval_ms: int | None = None  # the query's trigger interval, for the batchDuration signal (None: off)
    metrics_url: str | None = None  # the broker's Prometheus page, for the publishLatency signal (None: off); no user-info
    metrics_credentials: BasicAuth | None = None  # the metrics URL's user and password (None: the admin API's credentials)
    publish_latency_ratio: float = 2.0  # publishLatency fires over this many times the broker's running minimum p99
    slow_start: bool = True  # the first windows start at min_multiplier and double m until the first decrease

    def __post_init__(self) -> None:
        if not 0 < self.min_multiplier <= 1:
            raise ValueError(f"min_multiplier must be in (0, 1], got {self.min_multiplier}")
        if not 0 < self.decrease < 1:
            raise ValueError(f"decrease must be in (0, 1), got {self.decrease}")
        if not 0 < self.increase <= 1:
            raise ValueError(f"increase must be in (0, 1], got {self.increase}")
        if self.publish_latency_ratio <= 1:
            raise ValueError(f"publish_latency_ratio must be > 1, got {self.publish_latency_ratio}")
        if self.window_ms < 1:
            raise ValueError(f"window_ms must be >= 1, got {self.window_ms}")
