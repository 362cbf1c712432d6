"""Request interceptors: CORBA Portable Interceptors, asyncio-native.

A **server interceptor** sees each request before it is dispatched and each
outcome before the reply is sent::

    class Audit:
        def receive_request(self, info: ServerRequestInfo) -> None | Awaitable[None]:
            ...   # raise CORBA.NO_PERMISSION(...) to refuse; may be ``async def``
        def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
            ...   # add info.reply_contexts; exception is None for a normal reply

    Server(interceptors=[Audit()])

``receive_request`` runs on the event loop, in the request's own
``contextvars`` context: a context variable it sets (the current
OpenTelemetry span, an authenticated identity) is what the servant sees,
whatever strategy runs it.  It may refuse the request by raising a CORBA
system exception, which the client receives (completed NO) and which is
counted as ``rejected`` in ``Server.stats()``; anything else it raises is
logged and the client gets UNKNOWN.  If it returns an awaitable, dispatch
waits for it (later requests of the connection do not).  ``send_reply``
runs on the thread that replies (the loop, or a pool's thread for
synchronous servants), for every request whose ``receive_request`` returned
normally, refusals by a later interceptor, missed deadlines and
arguments that cannot be read included,
in the reverse order; it must not block.

A **client interceptor** adds service contexts to each call and sees the
reply's::

    class Token:
        def send_request(self, info: ClientRequestInfo) -> None:
            info.request_contexts[TOKEN_CONTEXT_ID] = b"..."
        def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
            ...   # info.reply_contexts; exception is None for a result

    Client(interceptors=[Token()])

``send_request`` runs once per call, in the caller's context, when the call
is made (raising a CORBA system exception fails the call, completed NO);
``receive_reply`` runs once when the call ends, with its exception if it
failed (a user exception, a system exception, a timeout or a lost
connection).  Both are synchronous: they run for every call.

Without interceptors neither side builds any of this: the cost is one
truth test per request.  Service context ids are IOP::ServiceId values;
pyorb's own (``TOKEN_CONTEXT_ID``, ``TRACE_CONTEXT_ID``) are in a range
OMG vendor tags leave free, and unknown contexts are ignored by every ORB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Mapping, Protocol, runtime_checkable

PYORB_VENDOR_TAG = 0x50590000
"""The base of pyorb's own service context ids (``PY`` in the vendor byte pair)."""
TOKEN_CONTEXT_ID = PYORB_VENDOR_TAG | 0x01
"""A bearer token, as UTF-8 bytes (:mod:`pyorb.interceptors.auth`)."""
TRACE_CONTEXT_ID = PYORB_VENDOR_TAG | 0x02
"""W3C trace context headers (:mod:`pyorb.interceptors.tracing`)."""


@dataclass(eq=False)
class ServerRequestInfo:
    """One request as a server interceptor sees it."""

    operation: str
    object_key: bytes
    interface: str
    """The servant's repository id, e.g. ``IDL:Bench/Echo:1.0``."""
    request_id: int
    response_expected: bool
    peer: Any
    """The client's (host, port)."""
    certificate: Mapping[str, Any] | None
    """The client's verified TLS certificate (``ssl.SSLSocket.getpeercert()`` form), if it presented one."""
    request_contexts: Mapping[int, bytes]
    """The request's service contexts, by id."""
    reply_contexts: dict[int, bytes] = field(default_factory=dict)
    """Service contexts to send with the reply: ``send_reply`` (or ``receive_request``) may add some."""
    slots: dict[str, Any] = field(default_factory=dict)
    """Interceptors' own state for this request, from ``receive_request`` to ``send_reply``."""


@dataclass(eq=False)
class ClientRequestInfo:
    """One call as a client interceptor sees it."""

    operation: str
    object_key: bytes
    interface: str
    """The target's repository id as its IOR names it (may be empty, e.g. from a corbaloc URL)."""
    oneway: bool
    request_contexts: dict[int, bytes] = field(default_factory=dict)
    """Service contexts to send with the request: ``send_request`` adds them."""
    reply_contexts: Mapping[int, bytes] = field(default_factory=dict)
    """The reply's service contexts (empty until a reply arrives; none for oneway calls)."""
    slots: dict[str, Any] = field(default_factory=dict)
    """Interceptors' own state for this call, from ``send_request`` to ``receive_reply``."""


@runtime_checkable
class ServerInterceptor(Protocol):
    def receive_request(self, info: ServerRequestInfo) -> Awaitable[None] | None:
        """Before dispatch; raise a CORBA system exception to refuse the request."""

    def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
        """After the outcome is decided, before the reply is encoded."""


@runtime_checkable
class ClientInterceptor(Protocol):
    def send_request(self, info: ClientRequestInfo) -> None:
        """When the call is made; raise a CORBA system exception to fail it."""

    def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
        """When the call ends, with its exception if it failed."""


def check(interceptors: Any, kind: type) -> tuple[Any, ...]:
    """``interceptors`` as a tuple, each checked to implement ``kind`` (TypeError otherwise)."""
    found = tuple(interceptors or ())
    for interceptor in found:
        if not isinstance(interceptor, kind):
            raise TypeError(f"{type(interceptor).__name__} is not a {kind.__name__}: it needs "
                            + " and ".join(sorted(m for m in ("receive_request", "send_reply", "send_request",
                                                              "receive_reply") if hasattr(kind, m))))
    return found


__all__ = [
    "ClientInterceptor",
    "ClientRequestInfo",
    "PYORB_VENDOR_TAG",
    "ServerInterceptor",
    "ServerRequestInfo",
    "TOKEN_CONTEXT_ID",
    "TRACE_CONTEXT_ID",
    "check",
]
