"""Reading: what a Spark task does on an executor with each planned range (start, end] it carries.

(What a task carries, PartitionRange or PackedRanges and ClientConfig, is ``..read_task``: planning builds it.)
- ``read``: a read task: its ranges in turn, each with a non-durable reader over exactly the planned entries, on
  either read path.
- ``range_reader``: the one read loop of both paths, entry by entry: every rule of where a range starts and ends,
  and the grouping rules both paths' sources follow.
- ``reader_start``: where a range's reader starts, on either path.
- ``python_read``: the Python path's side of it: the pulsar-client reader, message by message into ``arrow_rows``.
- ``range_entries``: the planned entries' bookkeeping (gaps, markers, aborted and chunked messages).
- ``task_lookup``: admin lookups of single entries (what a gap in the dispatch was).
- ``client_factories``: how a worker makes each path's client, with the query's credentials.
- ``client_cache``: one client per worker process and read path, and the native readers parked on them.
- ``reader_calls``: opening a reader and asking whether messages are left, retried while the broker moves; closing it.
- ``receiver_queue``: how many permits a reader gives the broker (its queue, from what its range holds).
- ``arrow_rows``: messages as Arrow columns (the raw layout of ``..schemas.columns``).
- ``read_errors``: ReadTimeout, DataLossError and the messages that explain them; scrub_error, the one scrub of a read task's errors.
- ``range_progress``: what the read loop decides about its range (which entries belong, when it is done).
- ``decoded_rows``: the rows of a topic with a schema (payloads decoded by ``..schemas``).
- ``parked_readers``: readers left open where their range ended, for the next range.
- ``watch``: lookups and opening a reader given up when the topic is deleted.
- ``read_path``: what a read path is (ReadPath: open a range's reader as the loop's source, close it) and which
  one a task takes.
- The native read path: ``native_library`` (loading and checking the C
  library), ``native_reader`` (its reader and the Arrow batches it fills), ``native_read`` (its side of the read loop).
"""
