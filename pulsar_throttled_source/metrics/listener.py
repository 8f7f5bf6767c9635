"""PulsarThrottleMetrics: a StreamingQueryListener that turns each progress event's report of this
package's sources into Prometheus and/or OpenTelemetry metrics (samples.py lists them).

Where it runs: in the Python process that calls spark.streams.addListener. On classic PySpark that is
the driver; under Spark Connect (PySpark 4.x) it is the client: the server streams the listener events
to it and a client thread calls the listener (pyspark/sql/connect/streaming/query.py,
StreamingQueryListenerBus). An HTTP endpoint it serves is therefore on that process's host."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from . import otel, prometheus
from .latest_samples import MetricsState
from .samples import progress_samples

log = logging.getLogger(__name__)


class PulsarThrottleMetrics(StreamingQueryListener):
    """Metrics of every streaming query of the session that reads with this source.

    - `port`: serve Prometheus's text format on http://<addr>:<port>/metrics (prometheus_client's own
      server, a daemon thread; 0 takes a free port, see `.port`);
    - `registry`: the prometheus_client CollectorRegistry to register in (default: its global REGISTRY,
      which e.g. your own endpoint or a push to a Pushgateway exposes);
    - `meter`: an OpenTelemetry Meter: observable instruments of the same names instead; Prometheus is then
      used only when `port` or `registry` is given too.
    Needs the [metrics] extra for Prometheus, [opentelemetry] for a meter."""

    def __init__(self, *, port: int | None = None, addr: str = "0.0.0.0", registry: Any | None = None,
                 meter: Any | None = None) -> None:
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535):
            raise ValueError(f"PulsarThrottleMetrics: port must be an int from 0 to 65535 (0: a free one), not {port!r}")
        self.state = MetricsState()
        self.port: int | None = None
        self.registry: Any | None = None
        self._server: Any | None = None
        self._collector: prometheus.StateCollector | None = None
        self._instruments = otel.register(self.state, meter) if meter is not None else []
        if meter is None or registry is not None or port is not None:
            self.registry, self._collector = prometheus.register(self.state, registry)
            if port is not None:
                self._server, self.port = prometheus.serve(self.registry, port, addr)

    def onQueryStarted(self, event: Any) -> None:
        pass  # no report before the first progress event

    def onQueryProgress(self, event: Any) -> None:
        try:
            self.state.update(progress_samples(event.progress))
        except Exception:  # a listener that raises is dropped by Spark's bus: keep the query's others flowing
            log.warning("PulsarThrottleMetrics could not read a progress event", exc_info=True)

    def onQueryIdle(self, event: Any) -> None:
        pass  # the last progress event's values still hold

    def onQueryTerminated(self, event: Any) -> None:
        self.state.drop(str(event.id))

    def close(self) -> None:
        """Stop the HTTP endpoint, leave the registry and export nothing more on a meter (whose observable
        instruments OpenTelemetry cannot remove); after spark.streams.removeListener."""
        self.state.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._collector is not None and self.registry is not None:
            self.registry.unregister(self._collector)
            self._collector = None
