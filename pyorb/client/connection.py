"""One multiplexed client connection: request ids to pending invocations."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable

from omniORB import CORBA

from pyorb.aio.protocol import GIOPProtocol, own_code
from pyorb.client import errors
from pyorb.client.calls import Endpoint, RequestWriter, Route
from pyorb.client.deadlines import Deadlines
from pyorb.giop.connection import Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import GIOP_1_2, CloseConnection, LocateReply, Message, MessageError, Reply, ServiceContext
from pyorb.giop.policies import deadline_context

if TYPE_CHECKING:
    from pyorb.client.invocation import Invocation
    from pyorb.config import Config

log = logging.getLogger(__name__)
_SERVER_CLOSED = "the server closed it"


class ClientConnection(GIOPProtocol):
    """Many calls share this connection; replies find their call by request id."""

    # The transport's per-read and per-write methods, specialised for this class
    # apart from a server's transports (see own_code).
    data_received = own_code(GIOPProtocol.data_received)
    _process = own_code(GIOPProtocol._process)
    send = own_code(GIOPProtocol.send)
    _flush = own_code(GIOPProtocol._flush)

    def __init__(self, config: Config, on_closed: Callable[[ClientConnection], None],
                 endpoint: Endpoint | None = None) -> None:
        # Not super(): a bidirectional connection is also a server connection, made by its own __init__.
        GIOPProtocol.__init__(self, Role.CLIENT, config)
        self.init_calls(on_closed, endpoint)

    def init_calls(self, on_closed: Callable[[ClientConnection], None], endpoint: Endpoint | None,
                   first_id: int = 1, step: int = 1) -> None:
        """Make the state of the calls sent on this connection (``first_id``, ``step``: see :class:`RequestWriter`)."""
        self.pending: dict[int, Invocation] = {}
        self.writer = RequestWriter(self.config, self.core, first_id, step)
        self._forget = on_closed
        self.endpoint = endpoint
        self.offer: ServiceContext | None = None
        """A context sent with the next request only (the BI_DIR_IIOP offer of a bidirectional connection)."""
        self._cause = _SERVER_CLOSED
        """Why the connection ended, for the texts of the calls it fails."""
        self.callee = "the server"
        """Who runs the calls sent on this connection, as their texts name it."""
        self.caller = "this client"
        """This end, as those texts name it."""
        self.refused: CORBA.SystemException | None = None
        """Set when the server refused the TLS handshake."""
        self._tls13 = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        # Read now: after a failed read, the version may no longer be reported.
        self._tls13 = ssl_object is not None and ssl_object.version() == "TLSv1.3"

    # -- sending ---------------------------------------------------------------
    def start(self, inv: Invocation, route: Route) -> None:
        """Send ``inv`` on this connection (to ``route``'s object) and register it for the reply."""
        if not self.is_open:
            refused = self.refused
            if refused is not None:  # closed as it opened: the handshake's refusal is the reason
                inv.lost(type(refused)(refused.minor, refused.completed, refused._info))
            else:
                inv.fail(errors.not_sent(inv.op.name, route, "closed before it could be sent"))
            return
        if len(self.pending) >= self.config.max_pending_calls:
            # Bounded memory: the caller learns at once instead of queueing without end.
            inv.fail(errors.too_many_pending(inv.op.name, route, self.config.max_pending_calls))
            return
        try:
            intercepted = inv.intercepted
            contexts = intercepted.contexts if intercepted is not None else ()
            offer = self.offer
            if offer is not None and route.version == GIOP_1_2:  # bidirectional GIOP is GIOP 1.2's
                contexts += (offer,)
            else:
                offer = None
            if inv.deadlines is not None:  # its time left travels with it (a re-sent call's too)
                contexts += (deadline_context(Deadlines.time_left(inv.deadline, self.loop), time.time(),
                                              self.writer.little_endian),)
            rid, data = self.writer.request(inv.op, inv.args, route.key, route.version, route.code_sets, route.orb_type,
                                            contexts)
        except CORBA.SystemException as exc:
            inv.fail(exc)
            return
        if offer is not None:
            self.offer = None
        if inv.op.oneway:
            self.send(data)
            inv.succeed(None)
            return
        inv.conn = self
        inv.route = route
        inv.request_id = rid
        self.pending[rid] = inv
        self.send(data)

    def cancel_request(self, request_id: int) -> None:
        if self.is_open:
            self.send(self.writer.cancel(request_id))

    # -- receiving -------------------------------------------------------------
    def message_received(self, message: Message) -> None:
        if type(message) is Reply:
            inv = self.pending.pop(message.request_id, None)
            if inv is None:
                log.debug("late or unknown reply %d dropped", message.request_id)
                return
            inv.complete(message)
        elif type(message) is LocateReply:
            log.debug("unexpected LocateReply %d dropped", message.request_id)
        elif type(message) is CloseConnection:
            # The server processed none of the pending requests: safe to retry.
            pending, self.pending = self.pending, {}
            self.close()  # first, so that a retry opens a new connection
            for inv in pending.values():
                inv.connection_closed_unanswered()
        elif type(message) is MessageError:
            log.warning("%s %s reported a MessageError", self.callee, self.peer)
            self._cause = f"{self.callee} sent MessageError: it could not read a message of {self.caller}"
            self._fail_all()
            self.close()

    def _protocol_error(self, exc: ProtocolError) -> None:
        self._cause = f"protocol error: {exc.reason}"
        super()._protocol_error(exc)

    def close(self) -> None:
        if self.is_open and self._cause is _SERVER_CLOSED:
            self._cause = "this client closed it"
        super().close()

    def _fail_all(self, refused: CORBA.SystemException | None = None) -> None:
        pending, self.pending = self.pending, {}
        for inv in pending.values():
            if refused is not None:
                inv.lost(type(refused)(refused.minor, refused.completed, refused._info))
            else:
                inv.lost(errors.connection_lost(inv.op.name, inv.route, self._cause, self.callee))

    def closed(self, exc: BaseException | None) -> None:
        if exc is not None:
            self._cause = errors.os_reason(exc)
        self.refused = self._refusal(exc)
        self._fail_all(self.refused)
        self._forget(self)

    def _refusal(self, exc: BaseException | None) -> CORBA.SystemException | None:
        """TRANSIENT (completed NO) if the server refused this TLS connection's
        handshake: TLS 1.3 lets the client finish its side first, so the refusal
        arrives as the connection's end.  A server that accepted would have sent
        its session tickets first, before reading any request."""
        transport, endpoint = self.transport, self.endpoint
        if transport is None or endpoint is None or not endpoint.tls:
            return None
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None or not self._tls13:
            return None  # before 1.3, a refusal fails the client's own handshake
        session = ssl_object.session
        if session is None or session.has_ticket:
            return None
        return errors.tls_refusal(endpoint, exc)
