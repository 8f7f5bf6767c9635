"""Planning: from the checkpointed offsets to the next micro-batch's end offsets and tasks.

The Spark-facing readers only answer Spark's calls: a stream's (``..stream``) go to ``micro_batch_planner``, a
batch query's (``..batch``) to ``batch_range``; those two ask the other modules:
- ``micro_batch_planner``: MicroBatchPlanner, a stream's planner on the driver (built once with its collaborators,
  by ``..planner_wiring``): each micro-batch's end offset (or Unchanged) and read tasks.
- ``batch_range``: a batch query's range (spark.read): its end, the start checked against it, its read tasks.
- ``start_positions``: where a new query starts (startingOffsets / startingTime), as a SourceOffset.
- ``read_limit``: Spark's read limit for one micro-batch (maxEntriesPerTrigger), whichever Spark line asks.
- ``message_cap``: maxMessagesPerTrigger (Kafka's maxOffsetsPerTrigger): the cap split over partitions and cut at
  the share's last message, inside an entry where it falls there.
- ``admission``: how many entries each partition advances (Spark's read limit, then the quota
  engine in ``..throttling``), and the planner's log line.
- ``data_loss``: what counts as loss (deleted ledgers or topics) and failOnDataLoss.
- ``task_ranges``: a batch's offset ranges as Spark tasks (maxEntriesPerTask), with entry lists.
- ``task_packing``: a micro-batch's ranges packed into fewer tasks (smallBatchTasks, maxTasksPerTrigger), read in turn.
- ``progress``: the backlog reported in Spark's query progress (messages per entry from
  ``..throttling.publish_rates``).
- ``trigger_floor``: minEntriesPerTrigger / maxTriggerDelay: whether an admitted batch runs now or waits.
"""
