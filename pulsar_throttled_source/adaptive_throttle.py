"""adaptiveThrottling wired into the stream's planner (issue 40): the query's congestion controller and the stress
signals that feed it, built on the driver from the options and the planner's collaborators (planner_wiring.py), and
what the planner tells it (each plan's catalog snapshot, each planned batch). Kept out of the planner
(planning/micro_batch_planner.py) so that it only calls three hooks; never pickled into read tasks (it lives in the
planner, which stays in the process where Spark plans).

What it reports (the progress report's "adaptive" object and the planner's log line) is described in
planning/progress.py and docs/THROTTLING.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .metadata.admin import PulsarAdmin
from .metadata.catalog import CatalogSnapshot
from .metadata.stress_readings import LatencySamples
from .options import SourceOptions
from .quota_settings import Rate
from .throttling.controller import CongestionController, StressSignal
from .throttling.signals import (
    BatchDurationSignal,
    LookupLatencySignal,
    OthersThrottledSignal,
    PendingAddsSignal,
    PublishLatencySignal,
)
from .throttling.store import QuotaStore


class AdaptiveThrottle:
    """One per query, on the driver: the controller (built with the quota store) and its signals."""

    def __init__(self, options: SourceOptions, clock: Callable[[], float],
                 admin: PulsarAdmin | None = None) -> None:
        assert options.adaptive is not None
        self._options = options
        self._clock = clock
        self.lookup_latency = LatencySamples()  # the entry lookups record into it (metadata/lookup_scheduler.py)
        self._pending = PendingAddsSignal()
        self._throttled = OthersThrottledSignal()
        interval = options.adaptive.trigger_interval_ms
        self._batches = BatchDurationSignal(interval / 1000.0, clock) if interval else None
        self._admin = admin  # the driver's admin session, for the metrics page (its credentials and TLS)
        self.controller: CongestionController | None = None

    @classmethod
    def of(cls, options: SourceOptions, clock: Callable[[], float], admin: PulsarAdmin) -> AdaptiveThrottle | None:
        """The query's, or None without adaptiveThrottling."""
        return cls(options, clock, admin) if options.adaptive is not None else None

    def signals(self) -> list[StressSignal]:
        signals: list[StressSignal] = [LookupLatencySignal(self.lookup_latency), self._pending, self._throttled]
        if self._batches is not None:
            signals.append(self._batches)
        adaptive = self._options.adaptive
        if adaptive is not None and adaptive.metrics_url is not None and self._admin is not None:
            admin, url, credentials = self._admin, adaptive.metrics_url, adaptive.metrics_credentials
            signals.append(PublishLatencySignal(lambda: admin.get_text(url, "reading the broker's publish latency", credentials),
                                                factor=adaptive.publish_latency_ratio))
        return signals

    def multiplier(self, store: QuotaStore) -> Callable[[], float]:
        """The m the quota engine scales every quota by, read at each plan."""
        assert self._options.adaptive is not None
        self.controller = CongestionController(self._options.adaptive, self._options.admin_url, store, self.signals(),
                                               self._clock)
        return self.controller.multiplier

    # -- what the planner tells it ----------------------------------------------------------
    def plan_started(self, snap: CatalogSnapshot) -> None:
        """A planning call starts with this snapshot (before the quotas, so the window's decision sees it)."""
        if self._batches is not None:
            self._batches.plan_started()
        self._pending.observe(snap)
        self._throttled.observe(snap)

    def batch_planned(self) -> None:
        if self._batches is not None:
            self._batches.batch_planned()

    # -- what it reports --------------------------------------------------------------------
    def report(self) -> dict[str, Any] | None:
        """The progress report's "adaptive" object; None before the first decision."""
        decision = self.controller.last if self.controller is not None else None
        if decision is None:
            return None
        return {"multiplier": decision.multiplier, "verdict": decision.verdict, "fired": decision.named("fired"),
                "unreadable": decision.named("unknown"), "waiting": decision.named("waiting"),
                "windowStartMs": decision.window_ms, "ceiling": ceiling_report(self._options)}

    def note(self) -> str:
        """The planner's log line's part: m, and what fired or could not be read."""
        decision = self.controller.last if self.controller is not None else None
        if decision is None:
            return ""
        fired, unreadable, waiting = decision.named("fired"), decision.named("unknown"), decision.named("waiting")
        text = f"adaptive m={decision.multiplier:.3f} of the ceilings ({decision.verdict}"
        text += f": {', '.join(fired)} fired" if fired else ""
        text += f"; unreadable: {', '.join(unreadable)}" if unreadable else ""
        text += f"; waiting for new evidence: {', '.join(waiting)}" if waiting else ""
        return text + ")"


def ceiling_report(options: SourceOptions) -> dict[str, Any]:
    """The ceilings m scales: each option level that is set (messages, bytes, period), and whether the broker's
    dispatch-rate policies (read at run time) are ceilings too."""
    levels = {"sourceWide": options.quota.source, "topic": options.topic_rate, "subscription": options.subscription_rate}
    ceiling: dict[str, Any] = {key: rate_report(rate) for key, rate in levels.items() if not rate.is_unlimited()}
    ceiling["brokerPolicies"] = options.uses_broker_quotas
    return ceiling


def rate_report(rate: Rate) -> dict[str, Any]:
    return {"messages": rate.msgs if rate.msgs > 0 else None, "bytes": rate.bytes if rate.bytes > 0 else None,
            "periodSeconds": rate.period_s, "relativeToPublishRate": rate.relative_to_publish_rate}
