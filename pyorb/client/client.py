"""The client: a pool of multiplexed connections, one per endpoint."""

from __future__ import annotations

import asyncio
import copy
import logging
import ssl
import time
from types import TracebackType
from typing import Any, Awaitable, Callable, Collection, Protocol, Sequence, TypeVar, overload

from omniORB import CORBA

from pyorb import _accelerator
from pyorb.client.balancer import POLICIES, Balancer, HedgeStats, Hedging, OutlierDetection
from pyorb.client import errors
from pyorb.client.calls import Endpoint, GroupRoutes, Intercepted, Route, reference_ior, route_for
from pyorb.client.connection import ClientConnection
from pyorb.client.deadlines import Deadlines
from pyorb.client.invocation import Hedge, Invocation
from pyorb.client.proxy import ObjectRef, interface_for, proxy_class, static_interface
from pyorb.config import DEFAULT_CONFIG, Config
from pyorb.interceptors import ClientInterceptor
from pyorb.interceptors import check as check_interceptors
from pyorb.tls import client_context, client_option, tls_reason
from pyorb.giop.ior import IOR
from pyorb.marshal import Operation, ensure_orb
from pyorb.request_context import SERVING, inherited_timeout

log = logging.getLogger(__name__)
P = TypeVar("P", bound=ObjectRef)
# A proxy class, seen as its constructor: matching on ``type[P]`` would also
# match a bare ``type`` and leave mypy with nothing to infer.
ProxyClass = Callable[["Client", IOR], P]
# loop.create_connection's shape: (protocol factory, host, port, **options) -> (transport, protocol).
Connector = Callable[..., Awaitable[tuple[asyncio.BaseTransport, Any]]]

class CallbackServer(Protocol):
    """What a client needs of the server whose objects its connections carry
    calls to (``Client(bidirectional=...)``): ``pyorb.Server`` is one."""

    def callback_connection(self, config: Config, forget: Callable[[ClientConnection], None],
                            endpoint: Endpoint) -> ClientConnection: ...


class Client:
    """Calls objects on any GIOP server; all calls to one endpoint share one
    connection, so thousands of calls in flight cost one socket.

    Use it as ``async with Client() as client:``; ``client.resolve(ref, Iface)``
    gives a proxy whose methods return awaitables.

    Objects whose IOR offers TLS (SSLIOP) are called over TLS, with ``tls``:
    an ``ssl.SSLContext`` (see :func:`pyorb.tls.client_context`: the CA to
    verify servers against, a client certificate for mutual TLS), by
    default one that trusts the system's authorities.  ``tls=False`` never
    uses TLS (objects that require it are unreachable: INV_OBJREF).

    ``interceptors`` add service contexts to each call and see its outcome
    (see :mod:`pyorb.interceptors`).

    ``bidirectional`` (a started :class:`pyorb.Server`, the client's own
    callback server) offers this client's connections for callbacks
    (bidirectional GIOP, see docs/bidirectional.md): the first GIOP 1.2
    request on each names the server's published addresses, and a server
    that accepts the offer calls that server's objects over the
    connection this client opened.

    Calls to an object group's reference (TAG_FT_GROUP: see
    :func:`pyorb.giop.ior.group_ior`) are spread over its members by
    ``balancing`` (``"round_robin"`` or ``"least_pending"``, see
    :mod:`pyorb.client.balancer`), one connection per member.  A call that
    cannot reach its member, or whose connection is closed by the server
    before the reply (CloseConnection: it never ran), goes to another
    member; one whose connection is lost after it was sent fails with
    COMM_FAILURE (completed MAYBE) unless the proxy declares the operation
    idempotent (``resolve(..., idempotent={"op"})``).  ``outlier_detection``
    ejects a member that stopped answering before its calls time out (see
    :class:`~pyorb.client.balancer.OutlierDetection`; None turns it off);
    the idempotent calls it holds then go to another member.  ``hedging``
    (off by default) sends an idempotent call still unanswered after its
    member's usual round trip to another member as well, within a budget;
    the first answer wins (see :class:`~pyorb.client.balancer.Hedging`,
    and :meth:`group_stats` for what it did).

    ``connect`` opens connections in place of ``loop.create_connection``
    (same arguments, same result): a test's in-memory transport, say
    (:func:`pyorb.testing.memory_pair`).
    """

    def __init__(
        self, config: Config = DEFAULT_CONFIG, *, tls: ssl.SSLContext | bool | None = None,
        interceptors: Sequence[ClientInterceptor] = (),
        balancing: str = "round_robin", outlier_detection: OutlierDetection | None = OutlierDetection(),
        connect: Connector | None = None,
        bidirectional: CallbackServer | None = None,
        hedging: Hedging | None = None,
    ) -> None:
        if balancing not in POLICIES:
            raise ValueError(f"unknown balancing policy {balancing!r}; known: {', '.join(POLICIES)}")
        self.config = config
        self.balancing = balancing
        self.outlier_detection = outlier_detection
        self.hedging = hedging
        self._balancers: dict[tuple[str, int], Balancer] = {}
        self._tls = client_option(tls)
        self.interceptors: tuple[ClientInterceptor, ...] = check_interceptors(interceptors, ClientInterceptor)
        self._conns: dict[Endpoint, ClientConnection] = {}
        self._deadlines: Deadlines | None = None  # the deadlines of the loop this client's calls last ran on
        self._deadlines_loop: asyncio.AbstractEventLoop | None = None
        self._connecting: dict[Endpoint, asyncio.Future[ClientConnection]] = {}
        self._queued: dict[Endpoint, list[tuple[Invocation, Route]]] = {}
        self._sweeping: asyncio.TimerHandle | None = None  # outlier detection's timer, while group calls are out
        self._closed = False
        self._connect = connect
        if bidirectional is not None and not callable(getattr(bidirectional, "callback_connection", None)):
            raise TypeError("bidirectional must be a pyorb Server (the callback server), "
                            f"not {type(bidirectional).__name__}")
        self._callbacks = bidirectional
        ensure_orb()

    # -- references ------------------------------------------------------------
    @overload
    def resolve(self, ref: str | IOR | ObjectRef, interface: ProxyClass[P], *,
                idempotent: Collection[str] = ()) -> P: ...
    @overload
    def resolve(self, ref: str | IOR | ObjectRef, interface: type | None = None, *,
                idempotent: Collection[str] = ()) -> Any: ...
    def resolve(self, ref: str | IOR | ObjectRef, interface: Any = None, *, idempotent: Collection[str] = ()) -> Any:
        """A proxy for ``ref`` (IOR string, corbaloc URL, IOR or proxy).

        ``interface`` is the generated stub class (e.g. ``Stock.Quoter``) or
        a typed proxy class (``Stock_pyorb.Quoter``, written by
        :func:`pyorb.idl.stubs.write_stubs`), which gives a proxy of that static
        type; without it the IOR's type id picks one.  No network traffic:
        use :meth:`narrow` to have the server confirm the type.
        """
        ior = reference_ior(ref)
        if ior is None:
            proxy = self.from_objref(ref, interface)
        else:
            proxy = proxy_class(interface if interface is not None else interface_for(ior.type_id))(self, ior)
        if idempotent and proxy is not None:
            proxy._idempotent = frozenset(idempotent)
        return proxy

    @overload
    async def narrow(self, ref: str | IOR | ObjectRef, interface: ProxyClass[P]) -> P: ...
    @overload
    async def narrow(self, ref: str | IOR | ObjectRef, interface: type) -> Any: ...
    async def narrow(self, ref: str | IOR | ObjectRef, interface: Any) -> Any:
        """Like :meth:`resolve`, but asks the server (``_is_a``) first.

        Raises CORBA.BAD_PARAM if the object does not implement ``interface``.
        """
        obj: ObjectRef = self.resolve(ref, interface)
        stub = getattr(interface, "_interface", None) or interface  # a proxy class names its stub class
        repo_id = getattr(stub, "_NP_RepositoryId")
        if not await obj._is_a(repo_id):
            raise errors.not_a(repo_id, self.route(obj.ior), obj.ior)
        return obj

    def from_objref(self, omni_ref: Any, interface: type | str | None = None) -> Any:
        """A pyorb proxy for an omniORB object reference (None stays None).

        ``interface`` is the static type: a stub class or a repository id
        (the IDL type where the reference was received, which is how
        received references are converted); without one, or for
        CORBA::Object, the reference's own type id picks the proxy.  That id
        may be empty (a reference made from a corbaloc URL) or name a type
        whose IDL is not loaded here.
        """
        if omni_ref is None:
            return None
        ior_text = ensure_orb().object_to_string(omni_ref)
        return self.resolve(IOR.from_string(ior_text), static_interface(interface))

    # -- invocation ------------------------------------------------------------
    def route(self, target: IOR) -> Route | None:
        """Where calls to ``target`` go: endpoint, object key, GIOP version."""
        return route_for(target, self.config.giop_version, self._tls is not False)

    def invoke(
        self, target: IOR, op: Operation, args: tuple[Any, ...], timeout: float | None, route: Route | None = None,
        idempotent: bool = False,
    ) -> asyncio.Future[Any]:
        """Start a call; the returned future gets the result or the exception.

        ``route`` is ``self.route(target)``, passed by callers that cache it.
        ``idempotent``: the call may be re-sent to another group member after
        its connection was lost.

        Called from servant code, the call's time is bounded by the
        remaining time of the request being served (see
        ``Config.propagate_deadlines``); once that is up the call fails at
        once with TIMEOUT, completed NO, unsent.
        """
        loop = asyncio.get_running_loop()
        inv = Invocation(op, args, None, self, target)
        if SERVING.get(None) is not None and self.config.propagate_deadlines:
            timeout = inherited_timeout(timeout)
            if timeout is not None and timeout <= 0:
                inv.set_exception(errors.served_deadline_passed(op.name, timeout))
                return inv
        if idempotent:
            inv.idempotent = True
        if self.interceptors:
            inv.intercepted = intercepted = Intercepted(self.interceptors, op, target)
            try:
                intercepted.send_request()  # here, in the caller's context (its current trace span)
            except CORBA.SystemException as exc:
                inv.set_exception(exc)
                return inv
        if timeout is not None:
            deadlines = self._deadlines
            if deadlines is None or self._deadlines_loop is not loop:  # Deadlines.of is a weak-dict lookup
                deadlines = self._deadlines = Deadlines.of(loop)
                self._deadlines_loop = loop
            inv.expire_in(timeout, loop, deadlines)
        self._send(inv, route if route is not None else self.route(target))
        return inv

    def _send(self, inv: Invocation, route: Route | None) -> None:
        if route is None:
            inv.fail(errors.no_route(inv.op.name, inv.target, self._tls is not False))
            return
        group = route.group
        if group is not None:
            balancer = self._balancer(group)
            member = balancer.pick(inv.tried or ())
            if member is None:
                inv.fail(errors.group_exhausted(inv.op.name, group.members))
                return
            first = not inv.sent_at
            inv.member = (balancer, member.endpoint)
            inv.sent_at = time.monotonic()  # the balancer's clock: the member's latency and oldest call
            route = member
            if first and inv.idempotent and balancer.hedging is not None and type(inv) is Invocation:
                delay = balancer.hedge_delay(member.endpoint)
                if delay is not None:
                    asyncio.get_running_loop().call_later(delay, self._hedge, inv, balancer, delay, [])
            if self._sweeping is None and self.outlier_detection is not None:
                self._sweeping = asyncio.get_running_loop().call_later(self._sweep_interval, self._sweep)
        conn = self._conns.get(route.endpoint)
        if conn is not None and conn.is_open:
            conn.start(inv, route)
            return
        # Calls made while the connection opens wait in one list per endpoint:
        # a first burst of N calls costs one task, not N.
        queued = self._queued.get(route.endpoint)
        if queued is None:
            queued = self._queued[route.endpoint] = []
            asyncio.get_running_loop().create_task(self._connect_and_start(route.endpoint))
        queued.append((inv, route))

    async def _connect_and_start(self, endpoint: Endpoint) -> None:
        try:
            conn: ClientConnection | None = await self.connection(*endpoint)
            failure = None
        except CORBA.SystemException as exc:
            conn, failure = None, exc
        for inv, route in self._queued.pop(endpoint, ()):
            if inv.done():  # timed out or cancelled while waiting
                continue
            if conn is not None:
                if inv.member is not None:  # the member's latency starts with its connection
                    inv.sent_at = time.monotonic()
                conn.start(inv, route)
                continue
            assert failure is not None
            fallback = route.next()
            if fallback is not None:  # the object's next address, as the IOR lists them
                self._send(inv, fallback)
            elif inv.member is not None:  # an object group's member: another member
                inv.member[0].failed(inv.member[1])
                inv.fail_over(inv.member[1])
            else:
                inv.fail(copy.copy(failure))  # one exception object per call, message and all

    def _retarget(self, inv: Invocation, target: IOR) -> None:
        if inv.forwards > self.config.max_forwards:
            inv.fail(errors.too_many_forwards(inv.op.name, self.config.max_forwards))
            return
        inv.conn = None
        self._send(inv, self.route(target))

    # -- connections -----------------------------------------------------------
    async def connection(self, host: str, port: int, tls: bool = False) -> ClientConnection:
        """The open connection to ``host:port`` (over TLS if ``tls``), connecting if needed.

        Raises CORBA.TRANSIENT if the endpoint refuses or does not answer,
        or the TLS handshake fails (e.g. an untrusted server certificate).
        """
        if self._closed:
            raise errors.client_closed()
        endpoint = Endpoint(host, port, tls)
        conn = self._conns.get(endpoint)
        if conn is not None and conn.is_open:
            return conn
        waiting = self._connecting.get(endpoint)
        if waiting is None:
            waiting = asyncio.ensure_future(self._open(endpoint))
            self._connecting[endpoint] = waiting
            waiting.add_done_callback(lambda _f: self._connecting.pop(endpoint, None))
        return await asyncio.shield(waiting)

    async def _open(self, endpoint: Endpoint) -> ClientConnection:
        loop = asyncio.get_running_loop()
        host, port, tls = endpoint
        secure: dict[str, Any] = {}
        if tls:
            secure = {"ssl": self.tls_context, "server_hostname": host,
                      "ssl_handshake_timeout": self.config.tls_handshake_timeout}
        try:
            connect = loop.create_connection if self._connect is None else self._connect
            conn: ClientConnection
            _, conn = await asyncio.wait_for(
                connect(lambda: self._new_connection(endpoint), host, port, **secure),
                self.config.connect_timeout + (self.config.tls_handshake_timeout if tls else 0.0),
            )
        except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
            log.info("cannot connect to %s%s:%d: %s", "TLS " if tls else "", host, port, exc)
            if isinstance(exc, asyncio.TimeoutError):
                reason: str | BaseException = (
                    f"no answer within {self.config.connect_timeout:g} s (Config.connect_timeout)" if not tls else
                    f"no connection and TLS handshake within {self.config.connect_timeout:g} s + "
                    f"{self.config.tls_handshake_timeout:g} s (Config.connect_timeout, Config.tls_handshake_timeout)")
            else:
                reason = tls_reason(exc)
            raise errors.connect_failure(endpoint, reason) from None
        # A group member backing off stays so until it answers a call: a
        # connection that opens (a proxy in front of it, say) proves little.
        self._conns[endpoint] = conn
        return conn

    def _new_connection(self, endpoint: Endpoint) -> ClientConnection:
        if self._callbacks is not None:
            return self._callbacks.callback_connection(self.config, self.forget, endpoint)
        return ClientConnection(self.config, self.forget, endpoint)

    def add_callback_route(self, host: str, port: int, conn: ClientConnection) -> bool:
        """Send calls to objects at ``host``:``port`` over ``conn``, a connection
        whose peer offered it for them (bidirectional GIOP), while it is open.

        False, and nothing changes, if calls there already have an open
        connection (this client's own, or another peer's offer): an offer
        never takes over calls that have a way to go."""
        endpoint = Endpoint(host, port, False)
        held = self._conns.get(endpoint)
        if held is not None and held.is_open:
            return held is conn
        self._conns[endpoint] = conn
        return True

    @property
    def tls_context(self) -> ssl.SSLContext:
        """The context TLS connections use (made on first use unless one was given)."""
        if not isinstance(self._tls, ssl.SSLContext):
            if self._tls is False:
                raise CORBA.NO_PERMISSION(0, CORBA.COMPLETED_NO, "TLS needed, and this client was made with tls=False")
            self._tls = client_context()
        return self._tls

    def _balancer(self, group: GroupRoutes) -> Balancer:
        balancer = self._balancers.get(group.key)
        if balancer is None or balancer.version < group.version:
            balancer = self._balancers[group.key] = Balancer(
                group, self.balancing, self._pending_on, detection=self.outlier_detection, oldest=self._oldest_on,
                ejected=self._member_ejected, hedging=self.hedging)
        return balancer

    def _hedge(self, inv: Invocation, balancer: Balancer, delay: float, hedges: list[Hedge]) -> None:
        """``inv`` is still unanswered after ``delay``: send a copy to another member."""
        if inv.done() or inv.member is None or inv.member[0] is not balancer:
            return
        hedging = balancer.hedging
        assert hedging is not None
        exclude = {inv.member[1], *(inv.tried or ()), *(h.member[1] for h in hedges if h.member is not None)}
        member = balancer.hedge_to(exclude)
        if member is not None:
            hedge = Hedge(inv)
            hedge.member = (balancer, member.endpoint)
            hedge.sent_at = time.monotonic()
            hedge.add_done_callback(self._hedge_done)
            if not hedges:
                inv.add_done_callback(lambda _inv: [h.cancel() for h in hedges])  # the loser's CancelRequest
            hedges.append(hedge)
            log.debug("hedging %s: no answer from %s:%d after %.1f ms; a copy goes to %s:%d", inv.op.name,
                      inv.member[1].host, inv.member[1].port, delay * 1e3, member.endpoint.host, member.endpoint.port)
            self._send(hedge, member)
        if len(hedges) < hedging.max_hedges:
            # Another copy, or another try after no member or no token: each
            # wait twice the last, so a call that waits long (no timeout, no
            # other member) costs a few timers, not one per delay.
            wait = delay if member is not None else 2 * delay
            asyncio.get_running_loop().call_later(wait, self._hedge, inv, balancer, wait, hedges)

    @staticmethod
    def _hedge_done(hedge: asyncio.Future[Any]) -> None:
        """A hedge ended: its answer is the call's unless the call has one (or was given up)."""
        assert isinstance(hedge, Hedge)
        if hedge.cancelled():
            return
        exc = hedge.exception()  # read even when unused: a hedge's failure is no one's business but this
        call = hedge.call
        if call.done() or isinstance(exc, CORBA.SystemException):
            return
        assert hedge.member is not None
        hedge.member[0].hedge_stats.won += 1
        if exc is None:
            call.succeed(hedge.result())
        else:
            call.fail(exc)

    def group_stats(self) -> dict[tuple[str, int], HedgeStats]:
        """What hedging did per object group (by FT domain and group id) this client has called."""
        return {key: balancer.hedge_stats for key, balancer in self._balancers.items()}

    def _pending_on(self, endpoint: Endpoint) -> int:
        """Calls awaiting replies (or a connection) to ``endpoint``: what ``least_pending`` compares."""
        conn = self._conns.get(endpoint)
        return (len(conn.pending) if conn is not None else 0) + len(self._queued.get(endpoint, ()))

    @property
    def _sweep_interval(self) -> float:
        assert self.outlier_detection is not None
        return max(self.outlier_detection.floor / 2, 0.01)

    def _sweep(self) -> None:
        """Outlier detection between calls: a member can stall while no call is being placed."""
        self._sweeping = None
        owing = [balancer.sweep() for balancer in list(self._balancers.values())]
        if any(owing) and not self._closed:
            self._sweeping = asyncio.get_running_loop().call_later(self._sweep_interval, self._sweep)

    def _oldest_on(self, endpoint: Endpoint) -> float | None:
        """When the oldest call awaiting a reply from ``endpoint`` was sent (None without one)."""
        conn = self._conns.get(endpoint)
        if conn is None or not conn.pending:
            return None
        return next(iter(conn.pending.values())).sent_at or None  # pending keeps the order calls were sent in

    def _member_ejected(self, endpoint: Endpoint) -> None:
        """Outlier detection left ``endpoint`` out: its idempotent calls go to another member."""
        conn = self._conns.get(endpoint)
        if conn is None:
            return
        moving = [inv for inv in conn.pending.values()
                  if inv.idempotent and inv.member is not None and inv.member[1] == endpoint]
        if moving:
            log.info("group member %s:%d ejected as stalled; %d idempotent call(s) go to other members",
                     endpoint.host, endpoint.port, len(moving))
        for inv in moving:
            inv.retry_elsewhere()

    def forget(self, conn: ClientConnection) -> None:
        """No call goes over ``conn`` any more (it closed)."""
        for endpoint, c in list(self._conns.items()):
            if c is conn:
                del self._conns[endpoint]

    async def close(self) -> None:
        """Close every connection; calls still pending fail with COMM_FAILURE."""
        self._closed = True
        if self._sweeping is not None:
            self._sweeping.cancel()
            self._sweeping = None
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        await asyncio.gather(*(c.wait_closed() for c in conns))

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


# With the compiled accelerator, a C twin makes and sends the common call (pyorb.client._cinvocation).
_accelerator.twin(__name__, "Client.invoke", "pyorb.client._cinvocation")
