"""Distributed tracing with OpenTelemetry: a span per client call and per
server request, joined across processes by the W3C trace context carried in
a GIOP service context.

Install the extra (``pip install 'pyorb-asyncio[tracing]'``), configure
OpenTelemetry's SDK as usual, then::

    server = Server(interceptors=[ServerTracing()])
    client = Client(interceptors=[ClientTracing()])

A server request's span is the current span while its servant runs, under
every strategy, so the calls a middle tier makes with a traced client
(AMH handlers included) are its children: client → middle tier → sink is
one trace.

On the wire the context is service context
:data:`~pyorb.interceptors.TRACE_CONTEXT_ID`: the propagator's fields as
UTF-8 ``name: value`` lines, the way HTTP carries them (``traceparent``,
``tracestate``, ``baggage`` with the default propagators).  CORBA has no
standard binding of W3C trace context, so another ORB joins the trace by
reading that context the same way; ORBs that do not know it ignore it.
"""

from __future__ import annotations

from typing import Any, Mapping

from omniORB import CORBA

from pyorb.interceptors import TRACE_CONTEXT_ID, ClientRequestInfo, ServerRequestInfo

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("pyorb.interceptors.tracing needs OpenTelemetry: pip install 'pyorb-asyncio[tracing]'") from exc

INSTRUMENTATION = "pyorb"
_SPAN = "pyorb.span"


def encode_carrier(carrier: Mapping[str, str]) -> bytes:
    """Propagator fields as the service context's data."""
    return "".join(f"{name}: {value}\n" for name, value in carrier.items()).encode("utf-8")


def decode_carrier(data: bytes) -> dict[str, str]:
    """The service context's data as propagator fields; malformed lines are skipped."""
    carrier: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip():
            carrier[name.strip().lower()] = value.strip()
    return carrier


def _span_name(interface: str, operation: str) -> str:
    # IDL:Bench/Echo:1.0 -> Bench::Echo/ping, as rpc.service/rpc.method read.
    body = interface[4:].rsplit(":", 1)[0] if interface.startswith("IDL:") else interface
    service = body.replace("/", "::") or "CORBA::Object"
    return f"{service}/{operation}"


def _attributes(interface: str, operation: str) -> dict[str, Any]:
    name = _span_name(interface, operation)
    return {"rpc.system": "corba", "rpc.service": name.rsplit("/", 1)[0], "rpc.method": operation}


def _end(span: Any, exception: BaseException | None) -> None:
    if exception is not None:
        if isinstance(exception, CORBA.UserException):
            span.set_attribute("rpc.corba.user_exception", getattr(exception, "_NP_RepositoryId", ""))
        else:
            span.record_exception(exception)
            span.set_status(Status(StatusCode.ERROR, type(exception).__name__))
            if isinstance(exception, CORBA.SystemException):
                span.set_attribute("rpc.corba.minor", int(exception.minor))
    span.end()


class ClientTracing:
    """A client interceptor: a CLIENT span per call, child of the caller's
    current span, whose context goes to the server."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self._tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)

    def send_request(self, info: ClientRequestInfo) -> None:
        span = self._tracer.start_span(_span_name(info.interface, info.operation), kind=SpanKind.CLIENT,
                                       attributes=_attributes(info.interface, info.operation))
        info.slots[_SPAN] = span
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        if carrier:
            info.request_contexts[TRACE_CONTEXT_ID] = encode_carrier(carrier)

    def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
        span = info.slots.pop(_SPAN, None)
        if span is not None:
            _end(span, exception)


class ServerTracing:
    """A server interceptor: a SERVER span per request, child of the
    caller's span when the request carries its context, current while the
    servant runs."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self._tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)

    def receive_request(self, info: ServerRequestInfo) -> None:
        raw = info.request_contexts.get(TRACE_CONTEXT_ID)
        parent = propagate.extract(decode_carrier(raw)) if raw is not None else None
        attributes = _attributes(info.interface, info.operation)
        if isinstance(info.peer, tuple) and len(info.peer) >= 2:
            attributes["net.peer.ip"], attributes["net.peer.port"] = str(info.peer[0]), int(info.peer[1])
        span = self._tracer.start_span(_span_name(info.interface, info.operation), context=parent,
                                       kind=SpanKind.SERVER, attributes=attributes)
        info.slots[_SPAN] = span
        # The request's own contextvars context: the servant's code runs in it
        # (pyorb copies it to the servant's task or thread); never detached,
        # as it ends with the request.
        otel_context.attach(trace.set_span_in_context(span))

    def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
        span = info.slots.pop(_SPAN, None)
        if span is not None:
            _end(span, exception)


__all__ = ["ClientTracing", "ServerTracing", "decode_carrier", "encode_carrier"]
