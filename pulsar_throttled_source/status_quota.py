"""The status command's view of a query's quota buckets (status.py): read, never charged, from the quota
store its options name (the SQLite file at quotaStatePath, or quotaStore=redis://...).

The buckets are those a plan of the query charges (throttling/buckets.py): its source-wide bucket (named
by the checkpoint's queryId), and per partition a topic and a subscription bucket per origin of the
rate (the options' quotas, the broker's policies). A bucket whose quota the options give is rolled
forward to now as the engine would (buckets.roll_forward), so windowUsed (0 to 1) and the debt are
this window's; a relative quota (relativeToPublishRate) is shown without its publish-rate part. A broker
policy's bucket shows what its last window admitted (its quota is the broker's, not read here).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .credentials import scrub
from .options import SourceOptions
from .quota_settings import Rate
from .throttling.buckets import bucket_spec, roll_forward, source_key, subscription_key, topic_key
from .throttling.demands import SOURCE_LEVEL, SUBSCRIPTION_LEVEL, TOPIC_LEVEL
from .throttling.store import BucketState
from .throttling.store_factory import open_quota_store

# The level names of the query progress report (planning/progress.py, LEVEL_KEYS).
LEVELS = {(SOURCE_LEVEL, "options"): "sourceWide", (TOPIC_LEVEL, "options"): "topic",
          (SUBSCRIPTION_LEVEL, "options"): "subscription", (TOPIC_LEVEL, "broker"): "brokerTopic",
          (SUBSCRIPTION_LEVEL, "broker"): "brokerSubscription"}


def bucket_keys(options: SourceOptions, query_id: str | None,
                partitions: Sequence[str]) -> list[tuple[str, str, str, Rate | None]]:
    """(key, level, origin, the options' rate or None) of every bucket the query's plans may charge."""
    keys: list[tuple[str, str, str, Rate | None]] = []
    if query_id is not None:
        keys.append((source_key(query_id), SOURCE_LEVEL, "options", options.quota.source))
    for partition in partitions:
        keys.append((topic_key("options", partition), TOPIC_LEVEL, "options", options.topic_rate))
        keys.append((subscription_key("options", options.subscription, partition), SUBSCRIPTION_LEVEL, "options",
                     options.subscription_rate))
        keys.append((topic_key("broker", partition), TOPIC_LEVEL, "broker", None))
        keys.append((subscription_key("broker", options.subscription, partition), SUBSCRIPTION_LEVEL, "broker", None))
    return keys


def quota_state(options: SourceOptions, query_id: str | None, partitions: Sequence[str], now: float) -> dict[str, Any]:
    """The query's buckets in its quota store; {"store", "error"} when the store cannot be read."""
    redis = options.quota_store
    shown = redis.url if redis else f"sqlite:{options.quota_state_path}"
    if not redis and not os.path.exists(options.quota_state_path):
        # Not created here: a query that never charged a bucket on this host has none.
        return {"store": shown, "error": "no quota store file (no query with quotas ran on this host with this quotaStatePath)"}
    keys = bucket_keys(options, query_id, partitions)
    try:
        store = open_quota_store(redis, options.quota_state_path)
        try:
            with store.transaction() as tx:  # nothing is put: the transaction writes nothing
                states = tx.get_many([key for key, _, _, _ in keys])
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()
    except (ValueError, RuntimeError, OSError) as e:
        return {"store": shown, "error": scrub(str(e), redis)}
    return bucket_report(keys, states, now, shown)


def bucket_report(keys: Sequence[tuple[str, str, str, Rate | None]], states: Mapping[str, BucketState | None], now: float,
                  shown: str) -> dict[str, Any]:
    """Per level: buckets found, the fullest one's share of this window's quota, the debt they carry,
    seconds since the newest charged window started; per bucket: the same."""
    buckets: dict[str, dict[str, Any]] = {}
    levels: dict[str, dict[str, Any]] = {}
    for key, level, origin, rate in keys:
        state = states.get(key)
        if state is None:
            continue
        name = LEVELS[(level, origin)]
        view = bucket_view(key, level, origin, rate, state, now)
        buckets[key] = {"level": name, **view}
        summary = levels.setdefault(name, {"buckets": 0, "windowUsed": None, "debtMessages": 0.0, "debtBytes": 0.0,
                                           "lastChargedSecondsAgo": None})
        summary["buckets"] += 1
        if view["windowUsed"] is not None:
            summary["windowUsed"] = max(summary["windowUsed"] or 0.0, view["windowUsed"])
            summary["debtMessages"] = round(summary["debtMessages"] + view["debtMessages"], 3)
            summary["debtBytes"] = round(summary["debtBytes"] + view["debtBytes"], 3)
        ago = view.get("lastChargedSecondsAgo")
        if ago is not None:
            summary["lastChargedSecondsAgo"] = ago if summary["lastChargedSecondsAgo"] is None else min(summary["lastChargedSecondsAgo"], ago)
    return {"store": shown, "levels": levels, "buckets": buckets}


def bucket_view(key: str, level: str, origin: str, rate: Rate | None, state: BucketState, now: float) -> dict[str, Any]:
    if rate is None or rate.is_unlimited():
        # A broker policy's bucket (or an options' level the command was not told of): as stored.
        return {"window": state.window, "usedMessages": round(state.used_msgs, 3), "usedBytes": round(state.used_bytes, 3),
                "windowUsed": None, "debtMessages": None, "debtBytes": None}
    spec = bucket_spec(key, level, origin, rate, (0.0, 0.0))
    bucket = roll_forward(spec, state, now, None)
    shares = [min(1.0, used / quota) for used, quota in ((bucket.used_msgs, spec.quota_msgs), (bucket.used_bytes, spec.quota_bytes))
              if not math.isinf(quota)]
    return {"window": state.window, "usedMessages": round(bucket.used_msgs, 3), "usedBytes": round(bucket.used_bytes, 3),
            "windowUsed": round(max(shares, default=0.0), 4),
            "debtMessages": round(max(0.0, bucket.used_msgs - spec.quota_msgs), 3) if not math.isinf(spec.quota_msgs) else 0.0,
            "debtBytes": round(max(0.0, bucket.used_bytes - spec.quota_bytes), 3) if not math.isinf(spec.quota_bytes) else 0.0,
            "lastChargedSecondsAgo": round(max(0.0, now - state.window * spec.period_s), 3)}


def quota_table(quota: Mapping[str, Any]) -> list[str]:
    """The quota part of the human report."""
    if "error" in quota:
        return [f"Quota store {quota['store']}: {quota['error']}"]
    if not quota["levels"]:
        return [f"Quota store {quota['store']}: no bucket of this query (it ran unthrottled, or its buckets were purged)"]
    rows = [("LEVEL", "BUCKETS", "WINDOW USED", "DEBT MSGS", "DEBT BYTES", "LAST WINDOW")]
    for name, level in quota["levels"].items():
        used = level["windowUsed"]
        ago = level["lastChargedSecondsAgo"]
        rows.append((name, str(level["buckets"]), "-" if used is None else f"{used * 100:.0f} %",
                     str(level["debtMessages"]), str(level["debtBytes"]), "-" if ago is None else f"{ago:.1f} s ago"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [f"Quota store {quota['store']}:"] + [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows]
