"""Issue 31: the native read path returns the same Arrow batches as the Python path.

Each case writes a topic as producers in the field do (batching, compression, chunking,
encryption, transactions, Java's binary keys and tombstones, schemas), plans it once, and reads
every planned range twice in this process, once per read path (readPath=python and native). The
batches must be equal column by column and valid Arrow, and their payloads exactly what was sent.
Small `maxEntriesPerTask` and `maxRowsPerArrowBatch` make ranges start and end inside ledgers, at
a ledger's first entry, and batches end inside producers' batches.

Then: a missing or broken native library falls back to the Python path with one WARN (readPath=auto)
or fails naming why (readPath=native), and the library reads under AddressSanitizer."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
from collections import Counter
from pathlib import Path

import pulsar
import pyarrow as pa
import pytest
from helpers import create_topic, mixed_backlog, produce, produce_encrypted
from java_producer import HISTORY, JavaProducer
from native_path import json_lines, needs_native_path, run_under_asan
from runtime_wheel import release_artifacts
from streaming import plan

from pulsar_throttled_source.read_task import PartitionRange
from pulsar_throttled_source.reading import native_library as native_module
from pulsar_throttled_source.reading.read import read_range
from pulsar_throttled_source.reading.read_path import NativeReadPathUnavailable

pytestmark = needs_native_path  # skips only where no C compiler could build it (tests/native_path.py)

SMALL = {"maxEntriesPerTask": "7", "maxRowsPerArrowBatch": "5"}


def on_path(part: PartitionRange, path: str) -> PartitionRange:
    return PartitionRange(part.partition, part.partition_index, part.start, part.end, part.entries,
                          dataclasses.replace(part.config, read_path=path), part.runs).inside_entries(
        part.first_message, part.end_message)


def read_on(parts: list[PartitionRange], path: str) -> list[pa.RecordBatch]:
    return [batch for part in parts for batch in read_range(on_path(part, path))]


def assert_same_batches(parts: list[PartitionRange]) -> list[pa.RecordBatch]:
    """Both paths' batches, equal one by one; returns the native path's."""
    python, native = read_on(parts, "python"), read_on(parts, "native")
    assert [b.num_rows for b in native] == [b.num_rows for b in python]
    for p, n in zip(python, native, strict=True):
        n.validate(full=True)
        assert n.schema == p.schema
        for name in p.schema.names:
            assert n.column(name).equals(p.column(name)), f"column {name} differs:\n{p.column(name)}\n{n.column(name)}"
    return native


def payloads(batches: list[pa.RecordBatch]) -> Counter:
    return Counter(v for b in batches for v in b.column("value").to_pylist())


def test_batched_messages_with_every_field(broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"native-fields-{unique}", 3)
    sent = produce(pulsar_client, topic, 300, batch=9)
    producer = pulsar_client.create_producer(topic, batching_enabled=True, batching_max_messages=4,
                                             batching_max_publish_delay_ms=50)
    extra = Counter()
    for i in range(40):
        body = b"" if i % 5 == 0 else f"e-{i}".encode()  # empty payloads, not null values
        producer.send_async(body, None, event_timestamp=1_700_000_000_000 + i if i % 2 else None,
                            ordering_key=f"o{i}" if i % 3 == 0 else None, properties={"n": str(i), "z": "é"} if i % 4 else {})
        extra[body] += 1
    producer.flush()
    producer.close()
    native = assert_same_batches(plan(broker, topic, **SMALL))
    assert payloads(native) == Counter(s.payload for s in sent) + extra
    assert any(b.column("eventTime").null_count < b.num_rows for b in native)
    assert any(v is not None for b in native for v in b.column("orderingKey").to_pylist())


def test_unbatched_messages(broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"native-unbatched-{unique}", 2)
    sent = produce(pulsar_client, topic, 130)  # several ledgers per partition
    assert payloads(assert_same_batches(plan(broker, topic, **SMALL))) == Counter(s.payload for s in sent)


@pytest.mark.parametrize("codec", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_compressed_batches(broker, admin, pulsar_client, unique, codec):
    topic = create_topic(admin, f"native-{codec.lower()}-{unique}", 0)
    producer = pulsar_client.create_producer(topic, compression_type=getattr(pulsar.CompressionType, codec),
                                             batching_enabled=True, batching_max_messages=25, batching_max_publish_delay_ms=50)
    sent = Counter()
    for i in range(200):
        body = f"{codec}-{i}-".encode() * 5
        producer.send_async(body, None, partition_key=f"k{i % 3}")
        sent[body] += 1
    producer.flush()
    producer.close()
    assert payloads(assert_same_batches(plan(broker, topic, maxEntriesPerTask="3", maxRowsPerArrowBatch="40"))) == sent


def test_chunked_messages_among_batches(broker, admin, pulsar_client, unique):
    topic = create_topic(admin, f"native-chunked-{unique}", 2)
    sent = mixed_backlog(pulsar_client, topic)
    for extra in (SMALL, {}):
        assert payloads(assert_same_batches(plan(broker, topic, **extra))) == Counter(s.payload for s in sent)


def test_encrypted_topic_with_the_key_and_without(broker, admin, pulsar_client, unique, key_pair):
    topic = create_topic(admin, f"native-encrypted-{unique}", 0)
    sent = produce_encrypted(pulsar_client, topic, key_pair)
    public, private = key_pair
    with_key = assert_same_batches(plan(broker, topic, **{"encryption.privateKeyPath": private, "encryption.publicKeyPath": public}))
    assert payloads(with_key) == sent
    consumed = assert_same_batches(plan(broker, topic, cryptoFailureAction="consume"))
    # Delivered still encrypted: a message per unbatched entry, a producer batch as one message.
    assert 15 < sum(b.num_rows for b in consumed) < sum(sent.values())
    assert not set(payloads(consumed)) & set(sent)
    assert assert_same_batches(plan(broker, topic, cryptoFailureAction="discard")) == []
    for path in ("python", "native"):
        with pytest.raises(Exception, match="encrypt"):
            read_on(plan(broker, topic), path)


def test_transactional_topic(broker, admin, txn_jvm, unique):
    topic = create_topic(admin, f"native-txn-{unique}", 0)
    txn_jvm.on(topic).do(*HISTORY)
    native = assert_same_batches(plan(broker, topic, maxEntriesPerTask="2"))
    assert payloads(native) == Counter({b"m0": 1, b"c0": 1, b"c1": 1, b"m1": 1})


def test_java_binary_keys_empty_keys_tombstones_and_empty_payloads(broker, admin, unique):
    topic = create_topic(admin, f"native-java-{unique}", 0)
    producer = JavaProducer("SchemaProducer.java", broker.service_url)
    try:
        for key, value in [("hex:00ff10", "v:binary key"), ("str:", "v:empty key"), ("str:k", "null"), ("none", "v:")]:
            producer.do("\t".join(["send", topic, "bytes", key, value]))
        producer.do("flush")
    finally:
        producer.close()
    native = assert_same_batches(plan(broker, topic))
    rows = [(r["key"], r["value"]) for b in native for r in b.to_pylist()]
    assert Counter(rows) == Counter([("AP8Q", b"binary key"), (None, b"empty key"), ("k", None), (None, b"")])


def test_schema_topics_decode_on_the_native_value_column(broker, admin, pulsar_client, unique):
    class Reading(pulsar.schema.Record):
        sensor = pulsar.schema.String()
        value = pulsar.schema.Double()

    for kind, schema in (("avro", pulsar.schema.AvroSchema(Reading)), ("json", pulsar.schema.JsonSchema(Reading)),
                         ("string", pulsar.schema.StringSchema())):
        topic = create_topic(admin, f"native-schema-{kind}-{unique}", 2)
        producer = pulsar_client.create_producer(topic, schema=schema, batching_enabled=True, batching_max_messages=6,
                                                 batching_max_publish_delay_ms=50)
        for i in range(60):
            producer.send_async(Reading(sensor=f"s{i}", value=i / 2) if kind != "string" else f"text-{i}", None)
        producer.flush()
        producer.close()
        native = assert_same_batches(plan(broker, topic, **SMALL))
        assert sum(b.num_rows for b in native) == 60
        assert native[0].schema.names[0] in ("sensor", "value")


def test_a_range_starting_and_ending_inside_batched_entries_makes_the_same_batches(broker, admin, pulsar_client, unique):
    """A batch query's bounds inside producers' batches: the rows of the first entry before its start are dropped
    from the batch being filled. Both paths count them until the batch is exported (range_reader.DroppedRows), so
    they cut the same Arrow batches (the Python path once deleted them at once and cut fuller ones)."""
    topic = create_topic(admin, f"native-inside-{unique}", 0)
    sent = produce(pulsar_client, topic, 120, batch=10)
    (part,) = plan(broker, topic, maxRowsPerArrowBatch="4")
    entries = sorted({s.position[:2] for s in sent})
    assert (part.end.ledger_id, part.end.entry_id) == entries[-1]
    first, end = (*entries[0], 3), (*entries[-1], 7)  # the range's first and end entries, bounded
    bounded = part.inside_entries(first, end)
    assert payloads(assert_same_batches([bounded])) == Counter(s.payload for s in sent if first <= s.position < end)


def _budget_library(tmp_path: Path, budget: int) -> Path:
    """The library with a small value budget per batch (columns.c PAR_BATCH_VALUE_BYTES; Arrow's 32-bit offsets)."""
    sources = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "native" / "src").glob("*.c"))
    out = tmp_path / "pulsar_arrow_reader_budget.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", f"-DPAR_BATCH_VALUE_BYTES={budget}",
                    "-DPAR_BATCH_HEADROOM=256", "-o", str(out), *sources, "-ldl"], check=True)
    return out


def test_a_native_batch_is_exported_before_its_values_pass_arrows_offsets(broker, admin, pulsar_client, unique, tmp_path,
                                                                          library_at):
    """A batch whose values would pass Arrow's 32-bit offsets (2 GiB, scaled down here to 8 KiB) is exported first,
    also inside a producer's batch; the library once ended the group there but appended the message all the same."""
    topic = create_topic(admin, f"native-budget-{unique}", 2)
    sent = produce(pulsar_client, topic, 120, batch=10, payload_size=1000)
    sent += mixed_backlog(pulsar_client, topic)
    parts = plan(broker, topic)
    library_at(str(_budget_library(tmp_path, 8192)))
    batches = read_on(parts, "native")
    assert payloads(batches) == Counter(s.payload for s in sent)
    assert all(sum(map(len, b.column("value").to_pylist())) <= 8192 or b.num_rows == 1 for b in batches), \
        [b.num_rows for b in batches]
    assert payloads(read_on(parts, "python")) == Counter(s.payload for s in sent)


# -- falling back --------------------------------------------------------------------------------
@pytest.fixture
def library_at(monkeypatch):
    """Point the loader at another library file for one test (the process's loaded one is restored)."""
    def use(path: str) -> None:
        monkeypatch.setenv(native_module.LIBRARY_ENV, path)
        monkeypatch.setattr(native_module, "LOADER", native_module.Loader())
    monkeypatch.setattr("pulsar_throttled_source.reading.read_path._WARNED", set())
    return use


def _broken_library(tmp_path: Path) -> Path:
    """A library that has the loader's first entry point but not the others (a wrong build)."""
    source = tmp_path / "broken.c"
    source.write_text("int par_load(const char *p, char *e, unsigned long n) { (void)p; (void)e; (void)n; return 0; }\n")
    out = tmp_path / "libbroken.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out


@pytest.mark.parametrize("broken", ["missing file", "missing symbol"])
def test_a_missing_or_broken_library_falls_back_with_one_warning(broker, admin, pulsar_client, unique, tmp_path,
                                                                 library_at, caplog, broken):
    topic = create_topic(admin, f"native-fallback-{unique}", 2)
    sent = produce(pulsar_client, topic, 60, batch=5)
    parts = plan(broker, topic)  # readPath=auto
    library_at(str(tmp_path / "nothing.so") if broken == "missing file" else str(_broken_library(tmp_path)))
    caplog.set_level(logging.WARNING, logger="pulsar_throttled_source.reading.read_path")
    batches = [b for part in parts for b in read_range(part)]
    assert payloads(batches) == Counter(s.payload for s in sent)
    warnings = [r.getMessage() for r in caplog.records if "Python read path" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per process and reason, not per task
    assert ("nothing.so" in warnings[0]) if broken == "missing file" else ("par_" in warnings[0])
    with pytest.raises(NativeReadPathUnavailable, match="Option 'readPath' is 'native'.*unavailable"):
        read_on(parts, "native")


def test_readers_start_inclusively_with_the_installed_libpulsar():
    """The library sets a reader's inclusive start through a C++ member of libpulsar, after checking at
    load that the C API's configuration is that member's object (reading/reader_start.py: else
    every reader opened costs the broker a read of the entry before its range)."""
    loaded = native_module.native_library()
    assert loaded.available, loaded.reason
    assert loaded.inclusive_start


def test_the_library_describes_its_columns_and_settings_and_a_drifted_column_is_refused(monkeypatch):
    """Batches cross as Arrow C Data Interface structures under the schema the library exports, checked at load
    against schemas/columns.py by name and type; the settings it applies come from its own tables."""
    loaded = native_module.native_library()
    assert loaded.available, loaded.reason
    assert loaded.arrow_schema is not None and loaded.arrow_schema.names == [
        "key", "value", "messageId", "publishTime", "eventTime", "properties", "orderingKey", "producerName", "schemaVersion"]
    assert {"receiver_queue_size", "reader_name"} <= loaded.reader_settings
    assert {"operation_timeout_seconds", "tls_validate_hostname"} <= loaded.client_settings
    assert "connection_timeout_ms" not in loaded.client_settings
    expected = native_module.native_columns()
    drifted = expected.set(expected.get_field_index("publishTime"), pa.field("publishTime", pa.timestamp("ms", tz="UTC")))
    monkeypatch.setattr(native_module, "native_columns", lambda: drifted)
    with pytest.raises(ValueError, match="publishTime: timestamp\\[us"):
        native_module.batch_schema(loaded.lib)


def test_auto_takes_the_python_path_for_a_setting_the_native_path_cannot_apply(broker, admin, pulsar_client, unique,
                                                                                library_at, caplog):
    topic = create_topic(admin, f"native-setting-{unique}", 0)
    sent = produce(pulsar_client, topic, 20, batch=5)
    caplog.set_level(logging.WARNING, logger="pulsar_throttled_source.reading.read_path")
    parts = plan(broker, topic, **{"pulsar.client.connectionTimeoutMs": "5000"})
    assert payloads([b for part in parts for b in read_range(part)]) == Counter(s.payload for s in sent)
    assert any("pulsar.client.connection_timeout_ms" in r.getMessage() for r in caplog.records)


# -- AddressSanitizer -----------------------------------------------------------------------------
ASAN_READER = """
import json, sys
from collections import Counter
from pulsar_throttled_source.reading.read import read_range
from pulsar_throttled_source.reading.native_library import native_library
assert native_library().available, native_library().reason
sys.path[:0] = [sys.argv[2], sys.argv[3]]
from streaming import plan
result = {}
for topic, extra in json.loads(sys.argv[1]):
    result[topic] = sum(b.num_rows for p in plan(BROKER, topic, readPath="native", **extra) for b in read_range(p))
print("counts", json.dumps(result))
"""


def test_the_library_reads_under_address_sanitizer(broker, admin, pulsar_client, unique, tmp_path, key_pair):
    fields, chunked, encrypted, avro = (create_topic(admin, f"asan-{name}-{unique}", n) for name, n in
                                        (("fields", 2), ("chunked", 1), ("encrypted", 0), ("avro", 0)))
    expected = {fields: len(produce(pulsar_client, fields, 200, batch=7)), chunked: len(mixed_backlog(pulsar_client, chunked)),
                encrypted: sum(produce_encrypted(pulsar_client, encrypted, key_pair).values()), avro: 30}

    class Reading(pulsar.schema.Record):
        sensor = pulsar.schema.String()

    producer = pulsar_client.create_producer(avro, schema=pulsar.schema.AvroSchema(Reading), batching_max_messages=4)
    for i in range(30):  # messages that carry a schema version
        producer.send_async(Reading(sensor=f"s{i}"), None)
    producer.flush()
    producer.close()
    cases = [(fields, SMALL), (chunked, {}), (encrypted, {"encryption.privateKeyPath": key_pair[1]}), (avro, {})]
    here = Path(__file__).resolve().parent
    script = f"BROKER = type('B', (), {{'service_url': {broker.service_url!r}, 'admin_url': {broker.admin_url!r}}})\n" + ASAN_READER
    (counts,) = json_lines(run_under_asan(tmp_path, script, [json.dumps(cases), str(here), str(here.parent)]), "counts")
    assert counts == expected


# -- the platform wheels ---------------------------------------------------------------------------
def test_platform_wheels_are_manylinux_and_the_x86_64_one_reads(broker, admin, pulsar_client, unique, tmp_path, library_at):
    """native/build_wheels.py cross-compiles both wheels (once per test run: runtime_wheel.release_artifacts);
    auditwheel must accept each as manylinux_2_17 for its architecture, and the x86_64 build (this machine's)
    must read a topic as the Python path does. The aarch64 build cannot run here: auditwheel checks its ELF."""
    import zipfile

    built = release_artifacts()
    log = str(built["native_log"])
    for arch in ("x86_64", "aarch64"):
        assert f'consistent with the following platform tag: "manylinux_2_17_{arch}"' in log, log
    wheel = built["x86_64"]
    assert isinstance(wheel, Path)
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".abi3.so")]
        z.extract(name, tmp_path / "unpacked")
    topic = create_topic(admin, f"native-wheel-{unique}", 2)
    sent = produce(pulsar_client, topic, 90, batch=6)
    parts = plan(broker, topic, **SMALL)
    library_at(str(tmp_path / "unpacked" / name))
    assert native_module.native_library().available, native_module.native_library().reason
    assert payloads(assert_same_batches(parts)) == Counter(s.payload for s in sent)
