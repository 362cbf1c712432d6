"""The asyncio server endpoint: listen, accept, serve the adapter's objects."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import signal
import socket
import ssl
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, cast

from pyorb.aio.protocol import GIOPProtocol
from pyorb.aio.tls import TLSListener, listening_sockets
from pyorb.config import DEFAULT_CONFIG, Config
from pyorb.giop import ior as iors
from pyorb.giop.connection import Role
from pyorb.giop.bidir import bidir_context
from pyorb.interceptors import ServerInterceptor
from pyorb.interceptors import check as check_interceptors
from pyorb.server.admission import AdmissionPolicy
from pyorb.server.adapter import ObjectAdapter, RouteOptions
from pyorb.server.connection import ServerConnection
from pyorb.server.requests import RequestHandler
from pyorb.server.call.dispatch import Strategy
from pyorb.server.load import ServerLoad
from pyorb.server.call.reply import ReplyInbox
from pyorb.server.call.stats import ServerStats, merge

if TYPE_CHECKING:
    from pyorb.server.managers import ServantActivator, ServantLocator

log = logging.getLogger(__name__)


def _untracked(_conn: ServerConnection) -> None:
    """on_closed of a refused connection: the server never counted it."""


ACCEPT_BACKLOG = 64
"""The listen backlog.  The event loop accepts up to this many connections per readiness event,
and a refused one holds its descriptor for a few loop iterations until it is closed."""
REFUSAL_RESERVE = 3 * ACCEPT_BACKLOG
"""Descriptors kept free for connections being accepted and refused at once."""


class ProxyMaker(Protocol):
    """What a server needs of a client to hand its servants references:
    ``pyorb.Client`` is one."""

    def from_objref(self, omni_ref: Any, interface: Any = None) -> Any: ...

    def resolve(self, ref: Any, interface: Any = None) -> Any: ...

    async def close(self) -> None: ...


class CallbackRoutes(Protocol):
    """What a server that accepts bidirectional GIOP needs of its client:
    calls to a listen point a connection offered go over that connection
    (``pyorb.Client`` is one)."""

    def add_callback_route(self, host: str, port: int, conn: Any) -> bool: ...

    def forget(self, conn: Any) -> None: ...


DEFAULT_PROXY_MAKER = "pyorb.client.client:Client"
"""The class a server makes its own proxy maker from, named by import path:
the server package never imports the client package, the application
(which uses both) ties them together at run time."""


BIDIR_CONNECTION = "pyorb.bidir:BidirConnection"
"""The connection class of bidirectional GIOP, named by import path: it is
a client connection too, and lives above both packages."""


def _bidir_connection(*args: Any, **kwargs: Any) -> GIOPProtocol:
    """The transport of a bidirectional connection; its handler (``.handler``) is its server half."""
    module, _, name = BIDIR_CONNECTION.partition(":")
    return cast(GIOPProtocol, getattr(importlib.import_module(module), name)(*args, **kwargs))


def _default_proxy_maker(config: Config) -> ProxyMaker:
    module, _, name = DEFAULT_PROXY_MAKER.partition(":")
    return cast(ProxyMaker, getattr(importlib.import_module(module), name)(config))


WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
"""Bind addresses meaning every interface: not an address a client could call."""


def published_addresses(
    bound: Sequence[tuple[str, int]], publish: str | Sequence[str] | None = None
) -> list[tuple[str, int]]:
    """The addresses a server writes into its IORs and corbaloc URLs, in order.

    ``bound`` are the (host, port) pairs it listens on.  Without ``publish``
    each one is published as it is bound, except that a wildcard bind
    publishes this machine's host name (as omniORB does); loopback binds
    publish loopback.  ``publish`` names the addresses instead, each
    ``host``, ``host:port`` or ``[ipv6]:port`` (the port defaults to the
    first bound one): what clients elsewhere must call, behind NAT or a
    proxy, whatever the server binds.
    """
    if publish is None:
        found: list[tuple[str, int]] = []
        for host, port in bound:
            address = (socket.gethostname() if host in WILDCARD_HOSTS else host, port)
            if address not in found:
                found.append(address)
        return found
    entries = [publish] if isinstance(publish, str) else list(publish)
    if not entries:
        raise ValueError("publish names no address")
    return [parse_address(entry, bound[0][1]) for entry in entries]


def parse_address(text: str, default_port: int, *, bind: bool = False) -> tuple[str, int]:
    """``host``, ``host:port``, ``[ipv6]:port`` or a bare IPv6 address as (host, port).

    A published address (``bind`` false) must name a host clients can reach,
    not a wildcard; a bind address may be a wildcard and port 0."""
    text = text.strip()
    if text.startswith("["):  # [ipv6] or [ipv6]:port
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:  # a host name, an IPv4 address, or a bare IPv6 address
        host, port_text = text, ""
    if not bind and (not host or host in WILDCARD_HOSTS):
        raise ValueError(f"cannot publish {text!r}: name a host clients can reach")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ValueError(f"{text!r}: the port is not a number") from None
    if not (0 if bind else 1) <= port <= 65535:
        raise ValueError(f"{text!r}: port out of range")
    return host, port


def _shown(addresses: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"[{h}]:{p}" if ":" in h else f"{h or '*'}:{p}" for h, p in addresses)


def _unchanged(ref: Any, _static: str) -> Any:
    return ref


def _with_static_type(convert: Callable[..., Any] | None) -> Callable[[Any, str], Any]:
    """``convert`` called as ``convert(ref, static_repository_id)``; a one-argument converter gets the reference alone."""
    if convert is None:
        return _unchanged
    try:
        inspect.signature(convert).bind(None, "")
    except TypeError:
        return lambda ref, _static: convert(ref)
    except ValueError:  # no signature to read (a builtin): assume the documented two-argument form
        pass
    return convert


def fit_descriptor_limit(wanted: int) -> int:
    """The number of connections, at most ``wanted``, that the process's descriptor limit leaves room for.

    The soft RLIMIT_NOFILE is raised to the hard limit first.  Room is kept
    for the descriptors already open and for those the process will open
    besides connections: a refused connection needs one too, briefly, to be
    told CloseConnection, and the event loop accepts several bursts of up to
    ACCEPT_BACKLOG connections before the first refused ones are closed.  Past the limit
    accept() fails (and asyncio logs a traceback per attempt) while clients
    wait unanswered instead of being refused.
    """
    try:
        import resource
    except ImportError:  # not a POSIX system: no such limit to fit
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > soft):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.info("cannot raise the descriptor limit from %d to %s: %s", soft, hard, exc)
    if soft == resource.RLIM_INFINITY:
        return wanted
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 16
    return max(1, min(wanted, soft - in_use - REFUSAL_RESERVE - 32 - soft // 32))


class Server:
    """A GIOP/IIOP server on one TCP endpoint.

    ``async with Server(port=0) as server:`` starts it; ``server.activate``
    serves a servant and ``server.ior(key)`` / ``server.corbaloc(key)`` name it.
    ``strategy`` is the default dispatch strategy, a registry spec such as
    ``"reactive"`` (the default: synchronous servant code inline on the event
    loop), ``"thread_pool(8)"`` or ``"thread_per_connection"`` (see
    :mod:`pyorb.server.strategies`), or a strategy object; ``activate`` can
    choose another per servant or per operation.  An unknown spec raises
    ValueError here.

    Object references that coroutine and AMH servants receive, at any depth
    of their arguments, are pyorb proxies of the parameter's (or member's)
    IDL type, made by the server's own client (:attr:`client`; pass
    ``client=`` to share one), so awaiting them never blocks the event loop.
    ``objref_converter`` replaces that conversion: it is called with the
    omniORB reference and the static type's repository id
    (``lambda ref, _: ref`` keeps omniORB references).  Synchronous
    servants run on threads and get omniORB references unchanged.
    :meth:`reference` gives a proxy of an object this server activated.

    ``reuse_port`` lets several processes accept on one port (SO_REUSEPORT),
    each with its own event loop: AMH on more than one core.

    ``endpoints`` listens on several (host, port) pairs instead of
    ``host``:``port`` (IPv4 and IPv6, wildcards included); ``publish`` sets
    the addresses written into IORs and corbaloc URLs, independently of
    what is bound (see :func:`published_addresses`).  The first published
    address goes into the IIOP profile, the others into
    TAG_ALTERNATE_IIOP_ADDRESS components, which clients try in order.

    ``tls`` (an ``ssl.SSLContext``, see :func:`pyorb.tls.server_context`)
    makes the endpoints TLS-only: IORs carry the SSLIOP TAG_SSL_SEC_TRANS
    component with the TLS port and port 0 in the IIOP profile, and plain
    connections are refused.  ``tls_endpoints`` instead adds TLS endpoints
    beside plain ones, and IORs offer both.  Client certificates follow the
    context: verified when presented if its ``verify_mode`` is
    CERT_OPTIONAL, required if CERT_REQUIRED.

    ``bidirectional`` accepts bidirectional GIOP (off by default, as in
    omniORB: a client names its own listen points, which nothing checks).
    A client that offers its connection (a GIOP 1.2 request with a
    BI_DIR_IIOP context; over TLS only with a verified certificate) gets
    the calls this server's client makes to objects at those addresses
    over that connection, unless calls there already have an open
    connection (see docs/bidirectional.md).  The server's own objects are
    reachable over a client's connection whatever this says: a client made
    with ``Client(bidirectional=server)`` serves them on the connections
    it opens.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        config: Config = DEFAULT_CONFIG,
        strategy: str | Strategy | None = None,
        objref_converter: Callable[..., Any] | None = None,
        client: ProxyMaker | None = None,
        reuse_port: bool = False,
        endpoints: Sequence[tuple[str, int]] | None = None,
        publish: str | Sequence[str] | None = None,
        tls: ssl.SSLContext | None = None,
        tls_endpoints: Sequence[tuple[str, int]] | None = None,
        interceptors: Sequence[ServerInterceptor] = (),
        bidirectional: bool = False,
    ) -> None:
        if bidirectional and client is not None and not callable(getattr(client, "add_callback_route", None)):
            raise TypeError(f"bidirectional=True needs a client with add_callback_route (a pyorb.Client), "
                            f"not {type(client).__name__}")
        binds = list(endpoints) if endpoints is not None else [(host, port)]
        if not binds:
            raise ValueError("endpoints names no (host, port) to listen on")
        if tls_endpoints is not None and tls is None:
            raise ValueError("tls_endpoints needs tls: the ssl.SSLContext they serve with")
        if tls is not None and not isinstance(tls, ssl.SSLContext):
            raise TypeError(f"tls must be an ssl.SSLContext (see pyorb.tls.server_context), not {type(tls).__name__}")
        tls_binds = list(tls_endpoints) if tls_endpoints is not None else []
        if tls is not None and tls_endpoints is None:
            binds, tls_binds = [], binds  # every endpoint speaks TLS only
        elif tls is not None and not tls_binds:
            raise ValueError("tls_endpoints names no (host, port) to listen on")
        for bind_host, bind_port in binds + tls_binds:
            if not isinstance(bind_host, str):
                hint = " (a Config is passed as config=...)" if isinstance(bind_host, Config) else ""
                raise TypeError(f"a server's host must be an address string such as '127.0.0.1', "
                                f"not {type(bind_host).__name__}{hint}")
            if isinstance(bind_port, bool) or not isinstance(bind_port, int):
                raise TypeError(f"a server's port must be an int, not {type(bind_port).__name__}")
            if not 0 <= bind_port <= 65535:
                raise ValueError(f"port must be in 0..65535, got {bind_port}")
        if publish is not None:
            # A bad entry fails here, not at start.
            published_addresses([(h, p or 1) for h, p in (binds or tls_binds)], publish)
        self.config = config
        self.adapter = ObjectAdapter("reactive" if strategy is None else strategy,
                                     admission=AdmissionPolicy(config.queue_target, config.queue_interval,
                                                               config.queue_limit))
        self.adapter.interceptors = check_interceptors(interceptors, ServerInterceptor)
        self._binds = binds
        self._tls_binds = tls_binds
        self._tls = tls
        self._ssl: iors.SSLComponent | None = None  # what IORs advertise, once the TLS port is known
        self._tls_listeners: list[TLSListener] = []
        self._publish = publish
        self._host, self._port = (binds or tls_binds)[0]
        self._published: list[tuple[str, int]] = []
        self._listeners: list[asyncio.base_events.Server] = []
        self._reuse_port = reuse_port
        self._client = client
        self._owns_client = client is None
        self._convert = self._to_proxy if objref_converter is None else _with_static_type(objref_converter)
        self._started = False
        self._closing = False  # close() has begun: a connection made now is turned away at once
        self._sweeper: asyncio.Task[None] | None = None
        # Servant coroutines still running for connections already closed:
        # close() ends them with the rest, so none outlives the server.
        self._orphans: set[asyncio.Task[None]] = set()
        self._inbox: ReplyInbox | None = None
        self.connections: set[RequestHandler] = set()
        self.load = ServerLoad(config, self.connections)
        self._on_closed = self._connection_closed  # one bound method, shared by every connection
        self.bidirectional = bidirectional

    # -- lifecycle -----------------------------------------------------------
    async def start(self, *, listen: bool = True) -> None:
        """Listen on the endpoints and serve.

        ``listen=False`` binds nothing: the server then serves only the
        connections handed to it through :meth:`new_connection` (an
        in-memory pair in tests, see :func:`pyorb.testing.memory_pair`), and
        its IORs name the address it was made with (port 1 for port 0, so
        that a reference still gives a route)."""
        if self._started:
            raise RuntimeError("server already started")
        loop = asyncio.get_running_loop()
        self._inbox = ReplyInbox(loop)
        fitted = fit_descriptor_limit(self.config.max_connections)
        if fitted < self.config.max_connections:
            log.warning("max_connections lowered from %d to %d to fit the descriptor limit (RLIMIT_NOFILE); "
                        "raise the limit to serve more", self.config.max_connections, fitted)
        self.load.max_connections = fitted
        bound: list[tuple[str, int]] = []
        tls_bound: list[tuple[str, int]] = []
        try:
            for host, port in self._binds if listen else ():
                listener = await loop.create_server(
                    self._make_connection, host or None, port, reuse_port=self._reuse_port or None,
                    backlog=ACCEPT_BACKLOG)
                self._listeners.append(listener)
                bound.append((host, listener.sockets[0].getsockname()[1]))
            for host, port in self._tls_binds if listen else ():
                assert self._tls is not None
                sockets = listening_sockets(host, port, backlog=ACCEPT_BACKLOG, reuse_port=self._reuse_port)
                tls_listener = TLSListener(sockets, self._tls, self.config.tls_handshake_timeout,
                                           self._new_tls_connection, self._handshake_done)
                self._tls_listeners.append(tls_listener)
                tls_bound.append((host, sockets[0].getsockname()[1]))
        except OSError:
            for listener in self._listeners:
                listener.close()
            for tls_listener in self._tls_listeners:
                tls_listener.close()
            self._listeners.clear()
            self._tls_listeners.clear()
            raise
        for tls_listener in self._tls_listeners:
            tls_listener.start()
        self._started = True
        self._published = published_addresses(bound or tls_bound or [(self._host, self._port or 1)], self._publish)
        self._host, self._port = self._published[0]
        if self._tls is not None:
            required = not bound
            tls_port = self._port if required else tls_bound[0][1]
            certificates = {ssl.CERT_NONE: "none", ssl.CERT_OPTIONAL: "optional", ssl.CERT_REQUIRED: "required"}
            self._ssl = iors.ssl_component(tls_port, required=required,
                                           client_certificate=certificates[self._tls.verify_mode])
            if required:  # the profile's port: no plain connections (SSLIOP)
                self._published = [(h, 0) for h, _ in self._published]
                self._port = 0
        if self.config.idle_timeout is not None:
            self._sweeper = loop.create_task(self._close_idle_connections(self.config.idle_timeout))
        shown = _shown(bound) if bound else ""
        if tls_bound:
            shown = ", ".join(filter(None, [shown, "TLS " + _shown(tls_bound)]))
        published = _shown(self._published)
        if self._ssl is not None:
            published += f" (TLS port {self._ssl.port}{', TLS only' if self._ssl.requires_tls else ''})"
        log.info("pyorb server listening on %s, publishing %s", shown, published)

    def new_connection(self) -> GIOPProtocol:
        """The protocol for one more client connection, made as the listeners make
        theirs (counted, limited, closed with the server): give it a transport
        made elsewhere with ``connection_made``.  The server must be started."""
        if self._inbox is None:
            raise RuntimeError("Server.new_connection: the server is not started (await server.start() first)")
        return self._make_connection()

    def _make_connection(self) -> GIOPProtocol:
        assert self._inbox is not None  # made by start(), before accepting
        if len(self.connections) >= self.load.max_connections:
            wire = GIOPProtocol(Role.SERVER, self.config)
            RequestHandler(self.config, self.adapter, self._convert, _untracked, self.load, self._inbox, wire,
                           refuse=True)
            return wire
        wire, conn = self._accepted()
        conn.draining = self._closing  # CloseConnection once it is made: its client retries elsewhere
        self.connections.add(conn)
        return wire

    def _stop_listening(self) -> list[socket.socket]:
        """Stop accepting, and take what the kernel had already accepted for us.

        Closing a listening socket resets the connections still in its accept
        queue; their clients may already have sent requests and could only
        report COMM_FAILURE, completed MAYBE.  A duplicate of each socket keeps
        it listening while the event loop lets go of it, so nothing queued
        meanwhile is reset; the queue is then emptied and the socket closed
        with no await in between, so only a connection completed in the
        instant between the last accept and the close can still be reset.
        :meth:`_turn_away` tells those taken to retry."""
        held: list[socket.socket] = []
        for listener in self._listeners:
            held += [socket.socket(fileno=os.dup(listening.fileno())) for listening in listener.sockets]
            listener.close()
        for tls_listener in self._tls_listeners:
            tls_listener.close()
        accepted: list[socket.socket] = []
        for dup in held:
            with dup:
                dup.setblocking(False)
                while True:
                    try:
                        sock, _ = dup.accept()
                    except OSError:  # nothing more waiting (BlockingIOError), or the socket is gone
                        break
                    accepted.append(sock)
        return accepted

    async def _turn_away(self, accepted: list[socket.socket]) -> None:
        """Connections accepted as the server closes get CloseConnection: their clients retry elsewhere."""
        loop = asyncio.get_running_loop()
        for sock in accepted:
            try:
                await loop.connect_accepted_socket(self._make_connection, sock)
            except OSError:
                sock.close()

    def _new_tls_connection(self) -> GIOPProtocol | None:
        assert self._inbox is not None
        handshaking = sum(len(listener.handshakes) for listener in self._tls_listeners)
        if len(self.connections) + handshaking >= self.load.max_connections:
            self.load.refused(None)  # closed unanswered: no GIOP in clear on a TLS port
            return None
        return self._accepted()[0]

    def _accepted(self) -> tuple[GIOPProtocol, RequestHandler]:
        """The transport of a connection this server accepted, and its request handler."""
        assert self._inbox is not None
        if self.bidirectional:
            wire = _bidir_connection(self.config, self.adapter, self._convert, self._on_closed, self.load,
                                     self._inbox, forget=self._callback_closed, accept=self._offered,
                                     reference=self._full_ior)
            return wire, cast(RequestHandler, wire.handler)
        wire = GIOPProtocol(Role.SERVER, self.config)
        return wire, RequestHandler(self.config, self.adapter, self._convert, self._on_closed, self.load,
                                    self._inbox, wire, reference=self._full_ior)

    def _offered(self, conn: GIOPProtocol, points: Sequence[Any]) -> None:
        """A client offered ``conn`` for calls to objects at ``points``: this server's client sends them there."""
        routes = cast(CallbackRoutes, self.client)
        for point in points:
            if routes.add_callback_route(point.host, point.port, conn):
                log.debug("calls to %s:%d go over the connection from %s", point.host, point.port, conn.peer)
            else:
                log.info("%s offered %s:%d for callbacks, which another open connection serves: not taken",
                         conn.peer, point.host, point.port)

    def _callback_closed(self, conn: Any) -> None:
        if self._client is not None:
            cast(CallbackRoutes, self._client).forget(conn)

    def callback_connection(self, config: Config, forget: Callable[[Any], None], endpoint: Any) -> Any:
        """A client connection that serves this server's objects to its peer
        (see ``Client(bidirectional=...)``), offering its published addresses."""
        if self._inbox is None or not self._started:
            raise RuntimeError("start the callback server before its client opens connections")
        offer = bidir_context([(h, p) for h, p in self._published if p], config.little_endian)
        return _bidir_connection(config, self.adapter, self._convert, self._on_closed, self.load, self._inbox,
                                 forget=forget, endpoint=endpoint, offer=offer)

    def _handshake_done(self, wire: asyncio.Protocol | None) -> None:
        if wire is None:
            self.load.tls_refused += 1
        elif isinstance(wire, GIOPProtocol) and isinstance(wire.handler, RequestHandler) and wire.is_open:
            self.connections.add(wire.handler)

    async def _close_idle_connections(self, idle: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(idle / 4, 10.0))
            now = loop.time()
            for conn in list(self.connections):
                if conn.settled and not conn.core.in_progress \
                        and now - conn.last_activity > idle:
                    log.info("closing connection from %s: idle for %.0f s", conn.peer, now - conn.last_activity)
                    conn.close_idle()

    def _connection_closed(self, conn: ServerConnection) -> None:
        self.connections.discard(cast(RequestHandler, conn))
        tasks = cast(RequestHandler, conn).tasks
        if tasks:
            for task in tasks.values():
                if not task.done():
                    self._orphans.add(task)
                    task.add_done_callback(self._orphans.discard)
        self.adapter.registry.connection_closed(conn)

    async def close(self, grace: float = 0.0) -> None:
        """Stop accepting, then close every connection.

        Idle connections get CloseConnection at once (their clients retry
        elsewhere or later: TRANSIENT, completed NO).  Connections with
        requests in flight read no more requests and get up to ``grace``
        seconds to answer them before CloseConnection; after that they are
        closed and late replies are dropped.  A bidirectional connection
        whose callbacks (this server's calls to its client) await replies
        is busy too: it keeps reading, for those replies, gets the same
        ``grace``, and closes once nothing runs for its client and no
        callback awaits a reply (answered, timed out or cancelled).  A
        request it reads while a callback awaits its reply runs (the
        client's servant may wait for it); the others do not, and its
        CloseConnection tells the client to send them again.  Callbacks
        still unanswered when it closes fail with COMM_FAILURE, completed MAYBE.
        Servant coroutines still running then, including those whose clients
        closed their connections earlier, are cancelled and get up to a second
        to finish.
        """
        if not self._started:
            return
        self._closing = True
        await self._turn_away(self._stop_listening())
        if self._sweeper is not None:
            self._sweeper.cancel()
        conns = list(self.connections)
        for conn in conns:
            conn.drain()
        busy = [asyncio.ensure_future(c.wait_closed()) for c in conns if c.is_open] if grace > 0 else []
        if busy:
            await asyncio.wait(busy, timeout=grace)
        orphans = list(self._orphans)
        if orphans:
            log.warning("cancelling %d servant coroutines still running for clients that have gone", len(orphans))
        ending = orphans
        for conn in conns:
            if conn.is_open:
                log.warning("closing connection from %s with %d requests unanswered%s", conn.peer, conn.in_flight,
                            " and callbacks awaiting replies" if conn.awaits_replies else "")
                ending.extend((conn.tasks or {}).values())
                conn.close()
        for task in ending:
            task.cancel()
        if ending:  # a servant may clean up on CancelledError; it gets a moment, not forever
            await asyncio.wait(ending, timeout=1.0)
        await asyncio.gather(*(c.wait_closed() for c in conns))
        # Connections accepted while closing began close themselves with CloseConnection.
        late = [asyncio.ensure_future(c.wait_closed()) for c in self.connections]
        if late:
            await asyncio.wait(late, timeout=1.0)
        for listener in self._listeners:
            await listener.wait_closed()
        for tls_listener in self._tls_listeners:
            await tls_listener.wait_closed()
        self._listeners.clear()
        self._tls_listeners.clear()
        self._started = False
        # Joining dispatcher threads may wait for servant code: not on the loop,
        # and not for long (they are daemon threads; a stuck servant is logged).
        joining = asyncio.get_running_loop().run_in_executor(None, self.adapter.registry.close)
        await asyncio.wait([joining], timeout=1.0)
        self.adapter.etherealize_all()
        await self.adapter.wait_managers(timeout=max(grace, 1.0))
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def serve_forever(self, grace: float = 5.0) -> None:
        """Serve until SIGTERM or SIGINT, then :meth:`close` with ``grace``.

        Starts the server if needed.  Signal handlers are installed on the
        running loop (so call it from the main thread) and removed on return.
        """
        if not self._started:
            await self.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        signals = (signal.SIGTERM, signal.SIGINT)
        for signum in signals:
            loop.add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
            log.info("signal received: closing with %.1f s grace", grace)
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
            await self.close(grace)

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- naming objects --------------------------------------------------------
    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return self._port

    def activate(
        self,
        servant: object,
        key: bytes | str | None = None,
        *,
        strategy: str | Strategy | None = None,
        operations: Mapping[str, str | Strategy] | None = None,
        deadline: float | None = None,
        deadlines: Mapping[str, float] | None = None,
        admission: AdmissionPolicy | None = None,
        admissions: Mapping[str, AdmissionPolicy] | None = None,
    ) -> bytes:
        """Serve ``servant`` under ``key``; returns the object key.

        ``strategy`` overrides the server's default strategy for this servant,
        ``operations`` maps single operation names to their own strategy.
        ``deadline`` (all operations) and ``deadlines`` (per operation) are
        time limits in seconds: past it the client gets CORBA.TIMEOUT and the
        servant's late reply is discarded.
        ``admission`` (all operations; default: from the server's Config
        ``queue_target``, ``queue_interval`` and ``queue_limit``) and
        ``admissions`` (per operation) say when a call is refused with
        CORBA.TRANSIENT, completed NO, instead of queued (see
        :mod:`pyorb.server.admission`).
        """
        return self.adapter.activate(servant, key, strategy=strategy, operations=operations, deadline=deadline,
                                     deadlines=deadlines, admission=admission, admissions=admissions)

    def activate_default(
        self,
        servant: object,
        prefix: bytes | str,
        *,
        strategy: str | Strategy | None = None,
        operations: Mapping[str, str | Strategy] | None = None,
        deadline: float | None = None,
        deadlines: Mapping[str, float] | None = None,
        admission: AdmissionPolicy | None = None,
        admissions: Mapping[str, AdmissionPolicy] | None = None,
    ) -> None:
        """Serve every object key that starts with ``prefix`` (and has no servant
        of its own) with ``servant``, a default servant.

        Servant code reads the rest of the key, the object id, from
        :func:`pyorb.current_object_id`.  The other arguments route its
        operations as :meth:`activate` does.  :meth:`reference` and
        :meth:`ior` name any object under the prefix.  Of several prefixes
        of a key, the longest serves it.  ValueError for an empty prefix or
        one already served.
        """
        self.adapter.activate_default(servant, prefix, RouteOptions(
            strategy, operations or {}, deadline, deadlines or {}, admission, admissions or {}))

    def set_locator(
        self,
        prefix: bytes | str,
        locator: ServantLocator,
        interface: type,
        *,
        strategy: str | Strategy | None = None,
        operations: Mapping[str, str | Strategy] | None = None,
        deadline: float | None = None,
        deadlines: Mapping[str, float] | None = None,
        admission: AdmissionPolicy | None = None,
        admissions: Mapping[str, AdmissionPolicy] | None = None,
    ) -> None:
        """Ask ``locator`` (a :class:`pyorb.ServantLocator`) for the servant of
        every request for a key under ``prefix``.

        ``interface`` is the generated POA class of the objects (their
        repository id in IORs and ``_is_a``); the servants ``preinvoke``
        returns must implement it.  The servant runs under its route's
        strategy, deadline and admission control, set as for
        :meth:`activate`; ``deadline`` bounds an ``async`` preinvoke too.
        """
        self.adapter.set_locator(prefix, locator, interface, RouteOptions(
            strategy, operations or {}, deadline, deadlines or {}, admission, admissions or {}))

    def set_activator(
        self,
        prefix: bytes | str,
        activator: ServantActivator,
        interface: type,
        *,
        strategy: str | Strategy | None = None,
        operations: Mapping[str, str | Strategy] | None = None,
        deadline: float | None = None,
        deadlines: Mapping[str, float] | None = None,
        admission: AdmissionPolicy | None = None,
        admissions: Mapping[str, AdmissionPolicy] | None = None,
    ) -> None:
        """Ask ``activator`` (a :class:`pyorb.ServantActivator`) for the servant
        of a key under ``prefix`` on its first request; the servant then stays
        active under that key until :meth:`deactivate` or :meth:`close`, which
        etherealize it.  Routing and ``interface`` as for :meth:`set_locator`;
        ``deadline`` bounds the wait for an ``async`` incarnate too.
        """
        self.adapter.set_activator(prefix, activator, interface, RouteOptions(
            strategy, operations or {}, deadline, deadlines or {}, admission, admissions or {}))

    def stats(self) -> ServerStats:
        """A snapshot of dispatch statistics per strategy and per operation."""
        recorders = list(self.adapter.recorders.items())  # one copy: metrics scrapes read from other threads
        ops = sorted({op for (op, _, _), _r in recorders})
        return ServerStats(
            tuple(merge(s.name, [r for (_, st, _), r in recorders if st is s], s.stats)
                  for s in list(self.adapter.registry)),
            tuple(merge(op, [r for (o, _, _), r in recorders if o == op]) for op in ops),
            len(self.connections),
            self.load.tls_refused,
        )

    # -- references for servants ---------------------------------------------
    @property
    def client(self) -> ProxyMaker:
        """The client that makes this server's proxies (made on first use unless one was given)."""
        if self._client is None:
            self._client = _default_proxy_maker(self.config)
        return self._client

    def _to_proxy(self, ref: Any, static: str) -> Any:
        return self.client.from_objref(ref, static)

    def reference(self, key: bytes | str, interface: Any = None) -> Any:
        """A pyorb proxy of the object this server serves under ``key``, typed
        by ``interface`` (a stub or typed proxy class; default: the servant's
        IDL type).  A servant returns it, passes it on or calls it.  Under a
        default servant's or servant manager's prefix, ``key`` (prefix and
        object id) needs no servant yet: nothing is activated or stored."""
        return self.client.resolve(self.ior(key), interface)

    def deactivate(self, key: bytes | str) -> None:
        self.adapter.deactivate(key)

    def _key(self, key: bytes | str) -> bytes:
        return key.encode() if isinstance(key, str) else key

    def ior(self, key: bytes | str) -> str:
        """The stringified IOR of the object under ``key`` (GIOP 1.2, UTF-8 code sets)."""
        return self._full_ior(self._key(key)).to_string()

    def _full_ior(self, key: bytes) -> iors.IOR:
        return iors.build_ior(self.adapter.type_id(key), self._host, self._port, key,
                              alternates=self._published[1:], ssl=self._ssl)

    @property
    def published(self) -> list[tuple[str, int]]:
        """The addresses in this server's IORs and corbaloc URLs, first the profile's (after :meth:`start`)."""
        return list(self._published)

    @property
    def tls(self) -> iors.SSLComponent | None:
        """What this server's IORs say of TLS (port, options), None without TLS (after :meth:`start`)."""
        return self._ssl

    def corbaloc(self, key: bytes | str) -> str:
        """A corbaloc URL of the object; ValueError for a TLS-only server (a
        corbaloc ``iiop`` address cannot say TLS: hand out :meth:`ior`)."""
        if self._ssl is not None and self._ssl.requires_tls:
            raise ValueError("this server takes TLS connections only, which a corbaloc URL cannot name: use its IOR")
        return iors.to_corbaloc(self._host, self._port, self._key(key), alternates=self._published[1:])
