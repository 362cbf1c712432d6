"""One client connection as the server sees it: its transport, lifecycle, flow and load.

A :class:`ServerConnection` is the :class:`~pyorb.aio.protocol.Handler` of
its transport (:class:`~pyorb.aio.protocol.GIOPProtocol`, :attr:`wire`),
which owns the bytes, the batching and the timers.  Composed, not derived,
as uvicorn's ``H11Protocol`` and its ``RequestResponseCycle``: the transport
hands it each message and tells it of the connection's life (made, output
paused and resumed, closed); it keeps what the server counts per connection
and what its calls' replies need (the :class:`~pyorb.server.call.reply.Channel`).
What a request means (lookup, interceptors, inline answers, ``Call``\\ s) is
its subclass's, :class:`pyorb.server.requests.RequestHandler`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from pyorb.aio.protocol import Handler
from pyorb.giop.connection import GIOPConnection
from pyorb.giop.messages import GIOP_1_0, CloseConnection

if TYPE_CHECKING:
    from pyorb.aio.flow import ReadGate
    from pyorb.config import Config
    from pyorb.marshal.layout import Bounds
    from pyorb.server.adapter import ObjectAdapter
    from pyorb.server.call.reply import ReplyInbox
    from pyorb.server.load import ServerLoad

log = logging.getLogger(__name__)

PEER_NOT_READING = "peer not reading"
DRAINING = "draining"


class Wire(Protocol):
    """What a :class:`ServerConnection` uses of its transport (a :class:`~pyorb.aio.protocol.GIOPProtocol` is one).

    The request semantics above it use only ``send``, ``close``, the core
    that encodes their replies, the loop and who the peer is; the rest is
    the connection's life: reading held and released, output measured,
    closing in its three ways, and the calls' replies from threads."""

    handler: Handler
    core: GIOPConnection
    loop: asyncio.AbstractEventLoop
    loop_thread: int
    value_bounds: Bounds
    transport: asyncio.Transport | None
    is_open: bool
    last_activity: float
    reassembly_bytes: int
    reading: ReadGate

    @property
    def peer(self) -> Any: ...

    def send(self, data: bytes) -> bool: ...

    def write_from_thread(self, data: bytes) -> bool: ...

    def hold_output(self) -> None: ...

    def flush(self) -> None: ...

    def buffered_output(self) -> int: ...

    def close(self) -> None: ...

    def close_after_peer(self) -> None: ...

    def abort(self) -> None: ...

    def drop(self, reason: str) -> None: ...

    async def wait_closed(self) -> None: ...


class ServerConnection:
    """The transport's handler for one client connection: what the server keeps of it.

    ``wire``: the connection's transport, whose handler this becomes."""

    # Thousands of connections may be open at once: no per-instance dict.
    __slots__ = ("wire", "config", "core", "loop", "loop_thread", "value_bounds", "max_message_size", "send",
                 "write_from_thread", "hold_output", "flush", "adapter", "load", "inbox", "_on_closed", "in_flight",
                 "draining", "_refuse", "_version", "unsent", "parked", "write_paused")

    pauses_reading: ClassVar[bool] = True
    """Output the peer does not read holds its reading, so that it cannot make us run requests and queue
    replies without bound.  (Only a server does this: a client that stopped reading replies while its
    requests are stuck could deadlock with its server.)"""

    def __init__(self, config: Config, adapter: ObjectAdapter, on_closed: Callable[[Any], None], load: ServerLoad,
                 inbox: ReplyInbox, wire: Wire, refuse: bool = False) -> None:
        wire.handler = self
        self.wire = wire
        self.config = config
        # The transport's, read per request and per reply: held here, so that
        # the per-call path costs what it did when this was the transport.
        self.core = wire.core
        self.loop = wire.loop
        self.loop_thread = wire.loop_thread
        self.value_bounds = wire.value_bounds
        self.send = wire.send
        self.write_from_thread = wire.write_from_thread
        self.hold_output = wire.hold_output
        self.flush = wire.flush
        self.max_message_size = config.max_message_size
        self.adapter = adapter
        self.load = load
        self.inbox = inbox
        self._on_closed = on_closed
        self.in_flight = 0  # counted by load, on the loop thread
        self.draining = False
        self._refuse = refuse
        self._version = GIOP_1_0  # of the last request: CloseConnection speaks it
        self.unsent = 0  # reply bytes made on threads, not yet queued here (ReplyInbox keeps it)
        self.parked = False  # a strategy holds our queued calls until we are not congested
        self.write_paused = False
        """The client does not read its replies (the transport's, as last told)."""

    # -- the transport, as the server uses it ------------------------------------
    @property
    def transport(self) -> asyncio.Transport | None:
        """The asyncio transport, None before the connection is made."""
        return self.wire.transport

    @property
    def peer(self) -> Any:
        """The client's address (for messages), None before the connection is made."""
        return self.wire.peer

    @property
    def peer_certificate(self) -> dict[str, Any] | None:
        """The client's verified certificate (``ssl.SSLSocket.getpeercert()`` form)
        on a TLS connection that asked for one, else None."""
        transport = self.wire.transport
        return None if transport is None else transport.get_extra_info("peercert") or None

    @property
    def is_open(self) -> bool:
        """Made and not closing."""
        return self.wire.is_open

    @property
    def last_activity(self) -> float:
        """The loop's time when the client last sent something."""
        return self.wire.last_activity

    @property
    def reassembly_bytes(self) -> int:
        """Bytes held in the client's unfinished fragment trains."""
        return self.wire.reassembly_bytes

    def hold_reading(self, reason: str) -> None:
        """Read no more of the client's messages while ``reason`` holds."""
        self.wire.reading.hold(reason)

    def release_reading(self, reason: str) -> None:
        self.wire.reading.release(reason)

    def buffered_output(self) -> int:
        """Bytes of replies written but not yet taken by the client's socket."""
        return self.wire.buffered_output()

    def close(self) -> None:
        """Flush what is queued, then close (see :meth:`GIOPProtocol.close`)."""
        self.wire.close()

    def close_after_peer(self) -> None:
        """An orderly release (see :meth:`GIOPProtocol.close_after_peer`)."""
        self.wire.close_after_peer()

    def abort(self) -> None:
        """Close at once, dropping unsent output."""
        self.wire.abort()

    def drop(self, reason: str) -> None:
        """Abort for ``reason`` and release what the connection holds in reassembly now."""
        self.wire.drop(reason)

    async def wait_closed(self) -> None:
        """Return once the transport is gone."""
        await self.wire.wait_closed()

    # -- the transport's Handler hooks -------------------------------------------
    def message_received(self, message: Any) -> None:
        raise NotImplementedError

    def connected(self) -> None:
        self.wire.transport.set_write_buffer_limits(high=self.config.write_buffer_limit)  # type: ignore[union-attr]
        if self._refuse:
            self.load.refused(self.peer)
            self.close_idle(linger=False)
        elif self.draining:  # made while its server closes
            self.close_idle()

    def writing_paused(self) -> None:
        self.write_paused = True
        if self.pauses_reading:
            self.hold_reading(PEER_NOT_READING)
        self.load.output_paused(self)

    def writing_resumed(self) -> None:
        self.write_paused = False
        self.load.output_resumed(self)
        self.unpark()
        if self.pauses_reading:
            self.release_reading(PEER_NOT_READING)

    def output_held(self) -> None:
        self.load.output_grew()

    def reassembly_changed(self, delta: int) -> None:
        self.load.reassembly_changed(self, delta)

    def closed(self, exc: BaseException | None) -> None:
        self.load.forget(self)
        self._on_closed(self)

    # -- flow control ----------------------------------------------------------
    @property
    def congested(self) -> bool:
        return self.write_paused or self.unsent >= self.config.write_buffer_limit

    def unpark(self) -> None:
        if self.parked and not self.congested:
            self.parked = False
            self.adapter.registry.connection_resumed(self)

    # -- lifecycle -----------------------------------------------------------
    def request_finished(self, request_id: int) -> None:
        self.load.finished(self)

    @property
    def awaits_replies(self) -> bool:
        """True while calls this end sent on the connection await their replies
        (a bidirectional connection's callbacks): its peer, serving them, may
        send nothing for a long time, and the replies must still be read."""
        return False

    @property
    def settled(self) -> bool:
        """Nothing runs for the peer and nothing awaits its reply: a draining connection may close."""
        return self.in_flight == 0 and not self.awaits_replies

    def drain(self) -> None:
        """Take no new requests; close with CloseConnection once the last is answered."""
        self.draining = True
        self.hold_reading(DRAINING)
        if self.settled:
            self.close_idle()

    def close_idle(self, linger: bool = True) -> None:
        """Tell the client that no request is lost (CloseConnection), then close in
        order (:meth:`close_after_peer`); at once if not ``linger``: a connection
        over the limit gives its descriptor back without waiting for its client."""
        if self.wire.is_open:
            self.send(self.core.send(CloseConnection(self._version)))
            if linger:
                self.close_after_peer()
            else:
                self.close()
