"""CongestionController: the seam the planner calls at every plan, which moves the cluster's multiplier m once per
window (the rule is ``congestion``'s) and answers the m the quotas are scaled by (``QuotaEngine(multiplier=...)``).

At the first plan of each window it reads every stress signal, reaches a verdict, and applies it to the cluster's
shared record in one quota-store transaction (atomic against every other planner on the same store); the other plans
of that window get the m it answered then. A decrease another planner decides later in the same window reaches this
one at its next window, whose decision starts from the m the window ended with.

A signal that raises, or answers "unknown", counts as unknown: the window holds m (unless another signal fired), and
the log gets one WARN when that signal's outage starts and one INFO when it reads again, not one per window.
The signals are signals.py's (adaptive_throttle.py builds a query's); with none, every window is clear and m stays
at 1.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..quota_settings import AdaptiveConfig
from .congestion import SignalReading, SignalState, Verdict, clamp, cluster_key, decide, verdict_of, window_of
from .store import QuotaStore

log = logging.getLogger(__name__)


class StressSignal(Protocol):
    """One source of congestion evidence, read once per controller window by the driver's planner.

    ``read`` answers "fired" (stress seen in the window that ended), "clear" (read, no stress), "waiting" (read,
    nothing new since its last verdict: a source slower than a window) or "unknown" (could not be read: endpoint
    down, HTTP error, not enough data yet). It should return quickly; an exception counts as
    unknown. A broker restart is not congestion: a signal should answer unknown, not fired, while its source resets."""

    @property
    def name(self) -> str: ...

    def read(self) -> SignalReading: ...


@dataclass(frozen=True, slots=True)
class Decision:
    """What the last window's decision was, for the planner's log line and (later) the progress report."""

    window_ms: int
    verdict: Verdict  # this planner's verdict; the shared record may hold a more cautious one
    readings: tuple[SignalReading, ...]
    multiplier: float  # the m this planner applies in the window

    def fired(self) -> list[str]:
        return self.named("fired")

    def named(self, state: SignalState) -> list[str]:
        """The signals whose reading was in `state`, in the order they were read."""
        return [r.name for r in self.readings if r.state == state]


class CongestionController:
    """One per query (driver side). Not thread-safe: the planner calls it from one thread."""

    def __init__(self, config: AdaptiveConfig, admin_url: str, store: QuotaStore,
                 signals: Sequence[StressSignal] = (), clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.cluster = cluster_key(admin_url)
        self._store = store
        self._signals = tuple(signals)
        self._clock = clock
        self._unreadable: set[str] = set()  # signals in an outage, WARNed once
        self.last: Decision | None = None

    def multiplier(self) -> float:
        """The m to scale this plan's quotas by: decided at the window's first call, the same for the rest of it."""
        window_ms = window_of(self._clock(), self.config)
        if self.last is not None and window_ms <= self.last.window_ms:
            return self.last.multiplier  # decided already (or the clock went back: keep the last m)
        readings = tuple(self._read(signal) for signal in self._signals)
        self._log_outages(readings)
        verdict = verdict_of(readings)
        with self._store.transaction() as tx:
            record = decide(tx.get_multiplier(self.cluster), window_ms, verdict, self.config)
            tx.put_multiplier(self.cluster, record)
        m = clamp(record.m, self.config)
        if self.last is None or m != self.last.multiplier:
            log.info("Adaptive throttling on %s: m=%.3f of the quotas (%s%s)", self.cluster, m, verdict,
                     f": {', '.join(r.name for r in readings if r.state == 'fired')} fired" if verdict == "decrease" else "")
        self.last = Decision(window_ms, verdict, readings, m)
        return m

    def _read(self, signal: StressSignal) -> SignalReading:
        try:
            return signal.read()
        except Exception as e:  # any failure of a signal is "could not read it", never a failed plan
            return SignalReading(signal.name, "unknown", f"{type(e).__name__}: {e}")

    def _log_outages(self, readings: Sequence[SignalReading]) -> None:
        for reading in readings:
            if reading.state == "unknown" and reading.name not in self._unreadable:
                self._unreadable.add(reading.name)
                log.warning("Adaptive throttling: stress signal %s cannot be read (%s); m holds at its last value until "
                            "it reads again or another signal fires", reading.name, reading.detail or "no detail")
            elif reading.state != "unknown" and reading.name in self._unreadable:
                self._unreadable.discard(reading.name)
                log.info("Adaptive throttling: stress signal %s reads again", reading.name)
