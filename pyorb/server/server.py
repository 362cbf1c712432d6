"""The asyncio server endpoint: listen, accept, serve the adapter's objects."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Any, Callable

from pyorb.config import DEFAULT_CONFIG, Config
from pyorb.giop import ior as iors
from pyorb.server.adapter import ObjectAdapter
from pyorb.server.connection import ServerConnection
from pyorb.server.dispatch import EventLoopStrategy, Strategy

log = logging.getLogger(__name__)


class Server:
    """A GIOP/IIOP server on one TCP endpoint.

    ``async with Server(port=0) as server:`` starts it; ``server.activate``
    serves a servant and ``server.ior(key)`` / ``server.corbaloc(key)`` name it.
    Object references that arrive as arguments of coroutine and AMH servants
    pass through ``objref_converter`` (``Client.from_objref`` turns them into
    pyorb proxies); synchronous servants get omniORB references unchanged.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        config: Config = DEFAULT_CONFIG,
        strategy: Strategy | None = None,
        objref_converter: Callable[[Any], Any] | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {port}")
        self.config = config
        self.adapter = ObjectAdapter()
        self._host = host
        self._port = port
        self._strategy = strategy
        self._convert = objref_converter or (lambda ref: ref)
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[ServerConnection] = set()

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("server already started")
        loop = asyncio.get_running_loop()
        if self._strategy is None:
            self._strategy = EventLoopStrategy()
        self._server = await loop.create_server(self._make_connection, self._host, self._port)
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("pyorb server listening on %s:%d", self._host, self._port)

    def _make_connection(self) -> ServerConnection:
        assert self._strategy is not None
        conn = ServerConnection(self.config, self.adapter, self._strategy, self._convert, self.connections.discard)
        self.connections.add(conn)
        return conn

    async def close(self) -> None:
        """Stop accepting and close every connection."""
        if self._server is None:
            return
        self._server.close()
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        await asyncio.gather(*(c.wait_closed() for c in conns))
        await self._server.wait_closed()
        self._server = None
        if self._strategy is not None:
            self._strategy.close()

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

    def activate(self, servant: object, key: bytes | str | None = None) -> bytes:
        """Serve ``servant`` under ``key``; returns the object key."""
        return self.adapter.activate(servant, key)

    def deactivate(self, key: bytes | str) -> None:
        self.adapter.deactivate(key)

    def _key(self, key: bytes | str) -> bytes:
        return key.encode() if isinstance(key, str) else key

    def ior(self, key: bytes | str) -> str:
        """The stringified IOR of the object under ``key`` (GIOP 1.2, UTF-8 code sets)."""
        k = self._key(key)
        return iors.build_ior(self.adapter.type_id(k), self._host, self._port, k).to_string()

    def corbaloc(self, key: bytes | str) -> str:
        return iors.to_corbaloc(self._host, self._port, self._key(key))
