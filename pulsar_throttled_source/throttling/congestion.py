"""The congestion controller's rule (adaptiveThrottling, issue 40): how the multiplier m of the quotas moves.

Pure functions of their arguments, no clock, no store, no I/O: the controller (``controller``) reads the clock and
the signals and applies ``decide`` to the cluster's record inside a quota-store transaction.

The rule, once per window (AIMD after a slow start, as TCP's congestion window):
- a stress signal fired: multiplicative decrease, ``m <- max(m_min, m x (1 - decrease))``;
- no signal fired, and every signal was read: additive increase, ``m <- min(1, m + increase)``; in slow start
  (from the first window until the first decrease) the increase doubles m instead, ``m <- min(1, 2m)``;
- no signal fired but one could not be read: hold, ``m`` unchanged. Not knowing is no evidence of stress (the
  source is not stalled) nor of its absence (it does not read faster than the last m).
- no signal fired but one has no new evidence since its last verdict (the broker's metrics roll over once per stats
  period, slower than a window): hold. An increase needs every signal's fresh all-clear, as TCP's window grows once per
  round trip of feedback, not once per packet sent; otherwise windows between two stats periods undo each decrease
  before the next period can judge it.
  A fired signal still decreases when another could not be read: the stress it saw is evidence.
- no signals at all: nothing fired, so m climbs to 1 and stays there (a static quota at its ceiling).

Shared state, one decision per window per cluster: every planner sharing a quota store and an admin URL reads and
writes one ``MultiplierState``. The window's m is ``base`` (the m the window started from) moved by the most cautious
verdict any planner reached in that window (decrease > hold > increase), so two planners that both saw stress in a
window decrease once, and a decrease is never lost to a planner that saw none. A planner whose window is older than
the record's (its clock is behind) merges its verdict into the record's window instead of going back.

Time constants (windows of ``AdaptiveConfig.window_ms``; at the defaults m_min 0.1, decrease 0.5, increase 0.05,
10 s): ``slow_start_windows`` from m_min to 1 by doubling (4 windows, 40 s), ``backoff_windows`` from 1 to m_min (4,
40 s), ``recovery_windows`` from m_min to 1 once out of slow start (18, 3 min).
First window (no record): slow start. m starts at m_min and the first decision moves it from there; each clear window
doubles it, so the backfill reaches the ceiling in ``slow_start_windows`` if nothing fires, and the first stress the
cluster shows is met near the rate that caused it, not at the ceiling (starting at the ceiling, the first stats period
of a slow signal ran a whole period at it: bench/README.md, adaptive_backfill.py runs E and F). The first decrease
ends slow start for good. Without slow start (``adaptiveThrottlingSlowStart=false``), m starts at 1, the ceiling the
user configured as acceptable. After an idle period (no plan for many windows): idle windows are not evidence either way,
so the next decision moves m one step from where it was. After a restart: the record is in the store, so the query
resumes from the shared m. A record no planner has written for a day is purged with the buckets, and then the
cluster starts afresh (in slow start, by default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..quota_settings import AdaptiveConfig
from .store import MultiplierState

Verdict = Literal["increase", "hold", "decrease"]
SignalState = Literal["fired", "clear", "unknown", "waiting"]

SEVERITY: dict[str, int] = {"increase": 0, "hold": 1, "decrease": 2}  # the most cautious verdict of a window wins
_DIGITS = 9  # m is rounded so that 18 steps of 0.05 from 0.1 reach 1.0 exactly, not 0.9999999999999999


@dataclass(frozen=True, slots=True)
class SignalReading:
    """One stress signal's reading for one window."""

    name: str  # e.g. "publish-latency", for logs and the progress report
    state: SignalState  # fired: stress seen; clear: read, no stress; unknown: could not be read;
    # waiting: read, but nothing new since the signal's last verdict (holds m, no WARN: it is not an outage)
    detail: str = ""  # why it fired or could not be read, for the log


def verdict_of(readings: Sequence[SignalReading]) -> Verdict:
    if any(r.state == "fired" for r in readings):
        return "decrease"
    if any(r.state in ("unknown", "waiting") for r in readings):
        return "hold"
    return "increase"


def clamp(m: float, config: AdaptiveConfig) -> float:
    """m within [m_min, 1]: a record written by a planner with other bounds is applied within this one's."""
    return min(1.0, max(config.min_multiplier, m))


def step(m: float, verdict: Verdict, config: AdaptiveConfig, slow_start: bool = False) -> float:
    """One window's move of m under `verdict` (in slow start an increase doubles m)."""
    if verdict == "decrease":
        moved = m * (1.0 - config.decrease)
    elif verdict == "increase":
        moved = 2.0 * m if slow_start else m + config.increase
    else:
        moved = m
    return round(clamp(moved, config), _DIGITS)


def window_of(now_s: float, config: AdaptiveConfig) -> int:
    """The start (epoch ms) of the window `now_s` falls in: aligned to the epoch, so planners agree without talking."""
    now_ms = math.floor(now_s * 1000)
    return now_ms - now_ms % config.window_ms


def decide(record: MultiplierState | None, window_ms: int, verdict: Verdict, config: AdaptiveConfig) -> MultiplierState:
    """The cluster's record once this planner's `verdict` for the window starting at `window_ms` is applied."""
    if record is None:  # the first window: slow start from m_min, or the ceiling without it
        return _moved(window_ms, config.min_multiplier if config.slow_start else 1.0, config.slow_start, verdict, config)
    if window_ms <= record.window_ms:
        # This window is decided already (or another planner's clock is ahead): merge, the most cautious verdict wins.
        # The record's slow_start is still the window's own at its start: only a decrease ends it, and a decrease
        # is never merged over.
        if SEVERITY[verdict] <= SEVERITY[record.verdict]:
            return record
        return _moved(record.window_ms, record.base, record.slow_start, verdict, config)
    # A new window starts from the m the last decided one ended with, however long ago that was.
    return _moved(window_ms, record.m, record.slow_start, verdict, config)


def _moved(window_ms: int, base: float, slow_start: bool, verdict: Verdict, config: AdaptiveConfig) -> MultiplierState:
    return MultiplierState(window_ms, base, verdict, step(base, verdict, config, slow_start),
                           slow_start and verdict != "decrease")


def cluster_key(admin_url: str) -> str:
    """The broker cluster, named by its admin URL as every query spells it alike: scheme and host in lower case,
    the default port filled in, no credentials, no trailing '/'; an admin URL naming several hosts
    (http://h1:8080,h2:8080) names them sorted, whatever order a query gives them in."""
    parts = urlsplit(admin_url.strip())
    scheme = parts.scheme.lower()

    def host_port(host: str) -> str:
        one = urlsplit(f"{scheme}://{host}")
        return f"{(one.hostname or '').lower()}:{one.port or {'http': 80, 'https': 443}.get(scheme, 0)}"

    hosts = sorted({host_port(h) for h in parts.netloc.rpartition("@")[2].split(",") if h})
    return f"{scheme}://{','.join(hosts)}{parts.path.rstrip('/')}"


def _windows(start: float, verdict: Verdict, config: AdaptiveConfig, slow_start: bool = False) -> int:
    """Windows of one verdict that take m from ``start`` to the other end of [m_min, 1]."""
    windows, m = 0, start
    reached = (lambda m: m >= 1.0) if verdict == "increase" else (lambda m: m <= config.min_multiplier)
    while not reached(m):
        m, windows = step(m, verdict, config, slow_start=slow_start), windows + 1
    return windows


def slow_start_windows(config: AdaptiveConfig) -> int:
    """Clear windows that take m from m_min to 1 in slow start (the first window's decision included)."""
    return _windows(config.min_multiplier, "increase", config, slow_start=True)


def backoff_windows(config: AdaptiveConfig) -> int:
    """Windows of stress that take m from 1 to m_min."""
    return _windows(1.0, "decrease", config)


def recovery_windows(config: AdaptiveConfig) -> int:
    """Windows without stress that take m from m_min back to 1."""
    return _windows(config.min_multiplier, "increase", config)
