"""The metrics listener (pulsar_throttled_source.metrics, issue 39) on made-up progress events of both
shapes (4.2+: the report is the source's latestOffset; 4.0/4.1: endOffset["progress"], with the offsets
as Python reprs in the dict and JSON only at .json): the samples, Prometheus's exposition and registry,
OpenTelemetry's in-memory reader, what happens between events and when a query ends, and the errors."""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from pulsar_throttled_source.metrics import PulsarThrottleMetrics
from pulsar_throttled_source.metrics.samples import progress_samples

QUERY = "6a4c5a8e-7f04-4c3a-9a0e-0f2f5d6f0a11"
T = "persistent://public/default/orders"
REPORT = {"entriesBehindLatest": 30, "maxEntriesBehindLatest": 20, "avgEntriesBehindLatest": 15.0,
          "messagesBehindLatest": 90, "maxMessagesBehindLatest": 60, "avgMessagesBehindLatest": 45.0,
          "secondsBehindLatest": 4.25, "partitions": 2, "partitionsBehind": 2,
          "throttle": {"heldBy": "topic", "floorHeld": False, "readLimitHeld": 1,
                       "levels": {"topic": {"heldBack": 2, "windowUsed": 1.0, "debtMessages": 1.5, "debtBytes": 300.0},
                                  "sourceWide": {"heldBack": 0, "windowUsed": 0.25, "debtMessages": 0.0, "debtBytes": 0.0}}},
          "readPath": "native",
          "perPartition": {f"{T}-partition-0": {"latest": {"ledgerId": 5, "entryId": 40}, "entriesBehind": 20,
                                                 "messagesBehind": 60, "secondsBehind": 4.25, "heldBackBy": "topic"},
                           f"{T}-partition-1": {"latest": {"ledgerId": 6, "entryId": 9}, "entriesBehind": 10,
                                                 "messagesBehind": 30, "secondsBehind": 1.5, "heldBackBy": "topic"}}}
OFFSET = {f"{T}-partition-0": {"ledgerId": 5, "entryId": 20}}
RATE_SOURCE = {"description": "RateStreamV2", "startOffset": 1, "endOffset": 2, "latestOffset": 2,
               "numInputRows": 7, "inputRowsPerSecond": 7.0, "processedRowsPerSecond": 7.0}


def source(**fields) -> dict:
    return {"description": "PythonMicroBatchStream", "numInputRows": 12, "inputRowsPerSecond": 6.0,
            "processedRowsPerSecond": 24.0, **fields}


def on_43(report: dict, rows: int = 12, name: str | None = "orders") -> dict:
    """As a 4.2+ event's JSON: the report is latestOffset, a rate source comes first."""
    return {"id": QUERY, "runId": QUERY, "name": name, "batchId": 3,
            "sources": [RATE_SOURCE, source(startOffset=OFFSET, endOffset=OFFSET, latestOffset=report, numInputRows=rows)]}


class FakeProgress(dict):
    """PySpark's StreamingQueryProgress on 4.0: the dict holds the offsets' Python reprs, .json the JSON."""

    def __init__(self, as_json: dict) -> None:
        as_dict = {**as_json, "sources": [{**s, "endOffset": repr(s["endOffset"]), "latestOffset": repr(s["latestOffset"])}
                                          for s in as_json["sources"]]}
        super().__init__(as_dict)
        self.json = json.dumps(as_json)


def on_40(report: dict, rows: int = 12, name: str | None = "orders") -> FakeProgress:
    carried = {**OFFSET, "progress": report}
    return FakeProgress({"id": QUERY, "runId": QUERY, "name": name, "batchId": 3,
                         "sources": [RATE_SOURCE, source(startOffset=OFFSET, endOffset=carried, latestOffset=carried, numInputRows=rows)]})


EXPECTED = {  # (metric, extra label values) -> value, for source 1 of query "orders"
    ("pulsar_throttled_batch_input_rows", ()): 12, ("pulsar_throttled_input_rows_per_second", ()): 6.0,
    ("pulsar_throttled_processed_rows_per_second", ()): 24.0,
    ("pulsar_throttled_entries_behind_latest", ()): 30, ("pulsar_throttled_max_entries_behind_latest", ()): 20,
    ("pulsar_throttled_avg_entries_behind_latest", ()): 15.0, ("pulsar_throttled_messages_behind_latest", ()): 90,
    ("pulsar_throttled_max_messages_behind_latest", ()): 60, ("pulsar_throttled_avg_messages_behind_latest", ()): 45.0,
    ("pulsar_throttled_seconds_behind_latest", ()): 4.25, ("pulsar_throttled_partitions", ()): 2,
    ("pulsar_throttled_partitions_behind", ()): 2, ("pulsar_throttled_trigger_floor_held", ()): 0,
    ("pulsar_throttled_read_limit_held_partitions", ()): 1,
    ("pulsar_throttled_level_held_back_partitions", ("topic",)): 2, ("pulsar_throttled_level_window_used_ratio", ("topic",)): 1.0,
    ("pulsar_throttled_level_debt_messages", ("topic",)): 1.5, ("pulsar_throttled_level_debt_bytes", ("topic",)): 300.0,
    ("pulsar_throttled_level_held_back_partitions", ("sourceWide",)): 0,
    ("pulsar_throttled_level_window_used_ratio", ("sourceWide",)): 0.25,
    ("pulsar_throttled_level_debt_messages", ("sourceWide",)): 0.0, ("pulsar_throttled_level_debt_bytes", ("sourceWide",)): 0.0,
    ("pulsar_throttled_read_path_info", ("native",)): 1,
    ("pulsar_throttled_topic_entries_behind_latest", (T,)): 30, ("pulsar_throttled_topic_messages_behind_latest", (T,)): 90,
    ("pulsar_throttled_topic_seconds_behind_latest", (T,)): 4.25,
}


@pytest.mark.parametrize("shape", [on_43, on_40, lambda r: json.dumps(on_43(r))], ids=["4.2+", "4.0/4.1", "json"])
def test_every_field_of_the_report_becomes_one_sample_labelled_by_query_source_level_and_topic(shape):
    samples = progress_samples(shape(REPORT))
    assert {(s.metric.name, s.labels[3:]): s.value for s in samples} == EXPECTED
    assert {s.labels[:3] for s in samples} == {(QUERY, "orders", "1")}  # the rate source (0) is not ours
    assert len(samples) == len(EXPECTED)


def test_an_unknown_time_lag_and_a_missing_rate_are_no_samples_rather_than_zeros():
    report = {**REPORT, "secondsBehindLatest": None}
    progress = on_43(report)
    del progress["sources"][1]["processedRowsPerSecond"]  # Spark leaves NaN rates out of the JSON
    names = {s.metric.name for s in progress_samples(progress)}
    assert "pulsar_throttled_seconds_behind_latest" not in names and "pulsar_throttled_processed_rows_per_second" not in names
    assert progress_samples({"id": QUERY, "sources": [RATE_SOURCE]}) == []


def event(progress) -> SimpleNamespace:
    return SimpleNamespace(progress=progress)


def value(registry: CollectorRegistry, name: str, **labels) -> float | None:
    return registry.get_sample_value(name, {"query_id": QUERY, "query_name": "orders", "source": "1", **labels})


def test_prometheus_holds_each_querys_newest_values_adds_rows_up_and_forgets_an_ended_query():
    registry = CollectorRegistry()
    listener = PulsarThrottleMetrics(registry=registry)
    listener.onQueryProgress(event(on_40(REPORT)))
    assert value(registry, "pulsar_throttled_entries_behind_latest") == 30
    assert value(registry, "pulsar_throttled_level_window_used_ratio", level="topic") == 1.0
    assert value(registry, "pulsar_throttled_read_path_info", read_path="native") == 1
    caught_up = {**REPORT, "entriesBehindLatest": 0, "secondsBehindLatest": 0.0, "partitionsBehind": 0,
                 "throttle": {"heldBy": None, "floorHeld": False, "readLimitHeld": 0, "levels": {}}}
    del caught_up["perPartition"]
    listener.onQueryProgress(event(on_43(caught_up, rows=30)))
    assert value(registry, "pulsar_throttled_entries_behind_latest") == 0
    assert value(registry, "pulsar_throttled_seconds_behind_latest") == 0.0
    # Nothing planned: no level held anything back; the last window share and debt stay as they were.
    assert value(registry, "pulsar_throttled_level_held_back_partitions", level="topic") == 0
    assert value(registry, "pulsar_throttled_level_debt_messages", level="topic") == 1.5
    assert value(registry, "pulsar_throttled_topic_entries_behind_latest", topic=T) is None
    assert value(registry, "pulsar_throttled_batch_input_rows") == 30
    assert value(registry, "pulsar_throttled_input_rows_total") == 42  # 12 + 30
    listener.onQueryIdle(SimpleNamespace(id=QUERY))
    assert value(registry, "pulsar_throttled_entries_behind_latest") == 0
    listener.onQueryTerminated(SimpleNamespace(id=QUERY, runId=QUERY, exception=None))
    # An ended query's series are collected once more (a push exporter still sends its last values), then go.
    assert value(registry, "pulsar_throttled_entries_behind_latest") == 0
    assert value(registry, "pulsar_throttled_entries_behind_latest") is None
    assert value(registry, "pulsar_throttled_input_rows_total") is None
    listener.close()
    assert list(registry.collect()) == []


def test_prometheus_serves_its_own_endpoint_and_a_second_listener_on_one_registry_is_refused():
    listener = PulsarThrottleMetrics(port=0, addr="127.0.0.1", registry=CollectorRegistry())
    try:
        listener.onQueryProgress(event(on_43(REPORT)))
        text = urllib.request.urlopen(f"http://127.0.0.1:{listener.port}/metrics", timeout=10).read().decode()
        assert f'pulsar_throttled_entries_behind_latest{{query_id="{QUERY}",query_name="orders",source="1"}} 30.0' in text
        assert re.search(r"^# TYPE pulsar_throttled_input_rows(_total)? counter$", text, re.M)  # _total: 0.21+
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            PulsarThrottleMetrics(registry=listener.registry)
    finally:
        listener.close()


def test_opentelemetry_observes_the_same_values_on_the_meter_given():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    listener = PulsarThrottleMetrics(meter=provider.get_meter("test"))
    assert listener.registry is None  # no Prometheus unless asked for
    listener.onQueryProgress(event(on_40(REPORT)))
    listener.onQueryProgress(event(on_43(REPORT)))
    seen = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    attrs = dict(point.attributes)
                    assert (attrs.pop("query_id"), attrs.pop("query_name"), attrs.pop("source")) == (QUERY, "orders", "1")
                    seen[(metric.name, tuple(attrs.values()))] = point.value
    assert seen == {**EXPECTED, ("pulsar_throttled_input_rows", ()): 24}
    listener.onQueryTerminated(SimpleNamespace(id=QUERY, runId=QUERY, exception=None))
    assert len(points(reader)) == len(seen)  # every instrument's last values, once more
    assert points(reader) == []
    listener.onQueryProgress(event(on_43(REPORT)))
    listener.close()
    assert points(reader) == []
    provider.shutdown()


def points(reader: InMemoryMetricReader) -> list:
    data = reader.get_metrics_data()
    return [p for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics
            for p in m.data.data_points]


def test_a_missing_library_names_the_extra_and_a_bad_port_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="port must be an int from 0 to 65535"):
        PulsarThrottleMetrics(port=70000, registry=CollectorRegistry())
    with pytest.raises(ValueError, match="port"):
        PulsarThrottleMetrics(port="9464", registry=CollectorRegistry())  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"pulsar-throttled-source\[metrics\]"):
        PulsarThrottleMetrics()
    monkeypatch.setitem(sys.modules, "opentelemetry.metrics", None)
    with pytest.raises(ImportError, match=r"pulsar-throttled-source\[opentelemetry\]"):
        PulsarThrottleMetrics(meter=object())
