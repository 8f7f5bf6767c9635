"""The OpenTelemetry side of the metrics listener: one observable instrument per metric on the Meter the
user passes (its MeterProvider, readers and exporters are the user's: OTLP to a collector, Prometheus...),
observed from MetricsState at each collection."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .latest_samples import MetricsState
from .samples import METRICS, QUERY_LABELS, Metric, Sample


def register(state: MetricsState, meter: Any) -> list[Any]:
    try:
        from opentelemetry.metrics import Observation
    except ImportError as e:
        raise ImportError("PulsarThrottleMetrics(meter=...) needs opentelemetry-api: "
                          "pip install 'pulsar-throttled-source[opentelemetry]'") from e

    # One collection calls every instrument's callback, in the order created: the first takes the samples
    # (a collection, for MetricsState: what ends an ended query's series), the others read the same ones.
    taken: list[Sample] = []

    def observe(metric: Metric) -> Callable[[Any], Iterable[Any]]:
        names = (*QUERY_LABELS, *metric.labels)

        def callback(_options: Any) -> Iterable[Any]:
            if metric is METRICS[0]:
                taken[:] = state.samples()
            return [Observation(s.value, dict(zip(names, s.labels, strict=True))) for s in taken if s.metric is metric]
        return callback

    instruments = []
    for metric in METRICS:
        create = meter.create_observable_counter if metric.counter else meter.create_observable_gauge
        instruments.append(create(metric.name, callbacks=[observe(metric)], description=metric.help))
    return instruments
