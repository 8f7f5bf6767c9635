"""A read task's peak memory against the size of its range (issue 17): it must stay flat.

Produces 1,000,000 unbatched messages of 100 B to one partition (one entry each), plans two ranges
with the source's own stream reader (the first 100,000 entries, and all 1,000,000; one read task
each, maxEntriesPerTask=0), and runs each read task in a fresh process exactly as an executor does
(`reader.read(partition)`, every Arrow batch built and dropped, as Spark consumes them). Prints per
range the rows read, the process's RSS before the read, its peak RSS, and the peak's growth; the
target is a 1,000,000-entry range growing no more than the 100,000-entry one plus 10 %.

    .venv/bin/python bench/read_memory.py [--messages 1000000] [--small 100000]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import pickle
import resource
import sys
import tempfile
import time
from pathlib import Path

import psutil
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import produce  # noqa: E402


def read_in_this_process(task: bytes, answer: multiprocessing.connection.Connection) -> None:
    """An executor's Python worker: unpickle the reader and its range, read, drop each batch."""
    reader, partition = pickle.loads(task)
    before = psutil.Process().memory_info().rss
    t = time.perf_counter()
    rows = sum(batch.num_rows for batch in reader.read(partition))
    elapsed = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes
    answer.send((rows, before, peak, elapsed))


def measure(reader: AdmissionControlStreamReader, start: dict, end: dict) -> tuple[int, int, int, int, float]:
    [partition] = list(reader.partitions(start, end))
    entries = partition.entries
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, like a new Python worker
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=read_in_this_process, args=(pickle.dumps((reader, partition)), theirs))
    child.start()
    rows, before, peak, elapsed = ours.recv()
    child.join()
    return entries, rows, before, peak, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000, help="entries of the smaller range")
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench-read-memory-"))
    with LocalBroker(data_dir=work / "broker") as broker:
        topic = str(TopicName.parse(f"bench-read-memory-{time.time_ns()}"))
        t0 = time.perf_counter()
        produce(broker.service_url, topic, args.messages, args.size, batching=False)
        print(f"produced {args.messages:,} unbatched messages of {args.size} B in {time.perf_counter() - t0:.1f} s")
        reader = AdmissionControlStreamReader(parse_options({
            "service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic,
            "startingOffsets": "earliest", "maxEntriesPerTask": "0", "quotaStatePath": str(work / "quota.sqlite")}))
        start = reader.initialOffset()
        results = {}
        for name, limit in (("small", ReadMaxRows(args.small)), ("large", ReadAllAvailable())):
            end = reader.latestOffset(start, limit)
            entries, rows, before, peak, elapsed = measure(reader, start, end)
            results[name] = (peak - before)
            print(f"range of {entries:,} entries: {rows:,} rows in {elapsed:.1f} s; RSS before the read {before / 2**20:.0f} MB, "
                  f"peak {peak / 2**20:.0f} MB, growth {(peak - before) / 2**20:.1f} MB")
        reader.stop()
    flat = results["large"] <= results["small"] * 1.1 + 2 * 2**20
    print(f"peak growth, {args.messages:,}-entry range against {args.small:,}: "
          f"{results['large'] / max(1, results['small']):.2f}x; target flat (<= 1.1x + 2 MB): {'met' if flat else 'MISSED'}")
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
