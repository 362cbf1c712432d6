"""A blocking GIOP client on plain sockets, for threads and for gevent.

The same sans-IO core and call encoding as the asyncio client, driven by
blocking socket calls.  The ``socket`` and ``threading`` modules are looked
up when a connection is made, so a process that gevent has monkey-patched
(Locust does so on import) gets cooperative sockets and locks.

One connection per endpoint, and one call at a time on each connection
(like omniORB's ``oneCallPerConnection``): threads that share a client take
turns on the connection's lock.  Give each thread (or Locust user) its own
:class:`BlockingClient` for calls that overlap.

Errors are CORBA system exceptions, as in the asyncio client: TRANSIENT
when a connection is refused or the server sends CloseConnection,
COMM_FAILURE (completed MAYBE) when the connection is lost during a call,
TIMEOUT when a call outlives its timeout, MARSHAL for a request over
``max_message_size``.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from types import TracebackType
from typing import Any, Callable, NamedTuple, NoReturn, Sequence

import omniORB
from omniORB import CORBA

from pyorb import _accelerator, marshal
from pyorb.client import errors
from pyorb.client.calls import (
    Endpoint,
    Intercepted,
    LocationForward,
    Reference,
    RequestWriter,
    interface_operations,
    Route,
    reference_ior,
    reply_result,
    route_for,
)
from pyorb.client.proxy import ObjectRef, interface_for, static_interface
from pyorb.marshal.body import IS_A, NON_EXISTENT
from pyorb.config import DEFAULT_CONFIG, Config
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.fast12 import encode_request_12_contexts
from pyorb.giop.ior import IOR
from pyorb.giop.messages import CLOSED, NEED_DATA, CloseConnection, Event, MessageError, Reply, ServiceContext
from pyorb.giop.policies import deadline_context
from pyorb.interceptors import ClientInterceptor
from pyorb.interceptors import check as check_interceptors
from pyorb.marshal import Operation, ensure_orb
from pyorb.request_context import SERVING, inherited_timeout
from pyorb.tls import client_context, client_option, tls_reason

log = logging.getLogger(__name__)

_DEFAULT: Any = object()
_RECV_SIZE = 64 * 1024  # below malloc's mmap threshold: no mmap per reply


class CallResult(NamedTuple):
    """What :meth:`BlockingClient.call` returns."""

    value: Any
    """The call's result, as the proxy method returns it."""
    reply_size: int
    """Bytes of the reply body (0 for a oneway call)."""


class StaleConnection(Exception):
    """The connection closed while the call waited for it; nothing was sent."""


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _deadline_request(
    request_id: int, response_flags: int, object_key: bytes, operation: str, body: bytes, little_endian: bool,
    timeout: float, now: float,
) -> bytes:
    """The GIOP 1.2 request of a call whose one service context is its deadline, ``timeout``
    seconds from ``now`` (``time.time()``): what the connection's writer sends for a call with a
    timeout once the code sets are chosen.  The reference for its C twin, which the compiled
    :meth:`BlockingConnection.call` writes in one buffer."""
    return encode_request_12_contexts(request_id, response_flags, object_key, operation,
                                      (deadline_context(timeout, now, little_endian),), body, little_endian)


class BlockingConnection:
    """One socket to one endpoint; a lock lets one call at a time use it."""

    def __init__(self, sock: socket.socket, config: Config) -> None:
        self._sock = sock
        self._core = GIOPConnection(
            Role.CLIENT, max_message_size=config.max_message_size, max_fragment_trains=config.max_fragment_trains,
            max_fragment_size=config.max_fragment_size,
        )
        self._writer = RequestWriter(config, self._core)
        self._read_timeout = config.read_timeout
        self._lock = threading.Lock()
        self.is_open = True
        self.endpoint: Endpoint | None = None
        self._tls13 = False
        # The call on the connection now (one at a time), for error texts.
        self._op = ""
        self._route: Route | None = None
        self._timeout: float | None = None

    @classmethod
    def connect(
        cls, endpoint: Endpoint, config: Config, timeout: float, tls: Callable[[], ssl.SSLContext] | None = None
    ) -> BlockingConnection:
        """Connect to ``endpoint`` (with ``tls()``'s context if it is a TLS
        endpoint); CORBA.TRANSIENT if it refuses, is silent, or the handshake fails."""
        host, port = endpoint[0], endpoint[1]
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            log.debug("cannot connect to %s:%d: %s", host, port, exc)
            late = isinstance(exc, socket.timeout)
            raise errors.connect_failure(endpoint, f"no answer within {timeout:g} s" if late else exc) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(endpoint) > 2 and endpoint[2]:
            if tls is None:
                sock.close()
                raise CORBA.NO_PERMISSION(0, CORBA.COMPLETED_NO, "TLS endpoint and no TLS context")
            sock.settimeout(min(timeout, config.tls_handshake_timeout))
            try:
                sock = tls().wrap_socket(sock, server_hostname=host)
            except (OSError, ValueError) as exc:
                sock.close()
                log.debug("TLS handshake with %s:%d failed: %s", host, port, exc)
                late = isinstance(exc, socket.timeout)
                reason = f"no complete TLS handshake within {sock.gettimeout():g} s" if late else tls_reason(exc)
                raise errors.connect_failure(endpoint, reason) from None
        conn = cls(sock, config)
        conn.endpoint = Endpoint(*endpoint)
        # Read now: after a failed read, the version is no longer reported.
        conn._tls13 = isinstance(sock, ssl.SSLSocket) and sock.version() == "TLSv1.3"
        return conn

    @property
    def core(self) -> GIOPConnection:
        """The connection's protocol state (its code sets among it)."""
        return self._core

    def call(
        self, op: Operation, args: tuple[Any, ...], route: Route, deadline: float | None,
        contexts: tuple[ServiceContext, ...] = (), timeout: float | None = None,
    ) -> Reply | None:
        """Send a request to ``route``'s object and wait for its reply (None for a
        oneway call); ``timeout`` is what ``deadline`` was made from, for error texts."""
        wait = _remaining(deadline)
        if not self._lock.acquire(timeout=-1 if wait is None else max(wait, 0)):
            raise errors.timed_out(op.name, route, timeout, sent=False)  # other callers held the connection
        try:
            if not self.is_open:
                raise StaleConnection()
            self._op, self._route, self._timeout = op.name, route, timeout
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.timed_out(op.name, route, timeout, sent=False)  # before the writer counts a request
                contexts += (deadline_context(left, time.time(), self._writer.little_endian),)
            rid, data = self._writer.request(op, args, route.key, route.version, route.code_sets, route.orb_type,
                                             contexts)
            self._send(data, deadline)
            return None if op.oneway else self._await_reply(rid, deadline)
        finally:
            self._lock.release()

    def _send(self, data: bytes, deadline: float | None) -> None:
        wait = _remaining(deadline)
        try:
            self._sock.settimeout(None if wait is None else max(wait, 0.001))
            self._sock.sendall(data)
        except OSError as exc:
            self._send_failed(exc)

    def _send_failed(self, exc: OSError) -> NoReturn:
        """Close, and raise what a call whose request could not be sent gets."""
        if isinstance(exc, TimeoutError):
            self.close()  # part of a message may have gone out
            raise errors.timed_out(self._op, self._route, self._timeout, sent=False) from None
        log.debug("send failed: %s", exc)
        refused = self._refusal(exc)
        self.close()
        if refused is not None:
            raise refused from None
        raise errors.not_sent(self._op, self._route, f"failed: {errors.os_reason(exc)}") from None

    def _await_reply(self, rid: int, deadline: float | None) -> Reply:
        while True:
            event = self._next_event()
            if event is NEED_DATA:
                self._receive(rid, deadline)
            elif type(event) is Reply:
                if event.request_id == rid:
                    return event
                log.debug("late or unknown reply %d dropped", event.request_id)
            else:
                self._connection_event(event)

    def _connection_event(self, event: Event) -> None:
        """Anything but a Reply or NEED_DATA: raise if it ends the connection."""
        if event is CLOSED:
            self._lost("the server closed it")
        if type(event) is MessageError:
            self._lost("the server sent MessageError: it could not read a message of this client")
        if type(event) is CloseConnection:
            # The server processed none of the pending requests: safe to retry.
            self.close()
            raise errors.closed_unanswered(self._op, self._route)
        log.debug("unexpected %s dropped", type(event).__name__)

    def _next_event(self) -> Event:
        try:
            return self._core.next_event()
        except ProtocolError as exc:
            self._protocol_error(exc)

    def _protocol_error(self, exc: ProtocolError) -> NoReturn:
        log.warning("protocol error from the server: %s; closing the connection", exc.reason)
        if exc.send_message_error:
            self._try_send(self._core.message_error_bytes())
        self._lost(f"protocol error: {exc.reason}")

    def _receive(self, rid: int, deadline: float | None) -> None:
        wait = _remaining(deadline)
        # A message that stops half way must not hold the connection forever.
        stalling = self._core.in_progress and (wait is None or wait > self._read_timeout)
        if stalling:
            wait = self._read_timeout
        try:
            if wait is not None and wait <= 0:
                raise TimeoutError
            self._sock.settimeout(wait)
            data = self._sock.recv(_RECV_SIZE)
        except OSError as exc:
            self._receive_failed(exc, rid, stalling)
        self._core.receive_data(data)

    def _receive_failed(self, exc: OSError, rid: int, stalling: bool) -> NoReturn:
        """Raise what a call whose reply did not come gets (a timed-out call's request is cancelled)."""
        if isinstance(exc, TimeoutError):
            if stalling:
                log.warning("incomplete reply stalled for %s s; closing the connection", self._read_timeout)
                self._lost(f"its reply stopped half way for {self._read_timeout:g} s (Config.read_timeout)")
            self._try_send(self._writer.cancel(rid))
            raise errors.timed_out(self._op, self._route, self._timeout) from None
        log.debug("connection lost: %s", exc)
        self._lost(errors.os_reason(exc), exc)

    def _lost(self, cause: str, exc: OSError | None = None) -> NoReturn:
        """Close, and raise what the pending call gets: TRANSIENT (completed NO)
        if the server refused the TLS handshake, else COMM_FAILURE (completed MAYBE)."""
        if not self.is_open:  # closed by another thread of this client
            cause = "this client closed it"
        refused = self._refusal(exc)
        self.close()
        if refused is not None:
            raise refused from None
        raise errors.connection_lost(self._op, self._route, cause) from None

    def _alert(self) -> OSError | None:
        """The TLS alert a refusing server sent before closing, if it can still be read."""
        try:
            self._sock.settimeout(0)
            self._sock.recv(1)
        except OSError as exc:
            return exc if _is_alert(exc) else None
        return None

    def _refusal(self, exc: OSError | None) -> CORBA.SystemException | None:
        # As the asyncio client's ClientConnection._refusal: no session ticket on TLS 1.3, no handshake.
        sock, endpoint = self._sock, self.endpoint
        if not isinstance(sock, ssl.SSLSocket) or endpoint is None or not self._tls13:
            return None
        session = sock.session
        if session is None or session.has_ticket:
            return None
        return errors.tls_refusal(endpoint, exc if _is_alert(exc) else self._alert())

    def _try_send(self, data: bytes) -> None:
        try:
            self._sock.settimeout(self._read_timeout)
            self._sock.sendall(data)
        except OSError:
            self.close()

    def close(self) -> None:
        """Close the socket; a call blocked on it fails with COMM_FAILURE."""
        if not self.is_open:
            return
        self.is_open = False
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv
        except OSError:
            pass
        self._sock.close()


def _is_alert(exc: BaseException | None) -> bool:
    return isinstance(exc, ssl.SSLError) and "ALERT" in (exc.reason or "")


class BlockingClient:
    """Calls objects on any GIOP server from blocking code.

    Use it as ``with BlockingClient() as client:``; ``client.resolve(ref,
    Iface)`` gives a proxy whose methods block and return the result, with
    the conventions of the asyncio proxies: the return value, a tuple when
    there are out parameters, user exceptions raised.  Each method takes an
    optional ``timeout=`` in seconds (default ``config.call_timeout``) that
    bounds the whole call: connecting, waiting for the connection, the reply
    and any LOCATION_FORWARD hops.

    ``tls`` is as for :class:`pyorb.Client`: objects whose IOR offers TLS
    are called over TLS with this context (default: the system's
    authorities); ``tls=False`` never uses TLS.  ``interceptors`` are as
    for :class:`pyorb.Client`; they run on the calling thread.
    """

    def __init__(
        self, config: Config = DEFAULT_CONFIG, *, tls: ssl.SSLContext | bool | None = None,
        interceptors: Sequence[ClientInterceptor] = (),
    ) -> None:
        self.config = config
        self._tls = client_option(tls)
        self.interceptors: tuple[ClientInterceptor, ...] = check_interceptors(interceptors, ClientInterceptor)
        self.value_bounds = config.value_bounds()
        self._conns: dict[Endpoint, BlockingConnection] = {}
        self._lock = threading.Lock()
        self._closed = False
        ensure_orb()

    # -- references ------------------------------------------------------------
    def resolve(self, ref: str | IOR | BlockingRef | ObjectRef, interface: type | None = None) -> Any:
        """A blocking proxy for ``ref`` (IOR string, corbaloc URL, IOR or proxy).

        ``interface`` is the generated stub class; without it the IOR's type
        id picks one.  No network traffic.
        """
        ior = reference_ior(ref)
        if ior is None:
            return self.from_objref(ref, interface)
        if interface is None:
            interface = interface_for(ior.type_id)
        return blocking_proxy_class(interface)(self, ior)

    def narrow(self, ref: str | IOR | BlockingRef | ObjectRef, interface: type) -> Any:
        """Like :meth:`resolve`, but asks the server (``_is_a``) first.

        Raises CORBA.BAD_PARAM if the object does not implement ``interface``.
        """
        obj = self.resolve(ref, interface)
        repo_id = interface._NP_RepositoryId  # type: ignore[attr-defined]
        if not obj._is_a(repo_id):
            raise errors.not_a(repo_id, self.route(obj.ior), obj.ior)
        return obj

    def from_objref(self, omni_ref: Any, interface: type | str | None = None) -> Any:
        """A blocking proxy for an omniORB object reference (None stays None).

        ``interface`` is the static type: a stub class or a repository id
        (the IDL type where the reference was received); without one, or for
        CORBA::Object, the reference's own type id picks the proxy.
        """
        if omni_ref is None:
            return None
        return self.resolve(IOR.from_string(ensure_orb().object_to_string(omni_ref)), static_interface(interface))

    # -- invocation ------------------------------------------------------------
    def route(self, target: IOR) -> Route | None:
        """Where calls to ``target`` go: endpoint, object key, GIOP version."""
        return route_for(target, self.config.giop_version, self._tls is not False)

    def invoke(
        self, target: IOR, op: Operation, args: tuple[Any, ...], timeout: float | None, route: Route | None = None
    ) -> Any:
        """Call ``op`` on ``target`` and return its result (see :meth:`call`)."""
        return self.call(target, op, args, timeout, route).value

    def call(
        self, target: IOR, op: Operation, args: tuple[Any, ...], timeout: float | None, route: Route | None = None
    ) -> CallResult:
        """Call ``op`` on ``target``: its result and the size of the reply.

        ``route`` is ``self.route(target)``, passed by callers that cache it.
        Raises the call's user exception or a CORBA system exception.
        Called from servant code, the call's time is bounded by the
        remaining time of the request being served (see
        ``Config.propagate_deadlines``); once that is up it fails at once with
        TIMEOUT, completed NO, unsent.
        """
        if SERVING.get(None) is not None and self.config.propagate_deadlines:
            timeout = inherited_timeout(timeout)
            if timeout is not None and timeout <= 0:
                raise errors.served_deadline_passed(op.name, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        clock = (deadline, timeout)
        route = route or self.route(target)
        if not self.interceptors:
            return self._call(op, args, route, clock, None, target)
        intercepted = Intercepted(self.interceptors, op, target)
        intercepted.send_request()
        try:
            outcome = self._call(op, args, route, clock, intercepted, target)
        except BaseException as exc:
            intercepted.receive_reply(exc)
            raise
        intercepted.receive_reply(None)
        return outcome

    def _call(
        self, op: Operation, args: tuple[Any, ...], route: Route | None, clock: tuple[float | None, float | None],
        intercepted: Intercepted | None, target: IOR,
    ) -> CallResult:
        """The call, following LOCATION_FORWARD; ``clock`` is its (deadline, timeout)."""
        contexts = intercepted.contexts if intercepted is not None else ()
        for _hop in range(self.config.max_forwards + 1):
            if route is None:
                raise errors.no_route(op.name, target, self._tls is not False)
            reply, core, reached = self._request(route, op, args, clock, contexts)
            if reply is None:
                return CallResult(None, 0)
            if intercepted is not None:
                intercepted.reply_contexts(reply.service_contexts)
            try:
                result = reply_result(op, reply, self.from_objref, self.value_bounds, core.char_set, core.wide_giop11,
                                      reached, target)
                return CallResult(result, len(reply.body))
            except LocationForward as fwd:
                target = fwd.target
                route = self.route(target)
        raise errors.too_many_forwards(op.name, self.config.max_forwards)

    def _request(
        self, route: Route, op: Operation, args: tuple[Any, ...], clock: tuple[float | None, float | None],
        contexts: tuple[ServiceContext, ...] = (),
    ) -> tuple[Reply | None, GIOPConnection, Route]:
        """The reply (None for a oneway call), the protocol state (code sets) of
        the connection it came on, and the route it went to."""
        deadline, timeout = clock
        for _attempt in range(2):
            conn, reached = self._reachable(route, clock, op.name)
            try:
                return conn.call(op, args, reached, deadline, contexts, timeout), conn.core, reached
            except StaleConnection:
                pass  # another caller lost it while we waited: safe to use a new one
        raise errors.not_sent(op.name, route, "closed twice while the call waited for it")

    # -- connections -----------------------------------------------------------
    def _reachable(self, route: Route, clock: tuple[float | None, float | None],
                   op: str) -> tuple[BlockingConnection, Route]:
        """A connection to the first of the route's addresses that answers, and that address's route."""
        while True:
            try:
                return self._connection(route, clock, op), route
            except CORBA.TRANSIENT:
                fallback = route.next()
                if fallback is None:
                    raise
                route = fallback

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if not isinstance(self._tls, ssl.SSLContext):
                self._tls = client_context()  # the system's authorities (tls=False gives no TLS routes)
            return self._tls

    def _connection(self, route: Route, clock: tuple[float | None, float | None], op: str) -> BlockingConnection:
        endpoint = route.endpoint
        with self._lock:
            if self._closed:
                raise errors.client_closed()
            conn = self._conns.get(endpoint)
        if conn is not None and conn.is_open:
            return conn
        timeout = self.config.connect_timeout
        wait = _remaining(clock[0])
        if wait is not None:
            if wait <= 0:
                raise errors.timed_out(op, route, clock[1], sent=False)
            timeout = min(timeout, wait)
        # Connect without the lock: a slow endpoint must not hold up the others.
        new = BlockingConnection.connect(endpoint, self.config, timeout, self._tls_context)
        with self._lock:
            if self._closed:
                new.close()
                raise errors.client_closed()
            conn = self._conns.get(endpoint)
            if conn is not None and conn.is_open:
                new.close()  # another thread connected first
                return conn
            self._conns[endpoint] = new
        return new

    def close(self) -> None:
        """Close every connection; calls still waiting fail with COMM_FAILURE."""
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            conn.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class BlockingRef(Reference):
    """A reference to a CORBA object, bound to the blocking client that calls it."""

    __slots__ = ("_client", "_route")
    _repr_note = " (blocking)"
    _interface: type | None = None
    _operations: dict[str, Operation] = {}
    """The interface's operations by method name (for wrappers such as pyorb.locust)."""

    def __init__(self, client: BlockingClient, ior: IOR) -> None:
        self._client = client
        self._ior = ior
        self._route: Route | None = None

    def _call(self, op: Operation, args: tuple[Any, ...], timeout: Any = _DEFAULT) -> CallResult:
        """Call ``op`` with ``args``: the result and the reply's size."""
        if timeout is _DEFAULT:
            timeout = self._client.config.call_timeout
        route = self._route
        if route is None:
            route = self._route = self._client.route(self._ior)
        return self._client.call(self._ior, op, args, timeout, route)

    def _invoke(self, op: Operation, args: tuple[Any, ...], timeout: Any = _DEFAULT) -> Any:
        return self._call(op, args, timeout).value

    def _is_a(self, repo_id: str, *, timeout: Any = _DEFAULT) -> bool:
        """Ask the server whether the object implements ``repo_id``."""
        return bool(self._invoke(IS_A, (repo_id,), timeout))

    def _non_existent(self, *, timeout: Any = _DEFAULT) -> bool:
        """Ask the server whether the object is gone."""
        return bool(self._invoke(NON_EXISTENT, (), timeout))

    def _narrow(self, interface: type) -> Any:
        """The same reference seen as ``interface`` (no remote check)."""
        return blocking_proxy_class(interface)(self._client, self._ior)



def _blocking_method(attr: str, op: Operation) -> Callable[..., Any]:
    nargs = op.args.count

    def call(self: BlockingRef, *args: Any, timeout: Any = _DEFAULT) -> Any:
        if len(args) != nargs:
            raise op.arity_error(len(args))
        return self._invoke(op, args, timeout)

    call.__name__ = attr
    call.__doc__ = f"Invoke ``{op.name}`` and return its result."
    return call


_classes: dict[type | None, type[BlockingRef]] = {None: BlockingRef}
_classes_lock = threading.Lock()


def blocking_proxy_class(interface: type | None) -> type[BlockingRef]:
    """The blocking proxy class for a generated stub class such as ``Stock.Quoter``."""
    cls = _classes.get(interface)
    if cls is None:
        assert interface is not None
        ops = interface_operations(interface)
        methods: dict[str, Any] = {"__slots__": (), "_interface": interface, "_operations": ops}
        methods.update((attr, _blocking_method(attr, op)) for attr, op in ops.items())
        cls = type(interface.__name__, (BlockingRef,), methods)
        cls.__qualname__ = f"{interface.__module__}.{interface.__name__} (pyorb blocking proxy)"
        with _classes_lock:
            cls = _classes.setdefault(interface, cls)
    return cls


def _to_omni(value: Any) -> Any:
    # One hook serves both kinds of proxy; this module imports proxy.py
    # (which installs its own) first, so this one stays installed.
    if isinstance(value, (BlockingRef, ObjectRef)):
        return ensure_orb().string_to_object(value.ior.to_string())
    raise CORBA.BAD_PARAM(omniORB.BAD_PARAM_WrongPythonType, CORBA.COMPLETED_NO,
                          f"expected an object reference (a proxy), got {type(value).__name__}")


marshal.set_objref_hook(_to_omni)
# The compiled call: the common call (GIOP 1.2, code sets chosen, no interceptor contexts, no
# fragments) written, sent and read without the Python frames between the socket calls.
_accelerator.twin(__name__, "_deadline_request", "pyorb.client._cblocking")
_accelerator.twin(__name__, "BlockingConnection.call", "pyorb.client._cblocking")
_accelerator.twin(__name__, "BlockingClient._call", "pyorb.client._cblocking")
