"""The pieces of bench/throttle_accuracy.py, one role per module:

- `scenarios`: what each scenario runs (mode, quota, unit, data); `targets`: what each must meet;
- `backlogs`: topics filled before a run; `bursts`: the live producer of the idle-gaps scenario;
- `recorder`: what each micro-batch delivered (a foreachBatch sink) and when it was planned (query progress);
- `charges`: the source's own bucket charges, polled while a query runs (exact windows, debt);
- `windows`: attributing deliveries to quota windows; `long_run`: delivered over a span vs quota x windows;
- `stored_bytes`: the stored size of delivered entries (byte quotas);
- `query`: starting and stopping one throttled query; `result`: what runners are given and return;
- `drain`, `idle_gaps`, `shared`: one runner per kind of scenario; `shared_job`: the second Spark
  application of the shared-redis scenarios (a subprocess);
- `report`, `plot`: what is printed and drawn.
"""
