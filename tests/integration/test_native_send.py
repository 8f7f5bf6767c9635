"""The sink's native sender (native/src/send_*.c, sending.c) under AddressSanitizer, against the session broker, without Spark:
a write task's Arrow batches (sliced, large_binary values, every field, a message without payload) sent through a
build of the library with -fsanitize=address; an effectively-once task sent unbatched twice and then longer (the
broker's last sequence ids skip what it holds); a batch the library leaves to the Python sender mid-task (a key with a NUL
character); a send the broker refuses (a payload over maxMessageSize); effectively-once tasks in small batches (cut by
count and by bytes) that fail on such a send mid-batch, natively and after a hand-over to the Python sender, then run
again; batches overwritten once the writer moved on (the library must not read a batch after its send call). Every
topic is read back: the exact multiset of messages, nothing lost or doubled, and the batches' sizes. Spark's own runs
of both senders are in test_sink.py."""

from __future__ import annotations

import json
from collections import Counter

import requests
from helpers import create_namespace, create_topic
from native_path import json_lines, needs_native_path, run_under_asan
from sink_checks import entry_sizes

pytestmark = needs_native_path

# Run in a process with the ASan build preloaded: each case's commit message (or error) as one JSON line.
ASAN_WRITER = r'''
import json, sys
import pyarrow as pa
from pyspark.sql.types import BinaryType, LongType, MapType, StringType, StructField, StructType, TimestampType
from pulsar_throttled_source.writing.message_columns import write_columns
from pulsar_throttled_source.writing.native_sender import native_sender
from pulsar_throttled_source.writing.write_options import parse_write_options
from pulsar_throttled_source.writing.write_task import write_batches

assert native_sender().available, native_sender().reason
spec = json.loads(sys.stdin.read())
base = {"service.url": spec["service_url"], "admin.url": spec["admin_url"], "sendPath": "native"}
FIELDS = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                     StructField("properties", MapType(StringType(), StringType())), StructField("eventTime", LongType()),
                     StructField("orderingKey", StringType())])
ARROW = pa.schema([("key", pa.string()), ("value", pa.large_binary()), ("properties", pa.map_(pa.string(), pa.string())),
                   ("eventTime", pa.int64()), ("orderingKey", pa.string())])


def batches(rows, size):
    rows = [{**r, "value": None if r["value"] is None else r["value"].encode("latin-1"),  # JSON carried text and lists
             "properties": None if r["properties"] is None else [tuple(p) for p in r["properties"]]} for r in rows]
    table = pa.Table.from_pylist(rows, ARROW)
    whole = table.combine_chunks().to_batches()[0]
    return [whole.slice(i, size) for i in range(0, whole.num_rows, size)]  # slices: buffers with offsets


def scribbled(rows, size):
    """Batches of their own buffers, each overwritten once the writer asks for the next (as Spark reuses them): what
    the library sends must not be read from a batch after its send call returned."""
    import ctypes
    previous = None
    for i in range(0, len(rows), size):
        if previous is not None:
            for buf in previous.column(1).buffers():
                if buf is not None:
                    ctypes.memset(buf.address, 0x23, buf.size)
        previous = batches(rows[i:i + size], size)[0]
        yield previous


def run(name, topic, rows, size=64, scribble=False, **extra):
    try:
        made = scribbled(rows, size) if scribble else batches(rows, size)
        done = write_batches(made, parse_write_options(base | {"topic": topic} | extra), write_columns(FIELDS, True), 3)
        print("case", json.dumps({"case": name, "total": done.total, "skipped": done.skipped}), flush=True)
    except Exception as e:
        print("case", json.dumps({"case": name, "error": f"{type(e).__name__}: {e}"}), flush=True)


for name, case in spec["cases"].items():
    run(name, case["topic"], case["rows"], scribble=case.get("scribble", False), **case.get("options", {}))
'''


def _row(i: int, *, nul_key: bool = False, oversize: int = 0) -> dict:
    return {"key": (f"k\0{i}" if nul_key else f"k{i % 13}") if i % 4 else None,
            "value": (b"x" * oversize) if oversize else (None if i % 97 == 5 else f"v{i}".encode()),
            "properties": [("i", str(i)), ("src", "native")] if i % 3 else None,
            "eventTime": 1_700_000_000_000 + i if i % 5 else None, "orderingKey": f"o{i % 2}" if i % 6 == 0 else None}


def _expected(rows: list[dict]) -> Counter:
    return Counter((r["value"], r["key"] or None, tuple(sorted(r["properties"])) if r["properties"] else None,
                    r["eventTime"], r["orderingKey"]) for r in rows)


def _read(client, topic: str) -> Counter:
    import pulsar

    got: Counter = Counter()
    for partition in client.get_topic_partitions(topic):
        reader = client.create_reader(partition, pulsar.MessageId.earliest)
        try:
            while reader.has_message_available():
                m = reader.read_next(10_000)
                props = m.properties()
                got[(None if m.has_null_value() else m.data(), m.partition_key() or None,
                     tuple(sorted(props.items())) if props else None, m.event_timestamp() or None, m.ordering_key() or None)] += 1
        finally:
            reader.close()
    return got


def test_the_native_sender_sends_under_address_sanitizer(broker, admin, pulsar_client, unique, tmp_path):
    namespace = create_namespace(admin, f"public/native-send-{unique}")
    requests.post(f"{admin.base}/admin/v2/namespaces/{namespace}/deduplication", json=True, timeout=30).raise_for_status()
    every = [_row(i) for i in range(500)]
    handed_over = every[:100] + [_row(i, nul_key=True) for i in range(100, 110)] + every[110:200]
    once = [_row(i) for i in range(300)]
    failing = every[:150] + [_row(150, oversize=200_000)] + every[151:200]
    topics = {name: create_topic(admin, f"{namespace}/{name}", n) for name, n in
              (("every", 3), ("handed", 2), ("once", 2), ("failing", 2), ("batched", 2), ("handed-eo", 2), ("paced", 2),
               ("scribbled", 3), ("once-scribbled", 2))}
    eo = {"deliveryGuarantee": "effectivelyOnce", "sinkId": f"asan-{unique}"}
    # Batches of 8 rows at most, cut once their payloads reach 12 bytes (3-6 rows of these); a first attempt fails
    # mid-batch on row 150 (a payload over maxMessageSize fails its whole batch), the retry has row 150's own payload.
    small = eo | {"pulsar.producer.batchingMaxMessages": "8", "pulsar.producer.batchingMaxAllowedSizeInBytes": "12"}
    handed_eo = handed_over + [_row(i) for i in range(200, 260)]
    unbatched = eo | {"pulsar.producer.batchingEnabled": "false"}
    # Batches of 100, more than the pacing's minimum in flight: a full batch is in flight once its last row is sent.
    paced = [_row(i) for i in range(2400)]
    cases = {
        "every": {"topic": topics["every"], "rows": every},
        "handed": {"topic": topics["handed"], "rows": handed_over},
        # Unbatched (batchingEnabled=false given): a later run with more rows sends only them. (With batches a task's
        # last batch ends with its rows: a run again must have the same rows, as a Spark retry has.)
        "once-1": {"topic": topics["once"], "rows": once[:200], "options": unbatched},
        "once-2": {"topic": topics["once"], "rows": once[:200], "options": unbatched},  # a retry: everything skipped
        "once-3": {"topic": topics["once"], "rows": once, "options": unbatched},  # a longer retry: only the new rows sent
        "failing": {"topic": topics["failing"], "rows": failing},
        # each batch's value buffer overwritten after its send call (batched: the messages wait for their batch to close)
        "scribbled": {"topic": topics["scribbled"], "rows": every, "scribble": True},
        "once-scribbled": {"topic": topics["once-scribbled"], "rows": once, "scribble": True,
                           "options": eo | {"sinkId": f"asan-scribbled-{unique}"}},
        "batched-1": {"topic": topics["batched"], "rows": once[:150] + [_row(150, oversize=200_000)] + once[151:], "options": small},
        "batched-2": {"topic": topics["batched"], "rows": once, "options": small},
        "handed-eo-1": {"topic": topics["handed-eo"], "rows": handed_eo[:150] + [_row(150, oversize=200_000)] + handed_eo[151:],
                        "options": small},
        "handed-eo-2": {"topic": topics["handed-eo"], "rows": handed_eo, "options": small},
        "paced": {"topic": topics["paced"], "rows": paced, "options": eo | {"pulsar.producer.batchingMaxMessages": "100"}},
    }
    encoded = {name: {**case, "rows": [{**r, "value": r["value"].decode("latin-1") if r["value"] else None} for r in case["rows"]]}
               for name, case in cases.items()}
    spec = {"service_url": broker.service_url, "admin_url": broker.admin_url, "cases": encoded}
    results = {r["case"]: r for r in json_lines(run_under_asan(tmp_path, ASAN_WRITER, stdin=json.dumps(spec)), "case")}

    assert results["every"] == {"case": "every", "total": 500, "skipped": 0}
    assert _read(pulsar_client, topics["every"]) == _expected(every)
    assert results["handed"]["total"] == 200  # the first 100 rows natively, the rest by the Python sender
    assert _read(pulsar_client, topics["handed"]) == _expected(handed_over)
    assert [results[f"once-{i}"]["skipped"] for i in (1, 2, 3)] == [0, 200, 200]
    assert _read(pulsar_client, topics["once"]) == _expected(once)  # every row once
    assert "MessageTooBig" in results["failing"]["error"] and topics["failing"] in results["failing"]["error"]
    assert _read(pulsar_client, topics["failing"]) == _expected(every[:150])  # nothing after the failed send
    assert results["scribbled"]["total"] == 500 and results["once-scribbled"]["total"] == 300
    assert _read(pulsar_client, topics["scribbled"]) == _expected(every)
    assert _read(pulsar_client, topics["once-scribbled"]) == _expected(once)
    assert results["paced"]["total"] == len(paced) and _read(pulsar_client, topics["paced"]) == _expected(paced)
    assert max(entry_sizes(pulsar_client, topics["paced"])) == 100
    for name, rows in (("batched", once), ("handed-eo", handed_eo)):
        assert "MessageTooBig" in results[f"{name}-1"]["error"], results[f"{name}-1"]
        retry = results[f"{name}-2"]
        assert retry["skipped"] > 0 and retry["total"] + retry["skipped"] == len(rows), retry
        assert _read(pulsar_client, topics[name]) == _expected(rows)  # every row once
        sizes = entry_sizes(pulsar_client, topics[name])
        assert max(sizes) <= 8 and sum(n for size, n in sizes.items() if size > 1) > len(rows) / 8, sizes  # batched
