"""The asyncio transport shared by server and client connections.

It moves bytes between an asyncio transport and the sans-IO core and nothing
more: parsing is the core's job, meaning is its :class:`Handler`'s (a
server's request handler, or the connection itself where a subclass
implements the hooks, as the client's does).  Writes made
while handling one batch of received data, or within one loop iteration,
are joined into a single ``write`` so that pipelined calls cost one system
call per batch instead of one per message.

Fairness and memory are bounded here, where the bytes are: one connection
handles at most :data:`BATCH` messages per event-loop turn (the rest wait
for the other connections' turns, and reading pauses so that they wait in
the kernel's buffer, not ours); output buffered for a peer that does not
read pauses its reading and, after ``write_timeout``, aborts it; every
fragment train is timed from its first fragment.

A dispatcher thread may write its reply to the socket itself
(:meth:`GIOPProtocol.write_from_thread`) through the connection's
:class:`~pyorb.aio.direct.DirectWriter`, whose module gives the rules that
make this safe; the loop's own writes take its lock once it exists.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import types
from typing import Any, Protocol, cast

from pyorb import _accelerator
from pyorb.aio.direct import DirectWriter, open_direct
from pyorb.aio.flow import ReadGate
from pyorb.config import Config
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import CLOSED, NEED_DATA, Message

log = logging.getLogger(__name__)


BATCH = 64
"""Messages of one connection handled per event-loop turn before the other connections get theirs."""


LINGER = 2.0
"""Seconds an orderly close waits for the peer to close its side before closing anyway."""


class Handler(Protocol):
    """What a :class:`GIOPProtocol` tells the one that gives its messages meaning (loop thread)."""

    def message_received(self, message: Message) -> None:
        """A complete message arrived."""

    def connected(self) -> None:
        """The transport is made (:attr:`GIOPProtocol.transport` is set)."""

    def closed(self, exc: BaseException | None) -> None:
        """The connection is gone (peer EOF, error or local close)."""

    def writing_paused(self) -> None:
        """The peer does not read: output beyond ``write_buffer_limit`` waits (:attr:`GIOPProtocol.write_paused`)."""

    def writing_resumed(self) -> None:
        """The peer reads again; what waited is written."""

    def output_held(self) -> None:
        """More output was queued while :attr:`GIOPProtocol.write_paused`."""

    def reassembly_changed(self, delta: int) -> None:
        """Bytes held in unfinished fragment trains changed by ``delta`` (see :attr:`GIOPProtocol.reassembly_bytes`)."""


def own_code(function: Any) -> Any:
    """``function`` with a code object of its own, for a subclass's per-message methods.

    CPython (3.11 on) specialises each code object's attribute reads for the
    class it meets; where a server's transport and a client's connection run
    in one process (a middle tier), methods they share meet two classes and
    every read takes the generic lookup.  A subclass that binds its own copy
    of such a method (the same code, copied) keeps both specialised.
    """
    if not isinstance(function, types.FunctionType):  # a compiled twin: no interpreter caches to keep apart
        return function
    return types.FunctionType(function.__code__.replace(), function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)


class GIOPProtocol(asyncio.Protocol):
    """Feeds an asyncio transport into a :class:`GIOPConnection`, and its messages to a :class:`Handler`.

    The handler is given (a server's request handler), or the connection
    itself: then a subclass implements the hooks below
    (:meth:`message_received` and :meth:`closed` at least).
    """

    # Thousands of connections may be open at once: no per-instance dict, and
    # nothing made per connection that is not needed (the close future is made
    # only for a waiter, the peer address stays with the transport).
    __slots__ = ("config", "value_bounds", "core", "transport", "loop", "loop_thread", "_out", "_out_bytes",
                 "_flush_pending", "_wrote", "_read_timer", "_train_timer", "_write_timer", "_backlog", "write_paused",
                 "reassembly_bytes", "_closing", "is_open", "_lost", "_closed", "last_activity", "reading",
                 "direct_writer", "_direct", "handler")

    def __init__(self, role: Role, config: Config, handler: Handler | None = None) -> None:
        self.handler: Handler = self if handler is None else handler
        self.config = config
        self.value_bounds = config.value_bounds()  # checked on received bodies that can nest
        self.loop = asyncio.get_running_loop()
        self.core = GIOPConnection(
            role,
            max_message_size=config.max_message_size,
            max_fragment_trains=config.max_fragment_trains,
            clock=self.loop.time,
            max_fragment_size=config.max_fragment_size,
        )
        self.transport: asyncio.Transport | None = None
        self.loop_thread = threading.get_ident()
        self._out: list[bytes] = []
        self._out_bytes = 0  # in _out
        self._flush_pending = False
        self._wrote = False  # a message went out at once since the last read or flush (see send)
        self._read_timer: asyncio.TimerHandle | None = None  # a partly received message
        self._train_timer: asyncio.TimerHandle | None = None  # the oldest unfinished fragment train
        self._write_timer: asyncio.TimerHandle | None = None  # output the peer does not read
        self._backlog = False  # a batch ended with messages left: the next turn is scheduled
        self.write_paused = False
        """The transport's buffer is past ``write_buffer_limit``: the peer is not reading."""
        self.reassembly_bytes = 0  # the core's, as last reported to reassembly_changed
        self._closing = False
        self.is_open = False
        """Made and not closing: calls may be sent.  An attribute, not a property: every call reads it."""
        self._lost = False  # connection_lost ran
        self._closed: asyncio.Future[None] | None = None  # made by wait_closed
        self.last_activity = self.loop.time()
        self.reading = ReadGate(self)
        # Writes from dispatcher threads (write_from_thread): off until a thread first asks, so a
        # connection no thread writes to keeps one descriptor and takes no lock.
        self._direct: bool | None = config.direct_replies  # False: never; True: not yet asked; None: asked
        self.direct_writer: DirectWriter | None = None
        """Set once, on the loop thread, when threads may write: every write goes through it from then on."""

    @property
    def peer(self) -> Any:
        """The peer's address (for messages), None before the connection is made."""
        return None if self.transport is None else self.transport.get_extra_info("peername")

    # -- subclass hooks (the Handler's, when the connection is its own) ---------
    def message_received(self, message: Message) -> None:
        raise NotImplementedError

    def connected(self) -> None:
        """The transport is made."""

    def closed(self, exc: BaseException | None) -> None:
        """The connection is gone (peer EOF, error or local close)."""

    def writing_paused(self) -> None:
        """The peer does not read (:attr:`write_paused`)."""

    def writing_resumed(self) -> None:
        """The peer reads again."""

    def reassembly_changed(self, delta: int) -> None:
        """Bytes held in unfinished fragment trains changed by ``delta`` (see :attr:`reassembly_bytes`)."""

    def output_held(self) -> None:
        """More output was queued while :attr:`write_paused`."""

    # -- asyncio.Protocol ----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self.is_open = not self._closing
        self.handler.connected()

    def data_received(self, data: bytes) -> None:
        if self._closing:  # lingering after an orderly close: read only to let the peer finish
            return
        self.last_activity = self.loop.time()
        self.core.receive_data(data)
        self._process()

    def _process(self) -> None:
        """Handle up to :data:`BATCH` of the complete messages the core holds, unless reading is held."""
        core = self.core
        gate = self.reading
        receive = self.handler.message_received
        self._flush_pending = True  # replies made while handling this batch go out together
        handled = 0
        try:
            while not gate.closed:
                if handled == BATCH:
                    self._yield_turn()
                    break
                event = core.next_event()
                if event is NEED_DATA or event is CLOSED:
                    break
                handled += 1
                receive(event)  # type: ignore[arg-type]
        except ProtocolError as exc:
            self._protocol_error(exc)
        finally:
            if self._out:
                self._flush()
            else:  # _flush's own first steps: nothing was sent
                self._flush_pending = self._wrote = False
        if core.reassembly_bytes != self.reassembly_bytes:
            delta = core.reassembly_bytes - self.reassembly_bytes
            self.reassembly_bytes = core.reassembly_bytes
            self.handler.reassembly_changed(delta)
        if handled and self._read_timer is not None:
            # The read timeout bounds one message: a busy peer whose reads
            # end mid-message is not stalled as long as its messages complete.
            self._cancel_read_timer()
        # core.in_progress, without a property call per read: the core empties its
        # buffer when a read's messages are all taken, so a non-empty one (or a
        # train) is all that can need watching; _watch_partial looks precisely.
        if core._buf or core._trains or self._read_timer is not None or self._train_timer is not None:
            self._watch_partial()

    # A connection with more messages than one batch yields to the others:
    # its next batch is a callback queued behind theirs, so connections are
    # served round-robin whatever one of them sends.
    def _yield_turn(self) -> None:
        if not self._backlog:
            self._backlog = True
            if self.transport is not None and not self._closing:
                self.transport.pause_reading()  # the rest waits in the kernel, not in our buffer
            self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._backlog = False
        if self._closing:
            return
        self._process()
        if not self._backlog and not self.reading.closed and self.transport is not None and not self._closing:
            self.transport.resume_reading()

    # Messages already received stay in the core while reading is held.
    def _pause_reading(self) -> None:
        self._cancel_read_timer()  # a stall we cause is not the peer's
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.transport is not None and not self._closing and not self._backlog:  # else the next turn resumes
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
        self.is_open = False
        self._cancel_read_timer()
        for timer in (self._train_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._train_timer = self._write_timer = None
        self._out.clear()
        self._out_bytes = 0
        self._close_direct(flush=False)
        if self.reassembly_bytes:
            delta, self.reassembly_bytes = -self.reassembly_bytes, 0
            self.handler.reassembly_changed(delta)
        self._lost = True
        if self.transport is not None and not self.transport.is_closing():
            # Python 3.10's TLS transport stays "open" after its connection is
            # lost (a peer's alert after the handshake) and warns when collected.
            self.transport.close()
        try:
            self.handler.closed(exc)
        finally:
            if self._closed is not None and not self._closed.done():
                self._closed.set_result(None)

    # -- output --------------------------------------------------------------
    def send(self, data: bytes) -> bool:
        """Write ``data``, or queue it for its batch (loop thread only).  False if closed."""
        if self._closing:
            return False
        if not (self._flush_pending or self._wrote or self._out or self.write_paused) and self.direct_writer is None:
            # Outside a batch, with nothing queued: what _flush would write, written
            # now (no flush is scheduled for it: a caller awaiting one call at a
            # time sends nothing more before the reply).
            transport = self.transport
            if transport is not None and len(data) < self.config.write_buffer_limit:
                self._wrote = True
                transport.write(data)
                return True
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= self.config.write_buffer_limit:
            # Big replies go out (or pause a peer that does not read) now,
            # not after many more are made; a batch in progress still ends
            # with its own flush.
            pending = self._flush_pending
            self._flush()
            self._flush_pending = pending
            return True
        if not self._flush_pending:
            if self._wrote:
                # A second message since the last read: it and what follows
                # it this turn are written together, on the next turn.
                self._flush_pending = True
                self.loop.call_soon(self._flush)
            else:
                # Outside a batch the first message goes now: a flush on the
                # next turn would wait behind every other ready connection's
                # callbacks.  No flush is scheduled for it: a caller awaiting
                # one call at a time sends nothing more before the reply.
                self._flush()
                self._wrote = True
        return True

    def hold_output(self) -> None:
        """Keep what is sent from now on until :meth:`flush`: a batch of
        replies made elsewhere (on threads) goes out in one write, this loop
        turn, instead of through a flush scheduled for the next."""
        self._flush_pending = True

    def _flush(self) -> None:
        self._flush_pending = self._wrote = False
        out = self._out
        if not out or self.transport is None:
            return
        if self.write_paused:
            # Kept here, as the bytes objects they are, until the peer reads:
            # a transport's buffer copies them into one array that grows by
            # doubling (twice the memory, and more while it reallocates).
            self.handler.output_held()
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()  # the same list again: no new one per flush
        self._out_bytes = 0
        direct = self.direct_writer
        if direct is None:
            self.transport.write(data)
        else:
            direct.write_through(data)

    flush = _flush
    """Write what is queued now (the end of :meth:`hold_output`)."""

    # -- writes from dispatcher threads ------------------------------------------
    def write_from_thread(self, data: bytes) -> bool:
        """From a thread other than the loop's: write ``data`` (whole GIOP
        messages) to the socket now if the connection's output is idle.

        True: the bytes are the connection's (written, or the unwritten end
        queued to go out before anything else); False: nothing was written,
        and the caller hands ``data`` to the loop as before.  The first ask
        has the loop open the way (:func:`~pyorb.aio.direct.open_direct`:
        never on TLS or a transport without a plain socket), and there is
        none at all with ``Config.direct_replies`` False.
        """
        direct = self.direct_writer
        if direct is not None:
            return direct.write(data)
        if self._direct:  # first ask: the loop duplicates the descriptor (its own thread's business)
            self._direct = None
            try:
                self.loop.call_soon_threadsafe(self._open_direct)
            except RuntimeError:  # the loop is closed
                pass
        return False

    def _open_direct(self) -> None:
        """Loop thread: let dispatcher threads write (see :meth:`write_from_thread`)."""
        transport = self.transport
        if self.direct_writer is not None or self._closing or transport is None:
            return
        self.direct_writer = open_direct(transport, self.loop, self, self.peer)
        if self.direct_writer is None:
            self._direct = False  # the loop writes everything

    def _close_direct(self, flush: bool) -> None:
        """Loop thread: no more writes from threads; ``flush``: the end of a partial write goes out first."""
        direct = self.direct_writer
        if direct is not None:
            direct.close(flush and self.transport is not None and not self._lost)

    # -- write backpressure ----------------------------------------------------
    # asyncio calls these when the transport's buffer passes the high-water
    # mark (write_buffer_limit) and when it drains below a quarter of it.
    def pause_writing(self) -> None:
        self.write_paused = True
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.config.write_timeout, self._write_timed_out)
        self.handler.writing_paused()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._write_timer is not None and not self._closing:
            self._write_timer.cancel()
            self._write_timer = None
        if not self._flush_pending:
            self._flush()  # what waited while paused
        self.handler.writing_resumed()

    def _write_timed_out(self) -> None:
        self._write_timer = None
        size = self.transport.get_write_buffer_size() if self.transport is not None else 0
        log.warning("aborting connection %s: it has not read %d bytes of output for %.0f s",
                    self.peer, size, self.config.write_timeout)
        self.abort()

    def close(self) -> None:
        """Flush what is queued, then close the transport.

        A peer that does not read would hold the unsent output (and the
        connection) forever: while writing is paused the connection is
        aborted instead, and otherwise it gets ``write_timeout`` to take the
        rest before it is.
        """
        if self._closing or self.transport is None:
            return
        if self.write_paused:
            self.abort()
            return
        self._flush()
        self._close_direct(flush=True)
        self._closing = True
        self.is_open = False
        self.transport.close()
        if self._write_timer is None and self.transport.get_write_buffer_size():
            self._write_timer = self.loop.call_later(self.config.write_timeout, self._write_timed_out)

    def close_after_peer(self, linger: float = LINGER) -> None:
        """Flush, end our side (FIN), and close once the peer ends its side too,
        or after ``linger`` seconds: an orderly release.

        Closing a socket while the peer's bytes are still unread makes the
        kernel reset the connection and discard output it has not sent yet, so
        the last message (a CloseConnection) may never arrive and the peer
        reports a broken connection instead.  What the peer sends meanwhile is
        read and dropped.  Where the transport cannot end one side (TLS), this
        is :meth:`close`.
        """
        transport = self.transport
        if self._closing or transport is None:
            return
        if self.write_paused or not transport.can_write_eof():
            self.close()
            return
        self._flush()
        self._close_direct(flush=True)
        self._closing = True
        self.is_open = False
        self._cancel_read_timer()
        try:
            transport.write_eof()
        except OSError:  # the peer is gone already (ENOTCONN): nothing left to release
            transport.abort()
            return
        transport.resume_reading()
        self.loop.call_later(linger, self._linger_over)

    def _linger_over(self) -> None:
        if not self._lost and self.transport is not None:
            self.transport.close()

    async def wait_closed(self) -> None:
        """Return once the transport is gone (``connection_lost`` ran)."""
        if self._lost:
            return
        if self._closed is None:
            self._closed = self.loop.create_future()
        await asyncio.shield(self._closed)

    def buffered_output(self) -> int:
        """Bytes written but not yet taken by the peer's socket."""
        size = self._out_bytes
        direct = self.direct_writer
        if direct is not None:
            size += direct.pending()
        if self.transport is not None and not self._lost:
            size += self.transport.get_write_buffer_size()
        return size

    def drop(self, reason: str) -> None:
        """Abort the connection for ``reason`` and release what it holds in reassembly now."""
        log.warning("dropping connection %s: %s", self.peer, reason)
        if self.reassembly_bytes:
            delta, self.reassembly_bytes = -self.reassembly_bytes, 0
            self.handler.reassembly_changed(delta)
        self.abort()

    def abort(self) -> None:
        """Close at once, dropping unsent output."""
        if self.transport is not None and not self._lost:
            self._closing = True
            self.is_open = False
            self._out.clear()
            self._out_bytes = 0
            self._close_direct(flush=False)
            self.transport.abort()

    # -- errors and timeouts -------------------------------------------------
    def _protocol_error(self, exc: ProtocolError) -> None:
        log.warning("protocol error from %s: %s; closing the connection", self.peer, exc.reason)
        if exc.send_message_error and not self._closing:
            self._out.append(self.core.message_error_bytes())
        self._flush()
        self.close()

    def _watch_partial(self) -> None:
        # A peer that sends half a message, or a fragment train with no end,
        # must not hold the connection and its buffers forever.  A partial
        # message is timed from the last message completed; a train from its
        # first fragment, whatever else the peer sends meanwhile.
        core = self.core
        if self._closing or self.reading.closed:
            self._cancel_read_timer()
            return
        if core.partial:
            if self._read_timer is None:
                self._read_timer = self.loop.call_later(self.config.read_timeout, self._read_timed_out)
        else:
            self._cancel_read_timer()
        started = core.oldest_train_started
        if started is None:
            if self._train_timer is not None:
                self._train_timer.cancel()
                self._train_timer = None
        elif self._train_timer is None:
            self._train_timer = self.loop.call_at(started + self.config.read_timeout, self._train_timed_out)

    def _train_timed_out(self) -> None:
        self._train_timer = None
        started = self.core.oldest_train_started
        if started is None or self._closing:
            return
        timeout = self.config.read_timeout
        if self.reading.closed or self.loop.time() < started + timeout:
            # Held by us (a stall we cause is not the peer's), or an older
            # train finished: look again later.
            later = max(started + timeout, self.loop.time() + 1.0)
            self._train_timer = self.loop.call_at(later, self._train_timed_out)
            return
        self._protocol_error(ProtocolError(f"fragmented message unfinished after {timeout} s"))

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        self._protocol_error(ProtocolError(f"incomplete message stalled for {self.config.read_timeout} s"))


# With the compiled accelerator, the C twins take their places: every call crosses them twice.
for _name in ("data_received", "_process", "send", "_flush"):
    _accelerator.twin(__name__, f"GIOPProtocol.{_name}", "pyorb.aio._cprotocol")
del _name
