"""The Prometheus side of the metrics listener: a collector over MetricsState, registered in the
registry the user passes (or prometheus_client's default one), and optionally its own HTTP endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .latest_samples import MetricsState
from .samples import METRICS, QUERY_LABELS

EXTRA = "pip install 'pulsar-throttled-source[metrics]'"


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as e:
        raise ImportError(f"PulsarThrottleMetrics exports to Prometheus with prometheus_client, which is not installed: "
                          f"{EXTRA} (or pass an OpenTelemetry meter=)") from e
    return prometheus_client


class StateCollector:
    """prometheus_client's custom collector protocol: collect() yields metric families, read at each scrape."""

    def __init__(self, state: MetricsState) -> None:
        self._state = state

    def describe(self) -> Iterator[Any]:
        return self._families({})  # names only: the registry checks them for duplicates when registering

    def collect(self) -> Iterator[Any]:
        grouped: dict[str, list[Any]] = {}
        for sample in self._state.samples():
            grouped.setdefault(sample.metric.name, []).append(sample)
        return self._families(grouped)

    @staticmethod
    def _families(grouped: dict[str, list[Any]]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for metric in METRICS:
            kind = CounterMetricFamily if metric.counter else GaugeMetricFamily
            family = kind(metric.name, metric.help, labels=(*QUERY_LABELS, *metric.labels))
            for sample in grouped.get(metric.name, []):
                family.add_metric(list(sample.labels), sample.value)
            yield family


def register(state: MetricsState, registry: Any | None) -> tuple[Any, StateCollector]:
    client = _client()
    registry = client.REGISTRY if registry is None else registry
    collector = StateCollector(state)
    registry.register(collector)
    return registry, collector


def serve(registry: Any, port: int, addr: str) -> tuple[Any, int]:
    """prometheus_client's own HTTP server (a daemon thread); port 0 takes a free one."""
    server, _thread = _client().start_http_server(port, addr=addr, registry=registry)
    return server, server.server_port
