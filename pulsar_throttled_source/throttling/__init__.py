"""Quota throttling: how far each partition may advance in one micro-batch.

Pulsar's broker throttles dispatch *after* deciding what to read, with counters it fixes up
once it knows what an entry held. This package applies the same model one step earlier,
when Spark plans a micro-batch: it decides how many backlog entries each partition may
advance and charges every quota bucket that applies, all in one store transaction.

The model (see docs/THROTTLING.md):
- Levels: source-wide (one bucket per query), topic (one per partition, shared by every
  query on the host, or on every host with quotaStore), subscription (one per subscription and
  partition). All levels, and messages and bytes within a level, must admit (logical AND).
- Windows are epoch aligned (``floor(now / period)``), so processes agree on them without
  talking. What a window over-admits is debt that the next windows pay back; what it leaves
  unused is lost.
- Entries are converted to messages exactly (batch mode: one entry is one message) or from the
  entries' own metadata, looked up for the entries a window could admit (precise mode:
  ``..backlog_values``, learned by ``metadata.backlog_sizes``); bytes likewise, or from the ledger layout.

Modules, each one role. Within the package: ``engine`` uses all the others; ``allocation`` uses
``partition_plan``, ``buckets``, ``report`` and ``demands``; ``store_factory`` uses the SQLite and Redis stores. The quota configuration
(Rate, QuotaConfig) and entry values live below the package (``..quota_settings``, ``..backlog_values``)
so that options and metadata need nothing of it (the import contract in pyproject.toml holds that):
- ``demands``: the value types planning and the engine share (PartitionDemand, Admission, level names).
- ``store``: what a bucket store holds and offers (BucketState, MultiplierState, the QuotaStore protocol);
  ``sqlite_store``: buckets in one sqlite file per host;
  ``redis_store``: in a Redis server (quotaStore); ``store_factory``: the one the options name.
- ``publish_rates``: publish rates per partition, measured from the broker's counters and smoothed, for
  quotas relative to them; messages per entry from the same counters.
- ``buckets``: bucket keys, effective quotas (incl. relative to publish rate), windows and
  pay-back of debt.
- ``headroom``: which partitions of a large plan are so far below their quotas that an estimate will do.
- ``report``: the words: held-back reasons, per-level reports, the summary log line.
- ``partition_plan``: one partition's admission while it is worked out (whether throttling applies, how
  its entries convert to messages and bytes, what it has been admitted and charged).
- ``allocation``: the admission passes over those plans (proportional shares, fit, one-entry minimum,
  rotating order).
- ``engine``: QuotaEngine, which ties them together around one store transaction.
- ``congestion``: adaptiveThrottling's rule (AIMD steps of the quotas' multiplier m, one decision per window per
  cluster); ``controller``: CongestionController, which the planner calls at every plan for m (uses ``congestion``
  and ``store``); the engine scales every quota by it; ``signals``: the stress signals it reads.

Nothing is re-exported here, so importing ``throttling.demands`` loads only those value types.
"""
