"""Which partitions of a large plan are priced by estimate instead of by their entries' metadata.

Precise mode prices the entries a window admits by each entry's own metadata (metadata.backlog_sizes):
one admin request per new entry. At 1,000 partitions that is hundreds of requests a trigger, more
than a broker answers, so plans waited and partitions fell behind (bench/README.md, "Figures behind the code"). Where every bucket a partition charges has HEADROOM times what the whole plan is estimated
to charge it, no plausible error of the estimate changes what the plan admits: those partitions are
priced by their last known messages per entry and their ledgers' average entry size, and charged
that. Buckets near their quota, partitions with nothing known yet, and plans over few partitions
are priced entry by entry as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..backlog_values import LearnedBacklog
from .buckets import BucketSpec
from .demands import PartitionDemand

ESTIMATE_ABOVE = 64  # partitions with backlog in a plan; smaller plans look every entry up
HEADROOM = 10.0  # a bucket's remaining quota over the plan's estimated charge to it


@dataclass(slots=True)
class _Charge:
    msgs: float = 0.0
    bytes: float = 0.0


def _priced(specs: Sequence[BucketSpec], precise: bool) -> bool:
    return any(math.isfinite(spec.quota_bytes) or (precise and math.isfinite(spec.quota_msgs)) for spec in specs)


def estimates_far_from_quota(demands: Sequence[PartitionDemand], specs: Sequence[Sequence[BucketSpec]],
                             remaining: Mapping[str, tuple[float, float]], precise: bool) -> list[LearnedBacklog | None]:
    """Per demand, the estimate to price it by, or None to learn its entries (the usual path).

    `remaining`: what each bucket had left after the last plan that charged it, rolled forward to
    now; a bucket not in it (never charged by this engine) keeps its partitions on the usual path.
    Only demands that would be priced entry by entry are estimated (a message quota in precise
    mode, or a byte quota): batch mode with message quotas counts entries and asks nothing."""
    estimates = [demand.estimate_backlog() if demand.estimate_backlog is not None and _priced(demand_specs, precise)
                 else None for demand, demand_specs in zip(demands, specs, strict=True)]
    charges: dict[str, _Charge] = {}
    for demand, demand_specs, estimate in zip(demands, specs, estimates, strict=True):
        per_entry = estimate.msgs.per_entry if estimate is not None and estimate.msgs is not None else None
        msgs = demand.backlog_entries * (per_entry or 1.0)
        size = float(demand.bytes_for(demand.backlog_entries))
        for spec in demand_specs:
            charge = charges.setdefault(spec.key, _Charge())
            charge.msgs += msgs
            charge.bytes += size

    def far(spec: BucketSpec) -> bool:
        if spec.key not in remaining:
            return False
        left_msgs, left_bytes = remaining[spec.key]
        charge = charges[spec.key]
        return ((math.isinf(spec.quota_msgs) or charge.msgs * HEADROOM <= left_msgs)
                and (math.isinf(spec.quota_bytes) or charge.bytes * HEADROOM <= left_bytes))

    verdict: dict[str, bool] = {}
    out: list[LearnedBacklog | None] = []
    for demand_specs, estimate in zip(specs, estimates, strict=True):
        if estimate is None or estimate.msgs is None or not demand_specs:
            out.append(None)
            continue
        ok = True
        for spec in demand_specs:
            if spec.key not in verdict:
                verdict[spec.key] = far(spec)
            ok = ok and verdict[spec.key]
        out.append(estimate if ok else None)
    return out
