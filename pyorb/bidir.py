"""Bidirectional GIOP: one connection carrying requests both ways.

A client behind NAT or a firewall cannot be called back on a connection of
the server's own.  With bidirectional GIOP (CORBA 3.0, 15.8) it offers its
connection instead: its first GIOP 1.2 request carries a BI_DIR_IIOP
context naming the addresses of its own objects (its listen points, see
:mod:`pyorb.giop.bidir`), and a server that accepts the offer sends its
calls to objects at those addresses over that connection.

:class:`BidirConnection` is both a client and a server connection: replies
to its own calls find them by request id, requests from its peer go to its
request handler (:class:`BidirRequests`, which takes the peer's offer) and
are answered on the same connection.  It lives here,
above both packages, since they never import each other: the client makes
one through its callback server (``Client(bidirectional=server)``), the
server for each accepted connection when it accepts offers
(``Server(bidirectional=True)``), each naming this class by import path.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from pyorb.aio.protocol import GIOPProtocol
from pyorb.client.connection import ClientConnection
from pyorb.giop.bidir import FIRST_ID_ACCEPTOR, FIRST_ID_INITIATOR, ListenPoint, listen_points
from pyorb.giop.connection import Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import GIOP_1_2, CloseConnection, LocateReply, Message, MessageError, Reply, Request, \
    ServiceContext
from pyorb.server.connection import ServerConnection
from pyorb.server.requests import ObjrefConverter, RequestHandler

if TYPE_CHECKING:
    from pyorb.client.calls import Endpoint, RequestWriter
    from pyorb.config import Config
    from pyorb.giop.ior import IOR
    from pyorb.server.adapter import ObjectAdapter
    from pyorb.server.load import ServerLoad
    from pyorb.server.call.reply import ReplyInbox

log = logging.getLogger(__name__)
# On the accepting end the peer is the client that opened the connection, and this end its server.
_CLIENT_CLOSED = "the client that opened it closed it"
_CLOSED_HERE = "this server closed it"

ListenPointsOffered = Callable[["BidirConnection", "tuple[ListenPoint, ...]"], None]
"""What an accepting server does with the listen points a connection offers."""


class BidirRequests(RequestHandler):
    """The server half of a :class:`BidirConnection`: its transport's handler.

    Replies to the connection's own calls (and the peer's CloseConnection or
    MessageError) go to the client half; requests are served, after their
    BI_DIR_IIOP context is read on the accepting end."""

    __slots__ = ("client", "_accept", "listen_points")

    # Output the peer does not read never holds our reading: the replies to
    # our own calls come in on it, and holding them could deadlock both ends.
    pauses_reading = False

    def __init__(self, client: BidirConnection, accept: ListenPointsOffered | None, config: Config,
                 adapter: ObjectAdapter, objref_converter: ObjrefConverter,
                 on_closed: Callable[[ServerConnection], None], load: ServerLoad, inbox: ReplyInbox,
                 reference: Callable[[bytes], IOR] | None) -> None:
        super().__init__(config, adapter, objref_converter, on_closed, load, inbox, client, reference=reference)
        self.client = client
        """The connection, as the client half sees it (its transport too)."""
        self._accept = accept
        self.listen_points: tuple[ListenPoint, ...] = ()
        """What the peer offered (accepting end): the addresses whose calls may come this way."""

    @property
    def writer(self) -> RequestWriter:
        """The client half's request writer (its ids: odd on the accepting end)."""
        return self.client.writer

    def message_received(self, message: Message) -> None:
        kind = type(message)
        if kind is Request:
            if self.draining and not self.awaits_replies:
                # Read only for the replies to our calls: not run, and never answered, so the
                # CloseConnection that ends the drain tells the peer to send it again elsewhere.
                # While a call of ours awaits its reply the request runs: the peer's servant
                # answering that call may be waiting for it.
                log.debug("%s request %d from %s not run: the server is closing",
                          message.operation, message.request_id, self.peer)  # type: ignore[union-attr]
                return
            if self._accept is not None and message.service_contexts:  # type: ignore[union-attr]
                self._offered(message)  # type: ignore[arg-type]
            RequestHandler.message_received(self, message)
        elif kind is Reply or kind is LocateReply or kind is CloseConnection or kind is MessageError:
            # CloseConnection: the peer runs none of our pending calls (they may be retried), and
            # answers no more; our own incoming calls still running are dropped as the connection closes.
            self.client.message_received(message)
            if self.draining and self.settled:  # the last reply a closing server waited for
                self.close_idle()
        else:  # LocateRequest, CancelRequest
            RequestHandler.message_received(self, message)

    def _offered(self, req: Request) -> None:
        """Take the listen points of ``req``'s BI_DIR_IIOP context, if it may offer any."""
        try:
            points = listen_points(req.service_contexts)
        except ProtocolError as exc:
            log.warning("ignoring the malformed BI_DIR_IIOP context of %s request %d from %s: %s",
                        req.operation, req.request_id, self.peer, exc.reason)
            return
        if points is None:
            return
        if req.version != GIOP_1_2:
            log.info("ignoring the BI_DIR_IIOP context of a GIOP %d.%d request from %s: bidirectional GIOP "
                     "needs GIOP 1.2", *req.version, self.peer)
            return
        transport = self.transport
        if transport is not None and transport.get_extra_info("ssl_object") is not None \
                and self.peer_certificate is None:
            log.info("ignoring the BI_DIR_IIOP context from %s: over TLS, only a peer with a verified "
                     "certificate may offer its connection for callbacks", self.peer)
            return
        self.core.make_bidirectional()
        self.listen_points = points
        assert self._accept is not None
        self._accept(self.client, points)

    @property
    def awaits_replies(self) -> bool:
        return bool(self.client.pending)

    def drain(self) -> None:
        """As a server connection drains, but reading on: the replies to this end's
        calls come in on it, and the requests still running may be waiting for them."""
        self.draining = True
        if self.settled:
            self.close_idle()

    def closed(self, exc: BaseException | None) -> None:
        self.client.closed(exc)  # our calls fail, and no route leads here any more
        super().closed(exc)  # the peer's queued calls never run


class BidirConnection(ClientConnection):
    """A connection on which both ends may send requests.

    The end that opened it (``offer`` given: the BI_DIR_IIOP context sent
    with its first request) numbers its requests with even ids and serves
    the requests its peer sends from the start.  The end that accepted it
    (``accept`` given) numbers its requests with odd ids and sends none
    until its peer offers the connection: a GIOP 1.2 request with a
    well-formed BI_DIR_IIOP context, over plain TCP or over TLS from a peer
    whose certificate was verified.  ``accept`` then gets the listen
    points.  A malformed context is ignored, logged, and the request runs.

    It is the transport of both halves: its :attr:`handler` is the server
    half (:class:`BidirRequests`), which hands it the replies to its calls.
    """

    def __init__(
        self, config: Config, adapter: ObjectAdapter, objref_converter: ObjrefConverter,
        on_closed: Callable[[ServerConnection], None], load: ServerLoad, inbox: ReplyInbox, *,
        forget: Callable[[ClientConnection], None], endpoint: Endpoint | None = None,
        offer: ServiceContext | None = None, accept: ListenPointsOffered | None = None,
        reference: Callable[[bytes], IOR] | None = None,
    ) -> None:
        if (offer is None) == (accept is None):
            raise ValueError("a bidirectional connection either offers itself (offer) or accepts offers (accept)")
        # Not ClientConnection.__init__: both ends of a bidirectional connection serve requests.
        GIOPProtocol.__init__(self, Role.SERVER, config)
        self.init_calls(forget, endpoint, FIRST_ID_INITIATOR if offer is not None else FIRST_ID_ACCEPTOR, 2)
        self.requests = BidirRequests(self, accept, config, adapter, objref_converter, on_closed, load, inbox,
                                      reference)
        """The server half: this transport's handler."""
        if offer is not None:
            self.offer = offer
            self.core.make_bidirectional()
        else:
            self._cause = _CLIENT_CLOSED
            self.callee = "the client that opened the connection"
            self.caller = "this server"

    def cancel_request(self, request_id: int) -> None:
        super().cancel_request(request_id)
        requests = self.requests
        if requests.draining and requests.settled:  # the call given up was the last one a closing server awaited
            requests.close_idle()

    def close(self) -> None:
        if self.is_open and self._cause is _CLIENT_CLOSED:
            self._cause = _CLOSED_HERE
        super().close()


__all__ = ["BidirConnection", "BidirRequests", "ListenPointsOffered"]
