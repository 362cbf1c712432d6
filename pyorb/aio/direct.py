"""A dispatcher thread's write of its reply straight to the socket.

omniORB's and TAO's pooled threads write their replies themselves; so may
pyorb's (``Config.direct_replies``): the reply goes out without waiting for
the event loop, which learns of it afterwards only to settle the request.
A :class:`DirectWriter` is that way out for one connection, made by the
loop the first time a thread asks (:func:`open_direct`), so that a
connection no thread answers keeps one descriptor and takes no lock.

Its rules: it writes on a duplicate of the socket's descriptor, only under
one lock that the loop's own writes take from then on
(:meth:`DirectWriter.write_through`), and only while the transport buffers
nothing, so messages never interleave (replies may overtake each other,
which GIOP allows: they carry their request ids); the unwritten end of a
partial write goes out through the loop before anything else; never on
TLS, never once the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from typing import Any, Protocol

from pyorb import _accelerator

log = logging.getLogger(__name__)

_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # a reset peer is an error, never SIGPIPE to the process
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def _send_now(sock: socket.socket, data: bytes | bytearray | memoryview) -> int:
    """Bytes of ``data`` the socket took now (0 or more), or -1 if it took none: full, reset or closed.

    Never waits, whatever the socket's mode.  The compiled twin
    (``pyorb.aio._csend``) does the same without letting go of the
    interpreter lock, which a send that cannot block does not need."""
    try:
        return sock.send(data, _NOSIGNAL | _DONTWAIT)
    except OSError:
        return -1


class Owner(Protocol):
    """The connection a :class:`DirectWriter` writes for."""

    is_open: bool
    """Anything may still be written (it turns False just before the connection closes its writer)."""


class DirectWriter:
    """The way from dispatcher threads to one connection's socket (see the module's rules)."""

    __slots__ = ("lock", "sock", "rest", "_transport", "_loop", "_owner")

    def __init__(self, sock: socket.socket, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 owner: Owner) -> None:
        self.lock = threading.Lock()
        """Taken by every write to the connection, the loop's included, once this writer exists."""
        self.sock: socket.socket | None = sock
        """Our duplicate of the socket, written and closed only under :attr:`lock`."""
        self.rest: bytes | None = None
        """The unwritten end of a thread's partial write: it goes out before anything else."""
        self._transport = transport
        self._loop = loop
        self._owner = owner

    def write(self, data: bytes) -> bool:
        """From a dispatcher thread: write ``data`` (whole GIOP messages) now if the output is idle.

        True: the bytes are the connection's (written, or the unwritten end
        queued to go out before anything else); False: nothing was written,
        and the caller hands ``data`` to the loop."""
        with self.lock:
            sock = self.sock
            if sock is None or self.rest is not None or not self._owner.is_open \
                    or self._transport.get_write_buffer_size():
                return False
            written = _send_now(sock, data)
            if written == len(data):
                return True
            if written <= 0:  # full, or reset: the loop's own write or read sees it (and closes)
                return False
            self.rest = data[written:]
        try:
            self._loop.call_soon_threadsafe(self.write_rest)
        except RuntimeError:  # the loop is closed: so is the connection
            pass
        return True

    def write_through(self, data: bytes) -> None:
        """Loop thread: the loop's own write, after the end of a thread's partial write."""
        with self.lock:
            rest = self.rest
            if rest is not None:
                self.rest = None
                data = rest + data
            self._transport.write(data)

    def write_rest(self) -> None:
        """Loop thread: the end of a dispatcher thread's partial write."""
        with self.lock:
            rest, self.rest = self.rest, None
            if rest is not None and self._owner.is_open:
                self._transport.write(rest)

    def close(self, flush: bool) -> None:
        """Loop thread: no more writes from threads; ``flush``: the end of a partial write goes out first."""
        with self.lock:
            sock, self.sock = self.sock, None
            rest, self.rest = self.rest, None
            if rest is not None and flush:
                self._transport.write(rest)
        if sock is not None:
            sock.close()  # only ours: the transport's socket stays open until it closes it

    def pending(self) -> int:
        """Bytes of a partial write not yet handed to the transport."""
        rest = self.rest
        return 0 if rest is None else len(rest)


def open_direct(transport: asyncio.Transport, loop: asyncio.AbstractEventLoop, owner: Owner,
                peer: Any) -> DirectWriter | None:
    """Loop thread: a :class:`DirectWriter` for ``transport``, or None where threads may not write
    (TLS, no socket) or cannot (out of descriptors: the loop writes everything, and serving goes on)."""
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None \
            or transport.get_extra_info("ssl_object") is not None:
        return None
    try:
        # Our own descriptor: the transport may close its own at any
        # time, and the number could then name another connection.
        fd = os.dup(sock.fileno())
        try:
            wsock = socket.socket(fileno=fd)
        except BaseException:
            os.close(fd)
            raise
        try:
            wsock.setblocking(False)  # as the transport's already is: never waits, whatever the default timeout
        except BaseException:
            wsock.close()
            raise
    except OSError as exc:
        log.debug("connection %s: replies stay on the loop thread: %s", peer, exc)
        return None
    return DirectWriter(wsock, transport, loop, owner)


# With the compiled accelerator, the C twin takes its place: once per reply a dispatcher thread writes.
_accelerator.twin(__name__, "_send_now", "pyorb.aio._csend")
