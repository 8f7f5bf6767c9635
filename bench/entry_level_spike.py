"""Issue 44's entry-level spike: what a read path that received whole entries, and split them into Arrow columns
itself, would spend per message, against the native read path (libpulsar's per-message receive) and libpulsar's own
C loop, over the same messages in one run. A measurement, not a product.

Produces a backlog (default 1,000,000 x 100 B with a key and an event time, batched by the producer, one topic),
then, after a warm-up, alternating for `--rounds`:

- the source's read task on readPath=native (as bench/profile_read.py runs it: `reader.read(partition)`, every
  Arrow batch built);
- the entry split: every entry of the topic fetched once, before the rounds, through the admin API
  (`GET .../ledger/L/entry/E`: the stored payload of a batched entry, each message as [size][SingleMessageMetadata]
  [payload]), then split by bench/c/entry_split.c (compiled here with gcc; bounds checked) straight into the buffers
  of four Arrow columns (value, key, event time, sequence id) that pyarrow wraps without a copy. No network in the
  timing: what the split costs per message, the part of a read that would replace the client's per-message work.

Then libpulsar's C loop over the same messages (bench/c/reader_loop.c, profile_read.py's floor under any read path on
that client). What an entry-level read path would reach is bounded by the broker's dispatch and the network (one frame
per entry, not per message) plus the split: the figures say how much of the read task's time per message the split
would leave.

    .venv/bin/python bench/entry_level_spike.py [--messages 1000000] [--size 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pulsar
import pyarrow as pa
import requests
from pyspark.sql.streaming.datasource import ReadAllAvailable

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.reading.native_library import native_library
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_read import OUT, c_api_rate, source_read  # noqa: E402
from throughput import quiet_logger  # noqa: E402


def produce_keyed(service_url: str, topic: str, messages: int, size: int) -> None:
    """As throughput.produce, with a key and an event time on every message (what the columns carry)."""
    client = pulsar.Client(service_url, logger=quiet_logger())
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True, max_pending_messages=50000)
    body = b"x" * size
    for i in range(messages):
        producer.send_async(body, None, partition_key=f"key-{i % 1000}", event_timestamp=1_700_000_000_000 + i)
    producer.flush()
    producer.close()
    client.close()


def fetch_entries(admin_url: str, topic: TopicName, runs: tuple[tuple[int, int, int], ...]) -> tuple[bytes, list[int], int]:
    """Every planned entry's stored payload through the admin API: (the payloads end to end, their starts and the
    end, the messages the broker says they hold)."""
    session = requests.Session()
    chunks: list[bytes] = []
    starts, at, messages = [0], 0, 0
    for ledger, first, count in runs:
        for entry in range(first, first + count):
            resp = session.get(f"{admin_url}/admin/v2/{topic.rest_path}/ledger/{ledger}/entry/{entry}", timeout=30)
            resp.raise_for_status()
            compression = resp.headers.get("X-Pulsar-compression", "NONE")
            assert compression in ("NONE", ""), f"entry {ledger}:{entry} is {compression}-compressed: the spike splits plain entries"
            messages += int(resp.headers.get("X-Pulsar-num-batch-message", "1"))
            chunks.append(resp.content)
            at += len(resp.content)
            starts.append(at)
    return b"".join(chunks), starts, messages


class EntrySplit:
    """bench/c/entry_split.c, compiled with gcc, over a fixed set of entries."""

    def __init__(self, data: bytes, starts: list[int], messages: int) -> None:
        OUT.mkdir(exist_ok=True)
        library = OUT / "entry_split.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library),
                        str(Path(__file__).resolve().parent / "c" / "entry_split.c")], check=True)
        self._lib = ctypes.CDLL(str(library))
        self._lib.split_entries.restype = ctypes.c_int64
        self._data, self._messages = data, messages
        self._starts = (ctypes.c_int64 * len(starts))(*starts)
        self._entries = len(starts) - 1

    def split(self) -> pa.RecordBatch:
        """One pass: fresh Arrow buffers (as every read allocates its batches), filled in C, wrapped without a copy."""
        n = self._messages
        value_offsets, key_offsets = pa.allocate_buffer(4 * (n + 1)), pa.allocate_buffer(4 * (n + 1))
        value_data, key_data = pa.allocate_buffer(len(self._data)), pa.allocate_buffer(len(self._data))
        event_time, sequence_id = pa.allocate_buffer(8 * n), pa.allocate_buffer(8 * n)
        address = ctypes.c_void_p
        rows = self._lib.split_entries(
            ctypes.c_char_p(self._data), self._starts, ctypes.c_int32(self._entries),
            address(value_offsets.address), address(value_data.address), ctypes.c_int64(value_data.size),
            address(key_offsets.address), address(key_data.address), ctypes.c_int64(key_data.size),
            address(event_time.address), address(sequence_id.address), ctypes.c_int64(n))
        assert rows == n, f"split {rows} rows, expected {n}"
        return pa.RecordBatch.from_arrays([
            pa.Array.from_buffers(pa.binary(), n, [None, value_offsets, value_data]),
            pa.Array.from_buffers(pa.string(), n, [None, key_offsets, key_data]),
            pa.Array.from_buffers(pa.int64(), n, [None, event_time]),
            pa.Array.from_buffers(pa.int64(), n, [None, sequence_id]),
        ], names=["value", "key", "eventTime", "sequenceId"])

    def rate(self) -> tuple[float, float]:
        """(messages a second of wall time, CPU microseconds per message) of one pass."""
        wall, cpu = time.perf_counter(), time.process_time()
        batch = self.split()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert batch.num_rows == self._messages
        return self._messages / wall, cpu * 1e6 / self._messages


def read_task_rate(stream: AdmissionControlStreamReader, partitions: list, messages: int) -> tuple[float, float]:
    """(messages a second, CPU microseconds per message: this process, the client's threads included)."""
    cpu = time.process_time()
    rate = source_read(stream, partitions, messages)
    return rate, (time.process_time() - cpu) * 1e6 / messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if native_library().reason:
        print(f"the native read path is unavailable here ({native_library().reason})")
        return 1
    work = Path(tempfile.mkdtemp(prefix="bench-entry-spike-"))
    with LocalBroker(data_dir=work / "broker") as broker:
        topic = TopicName.parse(f"bench-entry-spike-{time.time_ns()}")
        t0 = time.perf_counter()
        produce_keyed(broker.service_url, str(topic), args.messages, args.size)
        print(f"produced {args.messages:,} messages of {args.size} B (a key and an event time each) in "
              f"{time.perf_counter() - t0:.1f} s")
        stream = AdmissionControlStreamReader(parse_options({
            "service.url": broker.service_url, "admin.url": broker.admin_url, "topic": str(topic), "readpath": "native",
            "startingOffsets": "earliest", "quotaStatePath": str(work / "quota.sqlite")}))
        start = stream.initialOffset()
        planned = list(stream.partitions(start, stream.latestOffset(start, ReadAllAvailable())))
        runs = tuple(run for p in planned for run in (p.runs or ()))
        t0 = time.perf_counter()
        data, starts, messages = fetch_entries(broker.admin_url, topic, runs)
        print(f"fetched {len(starts) - 1:,} entries ({len(data):,} B, {messages:,} messages) through the admin API in "
              f"{time.perf_counter() - t0:.1f} s")
        assert messages == args.messages, messages
        splitter = EntrySplit(data, starts, messages)
        first = splitter.split()  # warm-ups; the split's rows are the payloads the producer sent
        assert first.column("value")[0].as_py() == b"x" * args.size and first.column("key")[-1].as_py() == f"key-{(messages - 1) % 1000}"
        assert first.column("eventTime")[-1].as_py() == 1_700_000_000_000 + messages - 1
        read_task_rate(stream, planned, messages)
        reads, splits = [], []
        for r in range(args.rounds):
            reads.append(read_task_rate(stream, planned, messages))
            splits.append(splitter.rate())
            print(f"round {r + 1}: read task (native) {reads[-1][0]:,.0f} msg/s, {reads[-1][1]:.2f} CPU us/msg; "
                  f"entry split {splits[-1][0]:,.0f} msg/s, {splits[-1][1]:.3f} CPU us/msg")
        c_api = c_api_rate(broker.service_url, str(topic), messages, args.rounds + 1)
        stream.stop()
    read_rate, read_cpu = statistics.median(r[0] for r in reads), statistics.median(r[1] for r in reads)
    split_rate, split_cpu = statistics.median(s[0] for s in splits), statistics.median(s[1] for s in splits)
    print(f"read task, readPath=native: {read_rate:,.0f} msg/s, {read_cpu:.2f} CPU us per message (medians)")
    print(f"entry split into Arrow columns (no client, no network): {split_rate:,.0f} msg/s, {split_cpu:.3f} CPU us per "
          f"message: {split_cpu / read_cpu:.3f} of the read task's CPU per message")
    if c_api is not None:
        print(f"libpulsar's C loop over the same messages: {c_api:,.0f} msg/s (the ceiling of a read path on that client)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
