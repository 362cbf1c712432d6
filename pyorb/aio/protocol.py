"""The asyncio transport shared by server and client connections.

It moves bytes between an asyncio transport and the sans-IO core and nothing
more: parsing is the core's job, meaning is the subclass's.  Writes made
while handling one batch of received data, or within one loop iteration,
are joined into a single ``write`` so that pipelined calls cost one system
call per batch instead of one per message.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, cast

from pyorb.aio.flow import ReadGate
from pyorb.config import Config
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import CLOSED, NEED_DATA, Message

log = logging.getLogger(__name__)


class GIOPProtocol(asyncio.Protocol):
    """Feeds an asyncio transport into a :class:`GIOPConnection`.

    Subclasses implement :meth:`message_received` and :meth:`closed`.
    """

    # Thousands of connections may be open at once: no per-instance dict, and
    # nothing made per connection that is not needed (the close future is made
    # only for a waiter, the peer address stays with the transport).
    __slots__ = ("config", "value_bounds", "core", "transport", "loop", "loop_thread", "_out", "_flush_pending", "_read_timer",
                 "_closing", "_lost", "_closed", "last_activity", "reading")

    def __init__(self, role: Role, config: Config) -> None:
        self.config = config
        self.value_bounds = config.value_bounds()  # checked on received bodies that can nest
        self.core = GIOPConnection(
            role,
            max_message_size=config.max_message_size,
            max_fragment_trains=config.max_fragment_trains,
        )
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self._out: list[bytes] = []
        self._flush_pending = False
        self._read_timer: asyncio.TimerHandle | None = None
        self._closing = False
        self._lost = False  # connection_lost ran
        self._closed: asyncio.Future[None] | None = None  # made by wait_closed
        self.last_activity = self.loop.time()
        self.reading = ReadGate(self)

    @property
    def peer(self) -> Any:
        """The peer's address (for messages), None before the connection is made."""
        return None if self.transport is None else self.transport.get_extra_info("peername")

    # -- subclass hooks ------------------------------------------------------
    def message_received(self, message: Message) -> None:
        raise NotImplementedError

    def closed(self, exc: BaseException | None) -> None:
        """The connection is gone (peer EOF, error or local close)."""

    # -- asyncio.Protocol ----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.last_activity = self.loop.time()
        self.core.receive_data(data)
        self._process()

    def _process(self) -> None:
        """Handle the complete messages the core holds, unless reading is held."""
        core = self.core
        gate = self.reading
        self._flush_pending = True  # replies made while handling this batch go out together
        progressed = False
        try:
            while not gate.closed:
                event = core.next_event()
                if event is NEED_DATA or event is CLOSED:
                    break
                progressed = True
                self.message_received(event)  # type: ignore[arg-type]
        except ProtocolError as exc:
            self._protocol_error(exc)
        finally:
            self._flush()
        if progressed:
            # The timeout bounds one message: a busy peer whose reads end
            # mid-message is not stalled as long as its messages complete.
            self._cancel_read_timer()
        if core.in_progress or self._read_timer is not None:
            self._watch_partial()

    # Messages already received stay in the core while reading is held.
    def _pause_reading(self) -> None:
        self._cancel_read_timer()  # a stall we cause is not the peer's
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.transport is not None and not self._closing:
            self.transport.resume_reading()
            self.loop.call_soon(self._process)

    def eof_received(self) -> bool | None:
        try:
            self.core.receive_data(b"")
            while self.core.next_event() not in (NEED_DATA, CLOSED):
                pass
        except ProtocolError as exc:
            log.info("connection %s closed mid-message: %s", self.peer, exc.reason)
        return None  # let asyncio close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._cancel_read_timer()
        self._out.clear()
        self._lost = True
        try:
            self.closed(exc)
        finally:
            if self._closed is not None and not self._closed.done():
                self._closed.set_result(None)

    # -- output --------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return not self._closing and self.transport is not None

    def send(self, data: bytes) -> bool:
        """Queue ``data`` for writing (loop thread only). False if closed."""
        if self._closing:
            return False
        self._out.append(data)
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush)
        return True

    def send_threadsafe(self, data: bytes) -> None:
        if threading.get_ident() == self.loop_thread:
            self.send(data)
        else:
            self.loop.call_soon_threadsafe(self.send, data)

    def _flush(self) -> None:
        self._flush_pending = False
        out = self._out
        if not out or self.transport is None:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()  # the same list again: no new one per flush
        self.transport.write(data)

    def close(self) -> None:
        """Flush what is queued, then close the transport."""
        if self._closing or self.transport is None:
            return
        self._flush()
        self._closing = True
        self.transport.close()

    async def wait_closed(self) -> None:
        """Return once the transport is gone (``connection_lost`` ran)."""
        if self._lost:
            return
        if self._closed is None:
            self._closed = self.loop.create_future()
        await asyncio.shield(self._closed)

    def abort(self) -> None:
        if self.transport is not None:
            self._closing = True
            self.transport.abort()

    # -- errors and timeouts -------------------------------------------------
    def _protocol_error(self, exc: ProtocolError) -> None:
        log.warning("protocol error from %s: %s; closing the connection", self.peer, exc.reason)
        if exc.send_message_error and not self._closing:
            self._out.append(self.core.message_error_bytes())
        self._flush()
        self.close()

    def _watch_partial(self) -> None:
        # A peer that sends half a message (or a fragment train with no end)
        # must not hold the connection and its buffer forever.
        if self.core.in_progress and not self._closing and not self.reading.closed:
            if self._read_timer is None:
                self._read_timer = self.loop.call_later(self.config.read_timeout, self._read_timed_out)
        else:
            self._cancel_read_timer()

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        self._protocol_error(ProtocolError(f"incomplete message stalled for {self.config.read_timeout} s"))
