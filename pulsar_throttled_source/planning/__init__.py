"""Planning: from the checkpointed offsets to the next micro-batch's end offsets and tasks.

The Spark-facing reader (``..stream``) delegates each question to one module:
- ``start_positions``: where a new query starts (startingOffsets / startingTime), as a SourceOffset.
- ``read_limit``: Spark's read limit for one micro-batch (maxEntriesPerTrigger), whichever Spark line asks.
- ``admission``: how many entries each partition advances (Spark's read limit, then the quota
  engine in ``..throttling``), and the planner's log line.
- ``data_loss``: what counts as loss (deleted ledgers or topics) and failOnDataLoss.
- ``task_ranges``: a batch's offset ranges as Spark tasks (maxEntriesPerTask), with entry lists.
- ``progress``: the backlog reported in Spark's query progress (messages per entry from
  ``..throttling.publish_rates``).
- ``trigger_floor``: minEntriesPerTrigger / maxTriggerDelay: whether an admitted batch runs now or waits.
"""
