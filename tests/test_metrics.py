"""Server.stats() exported for Prometheus (pyorb.server.metrics): scraped over HTTP."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
from omniORB import CORBA
from prometheus_client.parser import text_string_to_metric_families

import pyorb
from pyorb.idl import bench_idl
from pyorb.interceptors.auth import Authorizer, BearerToken, Rule
from pyorb.server.metrics import serve_metrics

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
import Bench__POA  # noqa: E402  (made by load_idl)


class Echo(Bench__POA.Echo):  # type: ignore[misc]
    def ping(self, stamp: int) -> int:
        if stamp == 13:
            raise CORBA.NO_RESOURCES(0, CORBA.COMPLETED_NO)
        return stamp

    def notify(self, stamp: int) -> None:
        pass


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


@pytest.mark.asyncio
async def test_scraping_the_metrics_endpoint() -> None:
    authorizer = Authorizer([Rule(allow={"svc"})], tokens={"t": "svc"})
    async with pyorb.Server(interceptors=[authorizer], strategy="thread_pool(3)") as server:
        key = server.activate(Echo(), "Echo")
        exporter = serve_metrics(server)
        try:
            loop = asyncio.get_running_loop()
            async with pyorb.Client(interceptors=[BearerToken("t")]) as client, pyorb.Client() as stranger:
                echo = client.resolve(server.ior(key), Bench.Echo)
                assert await asyncio.gather(*(echo.ping(i) for i in range(100, 125))) == list(range(100, 125))
                with pytest.raises(CORBA.NO_RESOURCES):
                    await echo.ping(13)
                for _ in range(2):
                    with pytest.raises(CORBA.NO_PERMISSION):
                        await stranger.resolve(server.ior(key), Bench.Echo).ping(1)
                metrics = await loop.run_in_executor(None, scrape, exporter.url)
        finally:
            exporter.close()
    ping = (("operation", "Bench::Echo.ping"),)
    assert metrics[("pyorb_requests_total", ping)] == 26
    assert metrics[("pyorb_requests_failed_total", ping)] == 1
    assert metrics[("pyorb_requests_rejected_total", ping)] == 2
    assert metrics[("pyorb_requests_in_flight", ping)] == 0
    assert metrics[("pyorb_request_service_seconds_count", ping)] == 26
    assert 0 < metrics[("pyorb_request_service_seconds_sum", ping)] < 5
    assert metrics[("pyorb_request_service_seconds", ping + (("quantile", "0.99"),))] >= 0
    assert metrics[("pyorb_strategy_threads", (("strategy", "thread_pool(3)"),))] >= 1
    assert metrics[("pyorb_connections", ())] == 2
    assert metrics[("pyorb_tls_handshakes_refused_total", ())] == 0
    assert exporter.url.startswith("http://127.0.0.1:")
