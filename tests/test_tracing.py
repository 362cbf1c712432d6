"""OpenTelemetry tracing across client -> AMH middle tier -> sink (pyorb.interceptors.tracing).

Three pyorb endpoints over real loopback connections, each with the tracing
interceptors, spans collected by the SDK's in-memory exporter.  The W3C
trace context crosses each hop in a GIOP service context; the middle tier
is an AMH servant that replies from the sink call's callback, and the sink
runs its servant on a thread pool, so the span must follow the request
onto another thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from omniORB import CORBA
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import pyorb
from pyorb.idl import bench_idl
from pyorb.interceptors import TRACE_CONTEXT_ID
from pyorb.interceptors.tracing import ClientTracing, ServerTracing, decode_carrier, encode_carrier

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
import Bench__POA  # noqa: E402  (made by load_idl)

AMHEcho = pyorb.amh_skeleton(Bench__POA.Echo)


class Sink(Bench__POA.Sink):  # type: ignore[misc]
    def __init__(self) -> None:
        self.current: list[Any] = []

    def work(self, token: int) -> int:
        self.current.append(trace.get_current_span().get_span_context())
        if token == 13:
            raise CORBA.NO_RESOURCES(0, CORBA.COMPLETED_NO)
        return token + 1


class Middle(AMHEcho):  # type: ignore[misc,valid-type]
    """Holds the request, calls the sink without blocking, replies from the callback."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def ping(self, rh: Any, stamp: int) -> None:
        pending = self.sink.work(stamp)

        def reply(done: Any) -> None:
            if done.exception() is not None:
                rh.raise_exception(done.exception())
            else:
                rh.ping(done.result())

        pending.add_done_callback(reply)

    def notify(self, rh: Any, stamp: int) -> None:
        pass


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_carrier_encoding() -> None:
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "a=1"}
    assert decode_carrier(encode_carrier(carrier)) == carrier
    assert decode_carrier(b"garbage\n\xff\xfe: x\nTraceParent: v\n") == {"\ufffd\ufffd": "x", "traceparent": "v"}


@pytest.mark.asyncio
async def test_one_trace_across_client_amh_middle_tier_and_sink(
    spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("test")
    client_side = [ClientTracing(provider)]
    sink_servant = Sink()
    async with pyorb.Server(interceptors=[ServerTracing(provider)], strategy="thread_pool(2)") as sink_server, \
            pyorb.Client(interceptors=client_side) as middle_client, \
            pyorb.Server(interceptors=[ServerTracing(provider)]) as middle_server, \
            pyorb.Client(interceptors=client_side) as client:
        sink_key = sink_server.activate(sink_servant, "Sink")
        sink = middle_client.resolve(sink_server.ior(sink_key), Bench.Sink)
        middle_key = middle_server.activate(Middle(sink), "Middle")
        echo = client.resolve(middle_server.ior(middle_key), Bench.Echo)
        with tracer.start_as_current_span("checkout") as root:
            assert await echo.ping(41) == 42
            with pytest.raises(CORBA.NO_RESOURCES):
                await echo.ping(13)
        await asyncio.sleep(0.05)  # the servers' spans end as their replies go out

    finished = exporter.get_finished_spans()
    trace_ids = {s.context.trace_id for s in finished}
    assert trace_ids == {root.get_span_context().trace_id}  # one trace, every hop
    by_id = {s.context.span_id: s for s in finished}

    def chain(leaf: Any) -> list[tuple[str, SpanKind]]:
        path = []
        while leaf is not None:
            path.append((leaf.name, leaf.kind))
            leaf = by_id.get(leaf.parent.span_id) if leaf.parent is not None else None
        return path

    sink_spans = [s for s in finished if s.name == "Bench::Sink/work" and s.kind == SpanKind.SERVER]
    assert len(sink_spans) == 2
    for leaf in sink_spans:
        assert chain(leaf) == [("Bench::Sink/work", SpanKind.SERVER), ("Bench::Sink/work", SpanKind.CLIENT),
                               ("Bench::Echo/ping", SpanKind.SERVER), ("Bench::Echo/ping", SpanKind.CLIENT),
                               ("checkout", SpanKind.INTERNAL)]
    # The sink's servant ran on a pool thread inside its request's span.
    assert [c.span_id for c in sink_servant.current] == [s.context.span_id for s in
                                                         sorted(sink_spans, key=lambda s: s.start_time)]
    failed = [s for s in finished if s.status.status_code == StatusCode.ERROR]
    assert sorted((s.name, s.kind.name) for s in failed) == sorted([
        ("Bench::Sink/work", "SERVER"), ("Bench::Sink/work", "CLIENT"),
        ("Bench::Echo/ping", "SERVER"), ("Bench::Echo/ping", "CLIENT")])
    server_span = sink_spans[0]
    assert server_span.attributes is not None and server_span.attributes["rpc.system"] == "corba"
    assert server_span.attributes["rpc.method"] == "work" and server_span.attributes["net.peer.ip"] == "127.0.0.1"


@pytest.mark.asyncio
async def test_requests_without_trace_context_start_their_own_trace(
    spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    seen: list[dict[int, bytes]] = []

    class Spy:
        def receive_request(self, info: Any) -> None:
            seen.append(dict(info.request_contexts))

        def send_reply(self, info: Any, exception: BaseException | None) -> None:
            pass

    async with pyorb.Server(interceptors=[Spy(), ServerTracing(provider)]) as server:
        key = server.activate(Sink(), "Sink")
        async with pyorb.Client() as plain:  # no tracing on this client
            assert await plain.resolve(server.ior(key), Bench.Sink).work(1) == 2
    (span,) = exporter.get_finished_spans()
    assert span.kind == SpanKind.SERVER and span.parent is None
    assert TRACE_CONTEXT_ID not in seen[0]
