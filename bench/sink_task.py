"""One sink write task without Spark (write_task.write_batches), as Spark's Arrow writer hands it batches: `--rows`
rows of `--size`-byte binary values in batches of `--batch` rows into a new `--partitions`-partition topic on a local
broker. Prints per pass the rate (rows over the write's wall time), the process's CPU per row (every thread: the task's
and libpulsar's) and the task thread's own CPU per row. Every topic is checked to hold exactly what was sent.

    .venv/bin/python bench/sink_task.py --rows 1000000 --rounds 3
    .venv/bin/python bench/sink_task.py --variant old=/tmp/old.so --variant new=/tmp/new.so --env new:KNOB=1

Each pass runs in a process of its own (a fresh client, one warm-up task of `--warm` rows on the same topic first,
so the producers are open, as on a Spark worker that wrote before). Variants (`--variant NAME=LIBRARY`: a build of
native/src loaded through PULSAR_THROTTLED_NATIVE_LIBRARY; `installed` for the installed one) run interleaved, each
round starting one variant later; `--env NAME:K=V` and `--option NAME:K=V` give one variant an environment variable
or a sink option.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import requests

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.reading.native_library import LIBRARY_ENV

CHILD = r'''
import json, resource, sys, time
import pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType
from pulsar_throttled_source.writing.message_columns import write_columns
from pulsar_throttled_source.writing.native_sender import native_sender
from pulsar_throttled_source.writing.write_options import parse_write_options
from pulsar_throttled_source.writing.write_task import write_batches

spec = json.loads(sys.stdin.read())
if spec["options"].get("sendPath", "native") == "native":
    assert native_sender().available, native_sender().reason
size, batch = spec["size"], spec["batch"]


def batches(first, rows):
    """Values as Spark's bench makes them (the row number in 12 digits, then 'x's), built without a Python object per row."""
    import numpy as np
    for start in range(first, first + rows, batch):
        n = min(batch, first + rows - start)
        data = np.full((n, size), ord("x"), dtype=np.uint8)
        digits = np.char.zfill(np.arange(start, start + n).astype("U12"), 12).astype("S12")
        data[:, :12] = np.frombuffer(digits.tobytes(), dtype=np.uint8).reshape(n, 12)
        offsets = pa.py_buffer(np.arange(0, (n + 1) * size, size, dtype=np.int32).tobytes())
        values = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(data.tobytes())])
        yield pa.record_batch([values], names=["value"])


options = parse_write_options(spec["options"])
columns = write_columns(StructType([StructField("value", BinaryType())]), True)
write_batches(list(batches(0, spec["warm"])), options, columns, 0)
made = list(batches(spec["warm"], spec["rows"]))


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


c0, t0, w0 = cpu(), time.thread_time(), time.perf_counter()
done = write_batches(made, options, columns, 1)
w1, t1, c1 = time.perf_counter(), time.thread_time(), cpu()
assert done.total == spec["rows"], done
print("RESULT " + json.dumps({"seconds": w1 - w0, "cpu_s": c1 - c0, "thread_s": t1 - t0}), flush=True)
'''


def messages_in(admin_url: str, topic: str) -> int:
    path = topic.replace("persistent://", "persistent/")
    stats = requests.get(f"{admin_url}/admin/v2/{path}/partitioned-stats", timeout=60).json()
    return int(stats["msgInCounter"])


def _pairs(given: list[str], what: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for item in given:
        name, _, kv = item.partition(":")
        key, sep, value = kv.partition("=")
        if not sep:
            raise SystemExit(f"--{what} wants NAME:K=V, got {item!r}")
        out.setdefault(name, {})[key] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--warm", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10_000, help="rows per Arrow batch (Spark's maxRecordsPerBatch)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--guarantee", default="atLeastOnce", choices=("atLeastOnce", "effectivelyOnce"))
    parser.add_argument("--variant", action="append", default=[], help="NAME=LIBRARY (or NAME=installed)")
    parser.add_argument("--env", action="append", default=[], help="NAME:K=V, an environment variable for one variant")
    parser.add_argument("--option", action="append", default=[], help="NAME:K=V, a sink option for one variant")
    parser.add_argument("--perf", default="", help="record each pass with `perf record -g` into DIR/<variant>-<round>.data")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) or {"installed": "installed"}
    envs, extra = _pairs(args.env, "env"), _pairs(args.option, "option")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    names = list(variants)
    with LocalBroker() as broker:
        admin = broker.admin_url
        namespace = "default"
        if args.guarantee == "effectivelyOnce":
            namespace = "bench-eo"
            requests.put(f"{admin}/admin/v2/namespaces/public/bench-eo", json={}, timeout=60)
            requests.post(f"{admin}/admin/v2/namespaces/public/bench-eo/deduplication", json=True, timeout=60).raise_for_status()
        passes = 0
        for r in range(args.rounds):
            print(f"round {r + 1}: {args.rows:,} rows of {args.size} B, {args.partitions} partitions, load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
            for name in names[r % len(names):] + names[:r % len(names)]:
                passes += 1
                topic = f"persistent://public/{namespace}/bench-task-{int(time.time())}-{passes}"
                path = topic.replace("persistent://", "persistent/")
                requests.put(f"{admin}/admin/v2/{path}/partitions", json=args.partitions, timeout=60).raise_for_status()
                options = {"service.url": broker.service_url, "admin.url": admin, "topic": topic, "sendPath": "native",
                           "deliveryGuarantee": args.guarantee, **extra.get(name, {})}
                if args.guarantee == "effectivelyOnce":
                    options["sinkId"] = f"bench-{passes}"
                env = {**os.environ, **envs.get(name, {})}
                if variants[name] != "installed":
                    env[LIBRARY_ENV] = variants[name]
                spec = {"options": options, "rows": args.rows, "warm": args.warm, "size": args.size, "batch": args.batch}
                command = [sys.executable, "-c", CHILD]
                if args.perf:
                    os.makedirs(args.perf, exist_ok=True)
                    command = ["perf", "record", "-q", "-F", "499", "-g", "-o", f"{args.perf}/{name}-{r + 1}.data", "--", *command]
                done = subprocess.run(command, input=json.dumps(spec), env=env, capture_output=True, text=True, timeout=3600)
                lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                if done.returncode != 0 or not lines:
                    raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
                got = messages_in(admin, topic)
                if got != args.rows + args.warm:
                    raise SystemExit(f"{name}: {got:,} messages in {topic}, expected {args.rows + args.warm:,}")
                res = json.loads(lines[0][len("RESULT "):])
                res.update(rate=args.rows / res["seconds"], cpu_us=res["cpu_s"] / args.rows * 1e6,
                           thread_us=res["thread_s"] / args.rows * 1e6)
                results[name].append(res)
                print(f"  {name:>16}: {res['rate']:>10,.0f} rows/s, {res['cpu_us']:5.2f} us CPU/row (task thread "
                      f"{res['thread_us']:5.2f}), load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"medians over {args.rounds} rounds:")
    for name, rs in results.items():
        print(f"  {name:>16}: {statistics.median(x['rate'] for x in rs):>10,.0f} rows/s, "
              f"{statistics.median(x['cpu_us'] for x in rs):5.2f} us CPU/row (task thread "
              f"{statistics.median(x['thread_us'] for x in rs):5.2f}); min CPU/row {min(x['cpu_us'] for x in rs):5.2f}")


if __name__ == "__main__":
    main()
