"""The dispatch-rate policies the broker applies to a topic, as quota Rates.

With quotaSource=broker|both, planning follows what `pulsar-admin topics
set-dispatch-rate` (or namespace policies, or broker config) says, re-read every
`policyRefreshIntervalMs` so a change made while the query runs takes effect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..quota_settings import Rate
from ..topics import TopicName
from .admin import PulsarAdmin

log = logging.getLogger(__name__)


def rate_from_policy(policy: dict[str, Any] | None) -> Rate | None:
    """Pulsar treats a rate <= 0 as 'no limit'; None when the policy limits nothing."""
    if not policy:
        return None
    msgs = int(policy.get("dispatchThrottlingRateInMsg", -1) or -1)
    byts = int(policy.get("dispatchThrottlingRateInByte", -1) or -1)
    rate = Rate(msgs if msgs > 0 else -1, byts if byts > 0 else -1, max(1, int(policy.get("ratePeriodInSecond", 1) or 1)),
                bool(policy.get("relativeToPublishRate", False)))
    return None if rate.is_unlimited() else rate


class BrokerPolicies:
    def __init__(self, admin: PulsarAdmin, refresh_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin
        self._refresh_s = refresh_ms / 1000.0
        self._clock = clock
        self._cache: dict[TopicName, tuple[float, Rate | None, Rate | None]] = {}

    def rates(self, topic: TopicName) -> tuple[Rate | None, Rate | None]:
        """(topic rate, subscription rate) applied by the broker to `topic` (a partitioned topic's base)."""
        now = self._clock()
        cached = self._cache.get(topic)
        if cached is not None and now - cached[0] < self._refresh_s:
            return cached[1], cached[2]
        topic_rate = rate_from_policy(self._admin.dispatch_rate(topic, applied=True))
        sub_rate = rate_from_policy(self._admin.subscription_dispatch_rate(topic, applied=True))
        if cached is None or (cached[1], cached[2]) != (topic_rate, sub_rate):
            log.info("Broker dispatch-rate policy for %s: topic %s, subscription %s", topic, topic_rate, sub_rate)
        self._cache[topic] = (now, topic_rate, sub_rate)
        return topic_rate, sub_rate
