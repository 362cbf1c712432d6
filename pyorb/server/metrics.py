"""``Server.stats()`` for Prometheus.

Install the extra (``pip install 'pyorb-asyncio[metrics]'``), then either
serve the metrics on their own HTTP endpoint::

    exporter = serve_metrics(server, port=9464)   # GET http://host:9464/metrics
    ...
    exporter.close()

or register :class:`StatsCollector` in a registry the application already
exports.  Figures are read from the server at each scrape (nothing is
recorded twice).  Families, each labelled by ``operation`` or ``strategy``:

* ``pyorb_requests_total``, ``pyorb_requests_failed_total``,
  ``pyorb_requests_rejected_total`` (refused by an interceptor, e.g.
  NO_PERMISSION), ``pyorb_requests_dropped_total``,
  ``pyorb_requests_shed_total`` (refused TRANSIENT by admission control),
  ``pyorb_requests_expired_total`` (never started: the deadline had
  passed): counters;
* ``pyorb_requests_in_flight`` and ``pyorb_queue_age_seconds`` (how long the
  oldest queued call has waited; the event loop's lag for ``reactive`` and
  ``amh``): gauges;
* ``pyorb_request_service_seconds`` and ``pyorb_request_wait_seconds``:
  summaries (count and sum over every request; the 0.5/0.9/0.99 quantiles of
  the recent window as ``quantile`` samples);
* ``pyorb_strategy_queued``, ``pyorb_strategy_threads``,
  ``pyorb_strategy_queue_age_seconds``: gauges per strategy, and
  ``pyorb_strategy_shed_total``: a counter per strategy;
* ``pyorb_connections`` (gauge) and ``pyorb_tls_handshakes_refused_total``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

try:
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("pyorb.server.metrics needs prometheus_client: pip install 'pyorb-asyncio[metrics]'") from exc

if TYPE_CHECKING:
    from pyorb.server.server import Server
    from pyorb.server.call.stats import RecorderSnapshot, Timing

QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"))


class StatsCollector(Collector):
    """A Prometheus collector reading ``server.stats()`` at each scrape (any thread)."""

    def __init__(self, server: Server, namespace: str = "pyorb") -> None:
        self._server = server
        self._ns = namespace

    def collect(self) -> Iterator[Metric]:
        stats = self._server.stats()
        ns = self._ns
        counters: dict[str, tuple[str, Callable[[RecorderSnapshot], int]]] = {
            "requests": ("Requests answered", lambda s: s.served),
            "requests_failed": ("Requests answered with a system exception", lambda s: s.failed),
            "requests_rejected": ("Requests refused by a server interceptor (e.g. NO_PERMISSION)",
                                  lambda s: s.rejected),
            "requests_dropped": ("Replies that could not be delivered (client gone, request cancelled)",
                                 lambda s: s.dropped),
            "requests_shed": ("Requests refused TRANSIENT by admission control (overload)", lambda s: s.shed),
            "requests_shed_queued": ("Of requests_shed, those refused after they were queued (a thread took them "
                                     "past the target, or they reached the queueing limit)", lambda s: s.shed_queued),
            "requests_expired": ("Requests not started: their deadline passed before servant code could run",
                                 lambda s: s.expired),
        }
        for name, (doc, value) in counters.items():
            family = CounterMetricFamily(f"{ns}_{name}", doc, labels=["operation"])
            for op in stats.operations:
                family.add_metric([op.name], value(op))
            yield family
        in_flight = GaugeMetricFamily(f"{ns}_requests_in_flight", "Requests queued or in servant code",
                                      labels=["operation"])
        age = GaugeMetricFamily(f"{ns}_queue_age_seconds", "How long the oldest queued call has waited",
                                labels=["operation"])
        for op in stats.operations:
            in_flight.add_metric([op.name], op.in_flight)
            age.add_metric([op.name], op.queue_age)
        yield in_flight
        yield age
        yield from _summary(f"{ns}_request_service_seconds", "Time in servant code", stats.operations,
                            lambda s: s.service)
        yield from _summary(f"{ns}_request_wait_seconds", "Time queued before servant code ran", stats.operations,
                            lambda s: s.wait)
        for name, doc, attr in (("strategy_queued", "Calls queued for a strategy's threads", "queued"),
                                ("strategy_threads", "Threads a strategy runs", "threads"),
                                ("strategy_queue_age_seconds", "How long the strategy's oldest queued call has waited",
                                 "queue_age")):
            gauge = GaugeMetricFamily(f"{ns}_{name}", doc, labels=["strategy"])
            for strategy in stats.strategies:
                gauge.add_metric([strategy.name], getattr(strategy, attr))
            yield gauge
        shed = CounterMetricFamily(f"{ns}_strategy_shed", "Requests a strategy's admission control refused",
                                   labels=["strategy"])
        queued = CounterMetricFamily(f"{ns}_strategy_shed_queued",
                                     "Of strategy_shed, the requests refused after they were queued",
                                     labels=["strategy"])
        for strategy in stats.strategies:
            shed.add_metric([strategy.name], strategy.shed)
            queued.add_metric([strategy.name], strategy.shed_queued)
        yield shed
        yield queued
        yield GaugeMetricFamily(f"{ns}_connections", "Client connections open", value=stats.connections)
        yield CounterMetricFamily(f"{ns}_tls_handshakes_refused", "TLS handshakes refused or timed out",
                                  value=stats.tls_refused)


def _summary(name: str, doc: str, rows: tuple[RecorderSnapshot, ...], timing: Any) -> Iterator[Metric]:
    family = Metric(name, doc, "summary")
    for op in rows:
        t: Timing = timing(op)
        labels = {"operation": op.name}
        family.add_sample(f"{name}_count", labels, op.served)
        family.add_sample(f"{name}_sum", labels, t.mean * op.served)
        for quantile, attr in QUANTILES:
            family.add_sample(name, {**labels, "quantile": quantile}, getattr(t, attr))
    yield family


@dataclass
class MetricsEndpoint:
    """A running metrics HTTP endpoint; :meth:`close` stops it."""

    host: str
    port: int
    registry: CollectorRegistry
    _httpd: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def serve_metrics(server: Server, port: int = 0, host: str = "127.0.0.1",
                  registry: CollectorRegistry | None = None) -> MetricsEndpoint:
    """Serve ``server``'s statistics at ``http://host:port/metrics`` from a
    daemon thread (port 0: any free port; see ``.port``).  ``registry``
    (default: a new one holding only this server's collector) lets the
    application add its own metrics."""
    registry = registry if registry is not None else CollectorRegistry()
    registry.register(StatsCollector(server))
    httpd, thread = start_http_server(port, host, registry)
    return MetricsEndpoint(host, int(httpd.server_address[1]), registry, httpd, thread)


__all__ = ["MetricsEndpoint", "StatsCollector", "serve_metrics"]
