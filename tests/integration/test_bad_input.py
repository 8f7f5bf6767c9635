"""Issue 6, item 5: bad input fails fast, end to end through Spark, with a message that says what is wrong.

Every option error is a unit test (tests/unit/test_option_errors.py: the DataSource constructor,
no Spark); here a few of them run end to end, with every error that needs the broker or Spark
(unknown topics, unreachable URLs, corrupted checkpoints).

Every case runs `spark.readStream.format("pulsar-throttled")...load()` and, when load() accepts
it, `.writeStream...start()` against the real broker. An option error must surface at load() as a
Python exception from PySpark, as must a named topic that does not exist (load() asks the admin API once);
an error that needs the broker's data (unknown partitions, an unreachable service URL) surfaces as the
StreamingQueryException of awaitTermination. Either way the message names the
option (or the topic / URL) and what is allowed, and it arrives within a bounded time.
"""

from __future__ import annotations

import re
import shutil
import socket
import time
from pathlib import Path

import pytest
from helpers import create_topic, produce
from pyspark.errors import AnalysisException
from streaming import Collected, failure_of, read_stream, source_options, start_collecting

LOAD_BOUND_S = 30  # an option error needs no broker: Spark's planner process only
START_BOUND_S = 60  # an error that needs the broker: bounded by the small timeouts each case sets
FAST_CLIENT = {"pollTimeoutMs": "3000", "pulsar.client.operationTimeoutSeconds": "2", "pulsar.client.connectionTimeoutMs": "1000"}


@pytest.fixture(scope="module")
def topic(admin, pulsar_client) -> str:
    name = create_topic(admin, f"bad-input-{int(time.time() * 1000)}", 2)
    produce(pulsar_client, name, 20)
    return name


@pytest.fixture(scope="module")
def closed_port():
    """A local port that refuses connections: bound but never listening, held for the whole module
    so that nothing else can start listening on it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def run_to_error(spark, opts: dict[str, str], checkpoint: Path) -> tuple[str, str]:
    """('load' | 'start', message) of the first error; fails the test if the query keeps running."""
    try:
        df = read_stream(spark, opts)
    except AnalysisException as e:  # [PYTHON_DATA_SOURCE_ERROR] ... with the data source's ValueError and its message
        return "load", str(e)
    q = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint)) \
        .trigger(processingTime="200 milliseconds").start()
    return "start", failure_of(q, START_BOUND_S)


# (id, options added to a valid base (None removes one), where it fails, substrings of the message)
# "{topic}", "{closed}", "{service_port}", "{unique}" and "{empty_file}" are filled in per run.
CASES: list[tuple[str, dict[str, str | None], str, list[str]]] = [
    # Option errors: every one is a unit test (tests/unit/test_option_errors.py, through the DataSource
    # constructor); these few, one per kind of check, show that such an error surfaces at load() through Spark.
    ("quota-not-a-number", {"dispatchThrottlingRatePerTopicInMsg": "fast"}, "load",
     ["'dispatchThrottlingRatePerTopicInMsg'", "'fast' is not a positive integer, or -1 for no limit"]),
    ("mode-contradicts-alias", {"throttlingMode": "batch", "preciseDispatcherFlowControl": "true"}, "load",
     ["'throttlingMode'=batch contradicts", "set only one"]),
    ("offsets-malformed-json", {"startingOffsets": '{"{topic}-partition-0": {"ledgerId": 1,'}, "load",
     ["'startingOffsets': not 'earliest', 'latest' or valid JSON", "expected e.g."]),
    ("no-topic", {"topic": None}, "load", ["Exactly one of the options 'topic', 'topics', 'topicsPattern'", "found: none"]),
    ("no-broker-urls", {"service.url": None, "admin.url": None}, "load",  # no default broker: localhost may be another server
     ["Options 'service.url' and 'admin.url' are required", "pulsar://host:6650", "http://host:8080"]),
    ("unknown-option", {"startingOffset": "earliest"}, "load",
     ["Unknown option(s) (Spark hands option names over lowercased)", "'startingoffset': did you mean 'startingOffsets'"]),
    ("kafka-option", {"minOffsetsPerTrigger": "1000"}, "load",
     ["'minOffsetsPerTrigger' is Spark's Kafka source's option and is not taken here", "'minEntriesPerTrigger'"]),
    ("auth-params-unsupported", {"pulsar.client.authParams": "user=me,password=hunter2"}, "load",
     ["'pulsar.client.authParams': expected 'token:<jwt>'", "file:///path/to/token", "(value not shown)"]),
    # Errors that need the broker's data: the start positions against the topic's partitions
    ("offsets-unknown-partition", {"startingOffsets": '{"{topic}-partition-7": "earliest"}'}, "start",
     ["'startingOffsets' names partition(s) {topic}-partition-7 that the query does not read", "known partitions: {topic}-partition-0"]),
    # Looked up at load (named topics exist, the topics' schema decides the columns): topics, a pattern's namespace,
    # the admin URL. The broker auto-creates topics on lookup (local_broker's config): the check must not.
    ("topic-unknown", {"topic": "no-such-topic-{unique}"}, "load",
     ["Topic persistent://public/default/no-such-topic-{unique} does not exist in namespace public/default on http://",
      "neither partitioned nor non-partitioned (option 'topic' or 'topics')", "never creates topics"]),
    ("topic-unknown-no-decoding", {"topic": "no-such-topic-{unique}", "decodeSchema": "false"}, "load",
     ["Topic persistent://public/default/no-such-topic-{unique} does not exist in namespace public/default"]),
    ("topics-one-unknown", {"topic": None, "topics": "{topic},no-such-{unique}"}, "load",
     ["Topic persistent://public/default/no-such-{unique} does not exist in namespace public/default"]),
    ("topic-unknown-namespace", {"topic": "persistent://public/no-such-ns-{unique}/t"}, "load",
     ["Topic persistent://public/no-such-ns-{unique}/t does not exist in namespace public/no-such-ns-{unique}"]),
    ("pattern-unknown-namespace", {"topic": None, "topicsPattern": "persistent://public/no-such-ns-{unique}/x-.*"}, "load",
     ["Namespace public/no-such-ns-{unique} does not exist"]),
    # URLs and connectivity
    ("admin-unreachable", {"admin.url": "http://127.0.0.1:{closed}", "adminTimeoutMs": "2000"}, "load",
     ["Cannot reach the Pulsar admin API at http://127.0.0.1:{closed}", "'admin.url'"]),
    ("admin-url-is-service-port", {"admin.url": "http://127.0.0.1:{service_port}", "adminTimeoutMs": "2000"}, "load",
     ["Pulsar admin API at http://127.0.0.1:{service_port}", "'admin.url'"]),
    ("broker-unreachable", {"service.url": "pulsar://127.0.0.1:{closed}", "startingOffsets": "earliest", **FAST_CLIENT}, "start",
     ["Cannot open a reader on {topic}-partition-", "at pulsar://127.0.0.1:{closed}", "'service.url'"]),
]
SECRET = "hunter2"  # the password in auth-params-unsupported: never in a message


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(topic|closed|service_port|unique|empty_file)\}", lambda m: values[m.group(1)], text)


def test_the_table_covers_both_stages_and_names_are_unique():
    assert sum(c[2] == "load" for c in CASES) >= 8 and sum(c[2] == "start" for c in CASES) >= 2
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("extra,stage,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_fails_fast_and_clearly(spark, broker, topic, closed_port, unique, tmp_path, extra, stage, expected):
    empty_file = tmp_path / "empty.token"
    empty_file.write_text("\n")
    values = {"topic": topic, "closed": str(closed_port), "service_port": broker.service_url.rsplit(":", 1)[1], "unique": unique,
              "empty_file": str(empty_file)}
    opts = source_options(broker, topic, quotaStatePath=str(tmp_path / "quota.sqlite"))
    for key, value in extra.items():
        if value is None:
            opts.pop(key, None)
        else:
            opts[key] = _fill(value, values)
    started = time.monotonic()
    where, message = run_to_error(spark, opts, tmp_path / "cp")
    elapsed = time.monotonic() - started
    for part in expected:
        assert _fill(part, values) in message, f"expected {_fill(part, values)!r} in the error at {where}:\n{message[:3000]}"
    assert where == stage, f"expected the error at {stage}, got it at {where}:\n{message[:2000]}"
    assert SECRET not in message
    assert elapsed < (LOAD_BOUND_S if stage == "load" else START_BOUND_S), f"took {elapsed:.1f} s"


def test_a_refused_topic_is_not_created_and_an_existing_one_loads(spark, broker, admin, topic, unique, tmp_path):
    """The existence check at load() asks with auto-creation off (this broker auto-creates on lookup): the refused
    topic still does not exist afterwards; a non-partitioned topic and a partitioned one both pass load()."""
    from pulsar_throttled_source.metadata.admin import PulsarAdmin
    from pulsar_throttled_source.metadata.admin_http import TopicNotFound
    from pulsar_throttled_source.topics import TopicName

    missing = f"no-such-topic-{unique}-kept-missing"
    where, message = run_to_error(spark, source_options(broker, missing, quotaStatePath=str(tmp_path / "q.sqlite")), tmp_path / "cp")
    assert where == "load" and f"Topic persistent://public/default/{missing} does not exist in namespace public/default" in message
    api = PulsarAdmin(broker.admin_url)
    try:
        with pytest.raises(TopicNotFound):
            api.partition_count(TopicName.parse(missing))
    finally:
        api.close()
    single = create_topic(admin, f"bad-input-single-{unique}", 0)
    for name in (single, topic):
        assert read_stream(spark, source_options(broker, name, quotaStatePath=str(tmp_path / "q.sqlite"))).columns


def test_kafka_names_read_end_to_end(spark, broker, topic, tmp_path):
    """Kafka's `subscribe` and `startingTimestamp` stand for topics and startingTime through spark.readStream:
    the stream reads exactly the 20 messages sent."""
    opts = source_options(broker, None, subscribe=topic, startingTimestamp="0", quotaStatePath=str(tmp_path / "quota.sqlite"))
    sink = Collected()
    q = start_collecting(spark, opts, sink, tmp_path / "cp", availableNow=True)
    assert q.awaitTermination(120) and q.exception() is None
    assert sorted(bytes(r.value).decode() for r in sink.rows) == sorted(f"m-{i}" for i in range(20))


# ---------------------------------------------------------------------------------------
# A corrupted checkpoint


@pytest.fixture(scope="module")
def finished_checkpoint(spark, broker, topic, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A checkpoint of an AvailableNow query that read the whole topic (several micro-batches)."""
    checkpoint = tmp_path_factory.mktemp("bad-input-cp") / "cp"
    opts = source_options(broker, topic, startingOffsets="earliest", maxEntriesPerTrigger="8",
                          quotaStatePath=str(checkpoint.parent / "quota.sqlite"))
    sink = Collected()
    q = start_collecting(spark, opts, sink, checkpoint, availableNow=True)
    assert q.awaitTermination(120) and q.exception() is None
    assert sink.count() == 20
    return checkpoint, opts


def _latest_offset_file(checkpoint: Path) -> Path:
    files = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
    return max(files, key=lambda p: int(p.name))


def _corrupt(path: Path, how: str) -> None:
    lines = path.read_text().splitlines()
    # v1 / batch metadata / one offset line per source: the last line is this source's offset
    assert lines[0] == "v1" and lines[-1].startswith("{\"persistent://"), lines
    if how == "not-positions":
        lines[-1] = '{"x": 1}'
    elif how == "not-a-partition":
        lines[-1] = '{"x": {"ledgerId": 1, "entryId": 2}}'
    elif how in ("non-integer-entry", "uncommitted-batch"):
        lines[-1] = re.sub(r'"entryId"\s*:\s*\d+', '"entryId": "five"', lines[-1], count=1)
    elif how == "invalid-json":
        lines[-1] = '{"persistent://public/default/t-partition-0": {"ledgerId": 3, '
    path.write_text("\n".join(lines))


HINT = "The offset log in the query's checkpoint (<checkpointLocation>/offsets) is corrupt or was not written by this source"


CORRUPTIONS = [
    ("not-positions", ["start offset (from the checkpoint) for partition x", "expected an object {\"ledgerId\": <int>, \"entryId\": <int>}", HINT]),
    ("not-a-partition", ["start offset (from the checkpoint): 'x' is not a partition name", HINT]),
    ("non-integer-entry", ["start offset (from the checkpoint) for partition persistent://", "ledgerId and entryId must be integers",
                           "'entryId': 'five'", HINT]),
    # The last batch was planned but not committed: Spark re-runs it with the offsets from its log.
    ("uncommitted-batch", ["end offset of the micro-batch for partition persistent://", "ledgerId and entryId must be integers", HINT]),
    # Invalid JSON never reaches the source: PySpark's planner runner parses the offset first and
    # fails with a JSONDecodeError; Spark's message still says where (latestOffset, the offsets).
    ("invalid-json", ["Failed when Python streaming data source perform latestOffset", "JSONDecodeError",
                      "Current Committed Offsets", '{"persistent://public/default/t-partition-0": {"ledgerId": 3, ']),
]


@pytest.mark.parametrize("how,expected", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupted_checkpoint_offset_is_a_clear_error(spark, finished_checkpoint, tmp_path, how, expected):
    original, opts = finished_checkpoint
    checkpoint = tmp_path / "cp"
    shutil.copytree(original, checkpoint)
    latest = _latest_offset_file(checkpoint)
    _corrupt(latest, how)
    if how == "uncommitted-batch":
        (checkpoint / "commits" / latest.name).unlink()
    started = time.monotonic()
    sink = Collected()
    message = failure_of(start_collecting(spark, opts, sink, checkpoint, availableNow=True), START_BOUND_S)
    for part in expected:
        assert part in message, f"expected {part!r} in:\n{message[:3000]}"
    assert sink.count() == 0
    assert time.monotonic() - started < START_BOUND_S
