"""Issue 5: the examples run as documented (spark-submit job against the real broker; demo helpers)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import create_topic, produce

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spark_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def python_errors(log: str) -> str:
    """The Python traceback(s) in a spark-submit log, without the JVM's INFO lines and stack frames."""
    lines = [line for line in log.splitlines() if " INFO " not in line and not line.lstrip().startswith("at ")]
    return "\n".join(lines)[-6000:]


def test_throttled_ingest_copies_topic_into_parquet_exactly(broker, admin, pulsar_client, unique, tmp_path):
    import pyarrow.parquet as pq

    topic = create_topic(admin, f"ingest-{unique}", 2)
    sent = produce(pulsar_client, topic, 200, batch=10, prefix="batched")  # 10 entries per partition
    sent += produce(pulsar_client, topic, 160, prefix="single")  # +80 entries per partition, 2 ledgers each
    output, checkpoint = tmp_path / "parquet", tmp_path / "checkpoint"
    cmd = [
        str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
        str(EXAMPLES / "throttled_ingest.py"),
        "--service-url", broker.service_url, "--admin-url", broker.admin_url,
        "--topic", topic, "--starting-offsets", "earliest",
        "--mode", "batch", "--topic-rate-msgs", "40", "--trigger", "availableNow",
        "--checkpoint", str(checkpoint), "--output", str(output),
        "--option", f"quotaStatePath={tmp_path / 'quota.sqlite'}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=spark_env(), cwd=tmp_path)
    (tmp_path / "spark-submit.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"spark-submit failed, full log in {tmp_path / 'spark-submit.log'}:\n" + python_errors(proc.stderr)
    assert "Done: 360 messages" in proc.stdout, proc.stdout[-2000:]
    batches = int(proc.stdout.split("Done: 360 messages in ")[1].split()[0])
    assert batches >= 3, "90 entries per partition at 40 entries per period need at least 3 micro-batches"

    table = pq.read_table(output)  # _spark_metadata is skipped: names starting with '_' are ignored
    values = Counter(bytes(v) for v in table.column("value").to_pylist())
    duplicates = [v for v, n in values.items() if n > 1]
    assert not duplicates, f"{len(duplicates)} duplicated payloads, e.g. {duplicates[:3]}"
    assert table.num_rows == len(sent) == 360
    assert set(values) == {s.payload for s in sent}
    assert set(table.column("topic").to_pylist()) == {f"{topic}-partition-0", f"{topic}-partition-1"}


@pytest.mark.parametrize("text, expected", [
    ("availableNow", {"availableNow": True}),
    ("once", {"once": True}),
    ("processingTime=10 seconds", {"processingTime": "10 seconds"}),
    ("processingTime=5", {"processingTime": "5 seconds"}),
])
def test_ingest_trigger_flag(text, expected):
    assert load_example("throttled_ingest").parse_trigger(text) == expected


def test_ingest_flags_map_to_documented_options():
    from pulsar_throttled_source.options import OPTIONS

    ingest = load_example("throttled_ingest")
    args = ingest.build_parser().parse_args([
        "--topics-pattern", "persistent://public/default/orders-.*", "--subscription", "copy",
        "--mode", "batch", "--period", "2", "--topic-rate-msgs", "10", "--topic-rate-bytes", "1000",
        "--subscription-rate-msgs", "5", "--subscription-rate-bytes", "500", "--source-rate-msgs", "50",
        "--source-rate-bytes", "5000", "--relative-to-publish-rate", "--max-entries-per-trigger", "7",
        "--output", "o", "--checkpoint", "c", "--option", "failOnDataLoss=false",
    ])
    opts = ingest.source_options(args)
    assert set(opts) <= set(OPTIONS)
    assert opts["topicsPattern"] == "persistent://public/default/orders-.*"
    assert opts["dispatchThrottlingRatePerSubscriptionInByte"] == "500" and opts["ratePeriodInSecond"] == "2"
    assert opts["failOnDataLoss"] == "false" and opts["relativeToPublishRate"] == "true"
    with pytest.raises(SystemExit):  # exactly one of --topic, --topics, --topics-pattern
        ingest.build_parser().parse_args(["--topic", "a", "--topics", "b", "--output", "o", "--checkpoint", "c"])


def test_demo_plot_and_entry_counting(tmp_path):
    import pulsar

    demo = load_example("demo")
    mid = pulsar.MessageId(3, 17, 42, 5).serialize()
    assert demo.entry_of(mid) == (3, 17, 42)
    rows = [{"batch": i, "t": float(i), "rows": 1000, "entries": 100, "bytes": 100_000, "backlog": 400 - 100 * i}
            for i in range(5)]
    png = demo.save_plot(rows, 100, demo.parse_args(["--out", str(tmp_path / "plot.png")]))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
