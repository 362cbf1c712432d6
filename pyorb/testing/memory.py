"""A client and a server joined in memory: the real protocol code on both sides, no sockets.

:func:`memory_pair` starts a :class:`pyorb.Server` without listening and
gives a :class:`pyorb.Client` whose connections to it are pairs of
:class:`MemoryTransport`: what one side writes, the other's protocol
receives on a later turn of the same event loop, with asyncio's transport
semantics (reading paused and resumed, writing paused past the high-water
mark, half-close, close and abort).  Everything above the transport (the
GIOP core, the client's invocations, the server's dispatch and strategies)
is the code that runs over TCP.  Dispatcher threads do not write replies
themselves here (there is no socket to write to): the loop writes them.
"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from pyorb.client.client import Client
from pyorb.config import DEFAULT_CONFIG, Config
from pyorb.server.server import Server

__all__ = ["MemoryTransport", "memory_pair", "transport_pair"]

_names = itertools.count(1)


class MemoryTransport(asyncio.Transport):
    """One end of an in-memory connection (made in pairs by :func:`transport_pair`).

    Bytes written go to the peer's queue and reach its protocol's
    ``data_received`` on a later loop turn, unless it paused reading; what
    the peer has not taken yet is this end's write buffer.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, name: tuple[str, int]) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._extra: dict[str, Any] = {"sockname": name, "peername": None, "socket": None}
        self.peer: MemoryTransport | None = None
        self._queue: list[bytes] = []  # received, not yet given to our protocol
        self._eof = False  # the peer ended its side: EOF follows the queue
        self._scheduled = False
        self._reading = True
        self._closing = False
        self._lost = False
        self._high, self._low = 64 * 1024, 16 * 1024
        self._writing_paused = False

    # -- asyncio.BaseTransport ---------------------------------------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Our side ends once the peer has what we wrote; our protocol's ``connection_lost`` follows."""
        if self._closing:
            return
        self._closing = True
        if self.peer is not None:
            self.peer._end_of_input()
        self._loop.call_soon(self._lose, None)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol  # type: ignore[assignment]

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    # -- asyncio.ReadTransport -----------------------------------------------------
    def is_reading(self) -> bool:
        return self._reading and not self._closing

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        if not self._reading:
            self._reading = True
            self._schedule()

    # -- asyncio.WriteTransport ----------------------------------------------------
    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = 64 * 1024 if high is None else high
        self._low = self._high // 4 if low is None else low

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def get_write_buffer_size(self) -> int:
        peer = self.peer
        return 0 if peer is None or peer._lost else sum(map(len, peer._queue))

    def write(self, data: bytes | bytearray | memoryview) -> None:
        peer = self.peer
        if self._closing or not data or peer is None or peer._lost:
            return  # as a socket's write after close: dropped
        peer._queue.append(bytes(data))
        peer._schedule()
        if not self._writing_paused and self.get_write_buffer_size() > self._high:
            self._writing_paused = True
            self._protocol.pause_writing()

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if self.peer is not None:
            self.peer._end_of_input()

    def abort(self) -> None:
        """Both ends go at once, unread bytes dropped: the peer sees a reset."""
        if self._lost:
            return
        self._closing = True
        self._queue.clear()
        peer = self.peer
        if peer is not None and not peer._closing:
            peer._closing = True
            peer._queue.clear()
            self._loop.call_soon(peer._lose, ConnectionResetError("the in-memory peer aborted the connection"))
        self._loop.call_soon(self._lose, None)

    # -- delivery ------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._scheduled and not self._lost:
            self._scheduled = True
            self._loop.call_soon(self._pump)

    def _end_of_input(self) -> None:
        self._eof = True
        self._schedule()

    def _pump(self) -> None:
        self._scheduled = False
        while self._queue and self._reading and not self._lost:
            self._protocol.data_received(self._queue.pop(0))
        if self.peer is not None:
            self.peer._drained()
        if self._eof and not self._queue and self._reading and not self._lost and not self._closing:
            self._eof = False
            if not self._protocol.eof_received():
                self.close()

    def _drained(self) -> None:
        """The peer took bytes we wrote: writing may resume."""
        if self._writing_paused and self.get_write_buffer_size() <= self._low and not self._lost:
            self._writing_paused = False
            self._protocol.resume_writing()

    def _lose(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._closing = True
        self._queue.clear()
        self._protocol.connection_lost(exc)


def transport_pair(loop: asyncio.AbstractEventLoop, a: asyncio.Protocol,
                   b: asyncio.Protocol) -> tuple[MemoryTransport, MemoryTransport]:
    """Two joined transports for protocols ``a`` and ``b`` (``connection_made`` not yet called)."""
    n = next(_names)
    ta, tb = MemoryTransport(loop, a, ("memory-client", n)), MemoryTransport(loop, b, ("memory-server", n))
    ta.peer, tb.peer = tb, ta
    ta._extra["peername"], tb._extra["peername"] = tb._extra["sockname"], ta._extra["sockname"]
    return ta, tb


def _connector(server: Server) -> Callable[..., Any]:
    address = (server.host, server.port)

    async def connect(factory: Callable[[], asyncio.Protocol], host: str, port: int,
                      **options: Any) -> tuple[asyncio.BaseTransport, asyncio.Protocol]:
        if (host, port) != address or options.get("ssl") is not None:
            raise ConnectionRefusedError(
                f"memory_pair's client reaches only its server at {address[0]}:{address[1]} (no TLS), "
                f"not {host}:{port}{' over TLS' if options.get('ssl') is not None else ''}")
        client_side = factory()
        server_side = server.new_connection()
        ours, theirs = transport_pair(asyncio.get_running_loop(), client_side, server_side)
        server_side.connection_made(theirs)
        client_side.connection_made(ours)
        return ours, client_side

    return connect


@asynccontextmanager
async def memory_pair(server: Server, config: Config = DEFAULT_CONFIG, **client_options: Any) -> AsyncIterator[Client]:
    """Start ``server`` without listening and yield a Client joined to it in memory.

    ``async with memory_pair(pyorb.Server()) as client:`` then
    ``client.resolve(server.ior(key), Iface)`` calls the servant through
    the real client and server code.  The server (which must not be started
    yet) and the client are closed on the way out.  ``config`` and
    ``client_options`` go to the Client.
    """
    await server.start(listen=False)
    try:
        async with Client(config, connect=_connector(server), **client_options) as client:
            yield client
    finally:
        await server.close()
