"""Where a read task's time goes, message by message, without Spark (issue 17).

Produces a backlog (default 1,000,000 x 100 B, batched by the producer, one partition), plans it with
the source's own stream reader, then in this one process, alternating after a warm-up:

- runs the read task exactly as an executor does (`reader.read(partition)` over the planned ranges,
  every Arrow batch built), once on each read path: readPath=python (the pulsar-client loop) and
  readPath=native (the package pulsar-throttled-source-native: Arrow columns filled in C over
  libpulsar's C API, one call per entry), and
- reads the same entries with the cheapest loop over the client (`read_next`, the id, the payload),

prints the rates and their ratios (each read path against the plain loop, Spark left out),
and writes a cProfile of one read task run to bench/out/profile_read.prof with its top functions
printed (open the .prof with e.g. snakeviz or `python -m pstats`), and a py-spy flame graph of
another (sampling, native frames included: the time inside the client shows too) to
bench/out/read_flame.svg. Then reads the same messages with a C loop over libpulsar's C API
(bench/c/reader_loop.c, compiled with gcc: the floor under the native read path, which adds its
column writes and one Python call per entry), and with the Java client (bench/java/ReaderLoop.java,
run with Java's single-file launcher on the broker's jars), touching every field the columns carry:
the rate a read path with no Python object per message could approach (the native path's ceiling).

    .venv/bin/python bench/profile_read.py [--messages 1000000] [--rounds 3] [--no-flame] [--no-java] [--unbatched]
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pulsar
from pyspark.sql.streaming.datasource import ReadAllAvailable

from pulsar_throttled_source.local_broker import LocalBroker
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.read_task import ranges_of
from pulsar_throttled_source.reading.native_library import native_library
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.topics import TopicName

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import produce, quiet_logger  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def plain_read(service_url: str, topic: str, last: tuple[int, int], messages: int) -> float:
    client = pulsar.Client(service_url, logger=quiet_logger())
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    t = time.perf_counter()
    count = 0
    while True:
        msg = reader.read_next(30000)
        mid = msg.message_id()
        msg.data()
        count += 1
        if (mid.ledger_id(), mid.entry_id()) >= last and not reader.has_message_available():
            break
    elapsed = time.perf_counter() - t
    reader.close()
    client.close()
    assert count == messages, count
    return messages / elapsed


def source_read(stream: AdmissionControlStreamReader, partitions: list, messages: int, profile: cProfile.Profile | None = None) -> float:
    t = time.perf_counter()
    if profile is not None:
        profile.enable()
    rows = sum(batch.num_rows for p in partitions for batch in stream.read(p))
    if profile is not None:
        profile.disable()
    elapsed = time.perf_counter() - t
    assert rows == messages, rows
    return messages / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-flame", action="store_true", help="skip the py-spy flame graph")
    parser.add_argument("--no-java", action="store_true", help="skip the Java client's reader loop")
    parser.add_argument("--unbatched", action="store_true", help="produce one message per entry (batching off)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench-profile-read-"))
    with LocalBroker(data_dir=work / "broker") as broker:
        topic = str(TopicName.parse(f"bench-profile-read-{time.time_ns()}"))
        t0 = time.perf_counter()
        produce(broker.service_url, topic, args.messages, args.size, batching=not args.unbatched)
        print(f"produced {args.messages:,} messages of {args.size} B in {time.perf_counter() - t0:.1f} s")
        native_problem = native_library().reason
        paths = ["python"] if native_problem else ["python", "native"]
        if native_problem:
            print(f"the native read path is unavailable here ({native_problem}): the Python path only")
        streams, planned = {}, {}
        for path in paths:
            streams[path] = AdmissionControlStreamReader(parse_options({
                "service.url": broker.service_url, "admin.url": broker.admin_url, "topic": topic, "readpath": path,
                "startingOffsets": "earliest", "quotaStatePath": str(work / "quota.sqlite")}))
            start = streams[path].initialOffset()
            # The planned ranges, each read alone (a small batch would pack them: planning/task_packing.py).
            planned[path] = [r for t in streams[path].partitions(start, streams[path].latestOffset(start, ReadAllAvailable()))
                             for r in ranges_of(t)]
        partitions = planned["python"]
        last = max((p.end.ledger_id, p.end.entry_id) for p in partitions)
        print(f"planned {len(partitions)} read task(s) up to entry {last[0]}:{last[1]}")

        plain_read(broker.service_url, topic, last, args.messages)  # warm-up passes
        for path in paths:
            source_read(streams[path], planned[path], args.messages)
        plain_rates: list[float] = []
        rates: dict[str, list[float]] = {path: [] for path in paths}
        for r in range(args.rounds):
            plain_rates.append(plain_read(broker.service_url, topic, last, args.messages))
            for path in paths:
                rates[path].append(source_read(streams[path], planned[path], args.messages))
            print(f"round {r + 1}: plain loop {plain_rates[-1]:,.0f} msg/s, "
                  + ", ".join(f"read task ({path}) {rates[path][-1]:,.0f} msg/s" for path in paths))
        profiled = paths[-1]
        profile = cProfile.Profile()
        source_read(streams[profiled], planned[profiled], args.messages, profile)
        flame = None if args.no_flame else flame_graph(streams[profiled], planned[profiled], args.messages)
        java = None if args.no_java else java_rate(broker.service_url, topic, args.messages, args.rounds + 1)
        c_api = c_api_rate(broker.service_url, topic, args.messages, args.rounds + 1)
        for stream in streams.values():
            stream.stop()
    OUT.mkdir(exist_ok=True)
    profile.dump_stats(OUT / "profile_read.prof")
    plain = statistics.median(plain_rates)
    medians = {path: statistics.median(r) for path, r in rates.items()}
    print(f"plain loop over the client: {plain:,.0f} msg/s (medians of {args.rounds} rounds)")
    for path, rate in medians.items():
        print(f"the source's read task, readPath={path}: {rate:,.0f} msg/s; {rate / plain:.2f}x the plain loop")
    if "native" in medians:
        print(f"native read path / Python read path: {medians['native'] / medians['python']:.2f}x")
    source = medians[profiled]
    print(f"profile of one read task run (readPath={profiled}): {OUT / 'profile_read.prof'}; top functions by own time:")
    pstats.Stats(str(OUT / "profile_read.prof")).sort_stats("tottime").print_stats(20)
    if flame is not None:
        print(f"flame graph of one read task run (py-spy, native frames included): {flame}")
    if c_api is not None:
        print(f"libpulsar's C API in a C loop over the same messages, every column's field touched (the floor under the native "
              f"path): {c_api:,.0f} msg/s; {c_api / plain:.2f}x the plain Python loop; the read task (readPath={profiled}) "
              f"reaches {source / c_api:.2f} of it")
    if java is not None:
        print(f"the Java client's reader over the same messages, every column's field touched (a native path's ceiling): "
              f"{java:,.0f} msg/s; {java / plain:.2f}x the plain Python loop, {java / source:.2f}x the read task (readPath={profiled})")
    return 0


def java_rate(service_url: str, topic: str, messages: int, rounds: int) -> float | None:
    """The median rate of the Java reader loop's rounds after its first (the JVM warms up)."""
    from pulsar_throttled_source.local_broker import resolve_broker_jars

    source = Path(__file__).resolve().parent / "java" / "ReaderLoop.java"
    return _loop_rate("Java reader loop", "the JVM", ["java", "-cp", f"{resolve_broker_jars()}/*", str(source), service_url,
                                                     topic, str(messages), str(rounds)])


def c_api_rate(service_url: str, topic: str, messages: int, rounds: int) -> float | None:
    """The median rate of bench/c/reader_loop.c's rounds after its first (compiled here with gcc)."""
    from pulsar_throttled_source.reading.native_library import libpulsar_path

    libpulsar = libpulsar_path()
    if libpulsar is None or shutil.which("gcc") is None:
        print("no libpulsar or no gcc: the C API loop is skipped")
        return None
    OUT.mkdir(exist_ok=True)
    binary = OUT / "reader_loop"
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(Path(__file__).resolve().parent / "c" / "reader_loop.c"), "-ldl"],
                   check=True)
    return _loop_rate("C API loop", "the broker's cache", [str(binary), str(libpulsar), service_url, topic, str(messages), str(rounds)])


def _loop_rate(name: str, warms: str, command: list[str]) -> float | None:
    """Run a reader loop printing "rate <msg/s>" per round; the median of the rounds after the first."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    rates = [float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("rate ")]
    if done.returncode != 0 or len(rates) < 2:
        print(f"the {name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        return None
    print(f"{name} rounds: " + ", ".join(f"{r:,.0f}" for r in rates) + f" msg/s (the first warms {warms})")
    return statistics.median(rates[1:])


def flame_graph(stream: AdmissionControlStreamReader, partitions: list, messages: int) -> Path | None:
    """Sample this process with py-spy (the bench extra) while one read task runs."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy not found (pip install py-spy, or `make install` for the bench extra): no flame graph")
        return None
    OUT.mkdir(exist_ok=True)
    out = OUT / "read_flame.svg"
    sampler = subprocess.Popen([spy, "record", "--pid", str(os.getpid()), "--native", "--rate", "200", "--format", "flamegraph",
                                "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached before the read starts
    source_read(stream, partitions, messages)
    sampler.send_signal(2)  # SIGINT: py-spy writes the graph and exits
    _, err = sampler.communicate(timeout=120)
    if not out.exists():
        print(f"py-spy wrote no flame graph ({err.decode(errors='replace').strip()[:300]})")
        return None
    return out


if __name__ == "__main__":
    sys.exit(main())
