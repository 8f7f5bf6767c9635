"""Issue 5: the examples run as documented (spark-submit job against the real broker; demo helpers)."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import EXAMPLES


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The spark-submit example itself runs in test_cluster.py, on a real standalone cluster.


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
        "--service-url", "pulsar://pulsar:6650", "--admin-url", "http://pulsar:8080",
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
    assert opts["service.url"] == "pulsar://pulsar:6650" and opts["admin.url"] == "http://pulsar:8080"
    urls = ["--service-url", "pulsar://pulsar:6650", "--admin-url", "http://pulsar:8080"]
    with pytest.raises(SystemExit):  # exactly one of --topic, --topics, --topics-pattern
        ingest.build_parser().parse_args([*urls, "--topic", "a", "--topics", "b", "--output", "o", "--checkpoint", "c"])
    with pytest.raises(SystemExit):  # no default broker: both URLs required
        ingest.build_parser().parse_args(["--topic", "a", "--output", "o", "--checkpoint", "c"])


def test_demo_plot_and_entry_counting(tmp_path):
    import json

    import pulsar

    demo = load_example("demo")
    mid = pulsar.MessageId(3, 17, 42, 5).serialize()
    assert demo.entry_of(mid) == (3, 17, 42)
    # The demo keeps its query's recentProgress as JSON (a throttled query's, as tests/unit/test_plots.py reads it).
    events = json.loads((EXAMPLES.parent / "tests" / "unit" / "progress_fixtures" / "pyspark-4.3.0.json").read_text())
    args = demo.parse_args(["--out", str(tmp_path / "out" / "plot.png"), "--partitions", "2", "--quota", "5", "--per-entry", "1"])
    png = demo.save_plot([json.dumps(e) for e in events], args)
    assert png == tmp_path / "out" / "plot.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_sends_what_it_starts_to_its_log_and_keeps_the_table(tmp_path, capfd):
    """Spark's JVM and the planner process inherit the demo's stderr: inside stderr_to it is the log file, so the
    planner's INFO lines do not bury the table (stdout); afterwards stderr is the terminal again."""
    import subprocess
    import sys

    demo = load_example("demo")
    log = tmp_path / "out" / "demo.log"
    with demo.stderr_to(log):
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('INFO from a child process\\n')"], check=True)
        print("a row of the table", flush=True)
    print("after", file=sys.stderr, flush=True)
    out, err = capfd.readouterr()
    assert "a row of the table" in out and "INFO from a child process" not in out + err and "after" in err
    assert log.read_text() == "INFO from a child process\n"
