"""Writing to Pulsar: the sink of df.write / df.writeStream .format("pulsar-throttled").

Options -> columns -> routing -> producers -> the write task, over the reader's options parsing and its client
cache (one pulsar.Client per worker for reads and writes):
- ``write_options``: a write's options (WriteOptions), a read's own options refused on a write and a write's on a read;
  ``producer_settings``: pulsar.producer.* as create_producer's arguments, and the sink's defaults.
- ``message_columns``: which columns make which part of a message (the reader's names, either layout), checked on
  the driver; one row made into one message on an executor.
- ``payload_schema``: the topic's schema (admin API) and the payload columns checked against it, before the first
  send; ``payload_encoding``: a row's payload encoded with it (AVRO, JSON, primitives), the schema producers declare.
- ``routing``: the partition of each message (a partition column, a key hashed as a Java producer does, round robin).
- ``producers``: the worker's producers, kept across tasks and batches, closed when idle.
- ``effectively_once``: deliveryGuarantee=effectivelyOnce on broker deduplication: producer names, sequence ids,
  the deduplication check; ``batch_cuts``: where its batches are cut and which rows a retry skips; ``recent_answers``: what the process learnt of a topic (deduplication, schema), trusted
  for a while.
- ``write_quota``: publishThrottlingRateInMsg/InByte: a task's permits per partition and window, from the quota store;
  ``write_congestion``: adaptiveThrottling for writes, a worker's congestion controller scaling those quotas.
- ``arrow_messages``: Arrow record batches (an Arrow writer's input) made into messages column by column (a schema's
  payloads too).
- ``native_sender``: the native library's sender (native/src/) loaded and checked, and an Arrow batch's columns
  handed to it as buffers; ``native_task``: a task's state in the library and its native producers;
  ``native_write``: which sender a task takes (option sendPath), an Arrow writer's task sent natively, and the rest
  of a task whose batch the library cannot encode handed to the Python sender.
- ``write_task``: one task's messages (from rows or Arrow batches) sent, flushed and confirmed before its commit
  message returns; ``confirmations``: the broker's answers to its sends, and how many may be in flight.
- ``writers``: the Spark-facing batch and stream writers (Arrow writers where PySpark has them; commit and abort on
  the driver).
"""
