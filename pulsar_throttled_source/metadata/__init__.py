"""Metadata: what the broker knows about the topics a query reads, asked over the admin REST API.

Planning never reads messages; it plans from what these modules report:
- ``admin_http``: the HTTP layer (session, token auth, TLS, owner redirects, error mapping,
  retries through ``..retry``); ``admin_answers``: what an answer or failure tells the user (the broker's
  reason, the permission a call needs, a TLS failure's fix, where a redirect led); ``owner_redirects``: which hosts a redirect may take the credentials to
  (the admin URL's, the cluster's brokers); ``admin_hosts``: an admin URL naming several hosts, asked in turn when one does not answer.
- ``admin``: the lookups planning and read tasks use (partitions, internal stats, publish stats,
  policies, transaction buffer, entry headers, subscriptions).
- ``catalog``: which partitions the query reads and their layouts, cached per refresh interval
  and fetched again in the background while planning calls come (``background_refresh``); ``max_read``: the
  transactions probe (each partition's max read position, where an open transaction holds entries back);
  ``request_pool``: the catalog's admin requests, a few in flight at once.
- ``layout``: one partition's ledgers, entry counts and sizes; backlogs and lost ranges.
- ``entry_headers``: EntryHeaders, what one entry's headers say, parsed once: the messages a reader
  gets, its stored bytes, and (for read tasks) whether it is a chunk, a marker or aborted.
- ``backlog_sizes``: the messages and stored bytes of the entries a window could admit (precise
  mode, byte quotas), what the planner holds; it joins ``lookup_scheduler`` (the planner's lookups:
  pool, per-call budget and deadline), ``window_pricing`` (the head exactly, samples beyond,
  bisection where the batching changed), ``uniform_batching`` (stretches batched alike, priced from
  a grid) and ``backlog_estimates`` (estimates without waiting, refreshed by background samples).
- ``policies``: the broker's applied dispatch-rate policies (quotaSource=broker|both).
- ``durable_cursor``: the optional durable subscription that follows the query's commits.
- ``publish_times``: the publish time of each partition's oldest unread entry (the progress report's time lag).
- ``admin_auth``: the admin API's side of each authentication method (token files read again, OAuth2 tokens
  fetched again); ``service_tls``: the broker's certificate looked at once, at load.
- ``stress_readings``: what adaptiveThrottling's signals read (lookup latency, pending adds, other
  subscriptions' throttling counters); ``broker_metrics``: the broker's publish latency from its metrics page.
"""
