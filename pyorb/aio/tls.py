"""Server-side TLS endpoints: accept, handshake, then hand the connection to the protocol.

asyncio's ``create_server(ssl=...)`` handshakes out of sight: a failed
handshake is logged only in debug mode and the application never learns of
it.  Here each accepted socket is upgraded with ``connect_accepted_socket``,
which raises when the handshake fails, so each refusal (a plain-text client
on a TLS port, an untrusted or expired certificate, a handshake that never
finishes) gets one clear log line and is counted, handshakes in progress
count against the server's connection limit, and the same code runs on
asyncio's loop and on uvloop.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from typing import Any, Callable

log = logging.getLogger(__name__)

ACCEPT_PAUSE = 0.1
"""Seconds the accept loop rests after the process ran out of descriptors."""


def handshake_failure(exc: BaseException) -> str:
    """Why a server-side handshake failed, in one line for the log."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate not accepted: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "RECORD_LAYER_FAILURE", "UNEXPECTED_RECORD",
                      "UNKNOWN_PROTOCOL"):
            return f"not TLS ({reason}): a plain client on a TLS port?"
        if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_REQUIRED"):
            return "the client presented no certificate, and this endpoint requires one"
        return reason
    if isinstance(exc, (asyncio.TimeoutError, ConnectionAbortedError)):
        return "no complete handshake in time"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, EOFError)):
        return "the client left during the handshake (does it trust this server's certificate?)"
    return str(exc) or type(exc).__name__


def listening_sockets(host: str, port: int, *, backlog: int, reuse_port: bool = False) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for ``host``:``port`` (every
    address family of a wildcard or a name), as ``loop.create_server`` makes them."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    made: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            made.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the v4 socket takes v4
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in made:
            sock.close()
        raise
    return made


class TLSListener:
    """Accepts on listening sockets and upgrades each connection to TLS.

    ``make()`` gives the protocol for a new connection, or None to refuse it
    (the socket is closed unanswered: no GIOP in clear on a TLS port).
    ``done(protocol)`` runs after each handshake, ``protocol`` None if it
    failed.  Each handshake holds asyncio's bounded TLS buffers for at most
    ``timeout`` seconds.
    """

    def __init__(
        self,
        sockets: list[socket.socket],
        context: ssl.SSLContext,
        timeout: float,
        make: Callable[[], asyncio.Protocol | None],
        done: Callable[[asyncio.Protocol | None], None],
    ) -> None:
        self.sockets = sockets
        self._context = context
        self._timeout = timeout
        self._make = make
        self._done = done
        self.handshakes: set[asyncio.Task[None]] = set()
        self._acceptors: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._acceptors = [loop.create_task(self._accept(sock)) for sock in self.sockets]

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("cannot accept TLS connections: %s", exc)
                    await asyncio.sleep(ACCEPT_PAUSE)
                    continue
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EAGAIN):
                    continue
                raise
            protocol = self._make()
            if protocol is None:
                sock.close()
                continue
            task = loop.create_task(self._handshake(sock, peer, protocol))
            self.handshakes.add(task)
            task.add_done_callback(self.handshakes.discard)

    async def _handshake(self, sock: socket.socket, peer: Any, protocol: asyncio.Protocol) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: protocol, sock, ssl=self._context, ssl_handshake_timeout=self._timeout)
        except asyncio.CancelledError:  # the server is closing
            sock.close()
            raise
        except (OSError, asyncio.TimeoutError, ConnectionError, ValueError, RuntimeError) as exc:
            log.warning("TLS handshake with %s refused: %s", shown(peer), handshake_failure(exc))
            sock.close()
            self._done(None)
            return
        self._done(protocol)

    def close(self) -> None:
        """Stop accepting and abandon the handshakes in progress."""
        for task in self._acceptors + list(self.handshakes):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        pending = self._acceptors + list(self.handshakes)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def shown(peer: Any) -> str:
    """A peer address for a log line: ``host:port`` or ``[v6]:port``."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)
