"""Reading: what a Spark task does on an executor with one planned range (start, end].

(What a task carries, PartitionRange and ClientConfig, is ``..read_task``: planning builds it.)
- ``read``: the read loop: a non-durable reader over the range, exactly the planned entries.
- ``range_entries``: the planned entries' bookkeeping (gaps, markers, aborted and chunked messages).
- ``task_lookup``: admin lookups of single entries (what a gap in the dispatch was).
- ``client_cache``: one Pulsar client per worker process, and opening readers with retries.
- ``arrow_rows``: messages as Arrow columns (the raw layout of ``..schemas.columns``).
- ``errors``: ReadTimeout, DataLossError and the messages that explain them.
"""
